"""In-process wake-ups: a store that made jobs claimable tells the workers of the same process at once.

Workers subscribe by database URL, so a producer's Store and a worker's Store on the same database (two
objects, one process) reach each other. Other processes learn of new jobs from the database itself
(engine/wakeup.py: NOTIFY on PostgreSQL, PRAGMA data_version on SQLite)."""

from __future__ import annotations

import threading
from collections.abc import Callable

_lock = threading.Lock()
_subscribers: dict[str, set[Callable[[], None]]] = {}


def subscribe(url: str, wake: Callable[[], None]) -> None:
    with _lock:
        _subscribers.setdefault(url, set()).add(wake)


def unsubscribe(url: str, wake: Callable[[], None]) -> None:
    with _lock:
        found = _subscribers.get(url)
        if found is not None:
            found.discard(wake)
            if not found:
                del _subscribers[url]


def publish(url: str) -> None:
    """Wake every subscriber of `url`. Each wake only sets a flag and notifies a condition: cheap enough
    to call after every committed enqueue."""
    with _lock:
        wakes = list(_subscribers.get(url, ()))
    for wake in wakes:
        wake()
