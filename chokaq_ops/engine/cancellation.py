"""`JobContext.cancelled`: a `threading.Event` whose lock and condition are made only if a thread waits.

A worker makes one context per job, and a `threading.Event` costs a lock and a condition (2 us, a
tenth of what a worker spends per job at concurrency 8, docs/benchmarks.md); most handlers only test
`is_set()` or never look. The flag is kept here; the first `wait()` makes the real event, set to match.
"""

from __future__ import annotations

import threading

# One lock for every Cancellation's rare changes: set() and a first wait() agree on the flag and on
# whether the event exists; is_set() reads the flag alone.
_LOCK = threading.Lock()


class Cancellation(threading.Event):
    """`threading.Event`'s interface (it is one, for isinstance and type checks) with a lazy body."""

    def __init__(self) -> None:
        self._flag = False
        self._event: threading.Event | None = None

    def is_set(self) -> bool:
        return self._flag

    isSet = is_set

    def set(self) -> None:
        self._put(True)

    def clear(self) -> None:
        self._put(False)

    def _put(self, flag: bool) -> None:
        with _LOCK:
            self._flag = flag
            event = self._event
        if event is not None and flag:
            event.set()
        elif event is not None:
            event.clear()

    def wait(self, timeout: float | None = None) -> bool:
        if self._flag:
            return True
        with _LOCK:
            event = self._event
            if event is None:
                event = self._event = threading.Event()
                if self._flag:
                    event.set()
        return event.wait(timeout)

    def __repr__(self) -> str:
        return f"<Cancellation {'set' if self._flag else 'unset'}>"
