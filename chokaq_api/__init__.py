"""chokaq_api: the REST API (Flask + flask-smorest) over chokaq_ops."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chokaq_api.app import create_app
    from chokaq_api.flask_ext import ChokaQ

__all__ = ["ChokaQ", "create_app"]


def __getattr__(name: str) -> Any:
    # Imported on first use: every `chokaq` command loads chokaq_api.serve to list `serve`, and should
    # not pay for Flask and every resource module unless it serves.
    if name == "create_app":
        from chokaq_api.app import create_app

        return create_app
    if name == "ChokaQ":
        from chokaq_api.flask_ext import ChokaQ

        return ChokaQ
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
