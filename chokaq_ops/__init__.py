"""chokaq: a production job queue on a relational database.

The names below are the public surface; heavier parts load on first use so `import chokaq_ops` stays cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from chokaq_ops.errors import ChokaqError, FatalJobError, ThrottledError
from chokaq_ops.models import Actor, DlqFilter, FailureReason, NewJob, Status
from chokaq_ops.settings import Settings, load_settings

__version__ = "0.1.0"

_LAZY = {
    "job": "chokaq_ops.engine.handlers",
    "CircuitPolicy": "chokaq_ops.engine.handlers",
    "JobContext": "chokaq_ops.engine.handlers",
    "connect": "chokaq_ops.client",
    "Store": "chokaq_ops.storage",
    "Schedule": "chokaq_ops.schedules",
}

__all__ = [
    "Actor",
    "ChokaqError",
    "CircuitPolicy",
    "DlqFilter",
    "FailureReason",
    "FatalJobError",
    "JobContext",
    "NewJob",
    "Schedule",
    "Settings",
    "Status",
    "Store",
    "ThrottledError",
    "connect",
    "job",
    "load_settings",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'chokaq_ops' has no attribute {name!r}")


def __dir__() -> list[str]:
    # Tab completion (IPython, Jupyter, dir()) lists the lazy names too, not only those loaded so far.
    return sorted({*globals(), *__all__})
