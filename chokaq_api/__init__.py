"""chokaq_api: the REST API (Flask + flask-smorest) over chokaq_ops."""

from __future__ import annotations

from chokaq_api.app import create_app

__all__ = ["create_app"]
