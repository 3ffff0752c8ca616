"""The database calls of one Worker's threads, in turns on SQLite.

SQLite has one writer: serialising this process's writes avoids its sleeping busy handler. On
PostgreSQL the calls go straight through.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from chokaq_ops.storage import Store
from chokaq_ops.storage.deadline import DeadlineExceeded

T = TypeVar("T")


class SerialWrites:
    def __init__(self, store: Store) -> None:
        self.turn = threading.Lock() if store.dialect.name == "sqlite" else None

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self.turn is None:
            return fn(*args, **kwargs)
        with self.turn:
            return fn(*args, **kwargs)

    def call_within(self, seconds: float, fn: Callable[..., T], *args: Any) -> T:
        """`call` that waits at most `seconds` for this process's SQLite write turn."""
        if self.turn is None:
            return fn(*args)
        if not self.turn.acquire(timeout=max(0.0, seconds)):
            raise DeadlineExceeded(f"no turn to write within {seconds:.3g}s (this process's writes queue)")
        try:
            return fn(*args)
        finally:
            self.turn.release()
