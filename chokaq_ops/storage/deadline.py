"""Client-side bounds on database calls: a statement that outlives its bound is aborted, never waited on.

A server-side `statement_timeout` ends a slow query cleanly, but not a call whose server is paused
(SIGSTOP, a VM frozen by its host) or whose connection is half-open (a proxy or NAT that stopped
forwarding without closing): the kernel still acknowledges every packet, so TCP keepalives see nothing
wrong and the client would wait for a reply forever. One watchdog thread per process holds the deadline
of every call in flight and, when one passes, aborts that call through its dialect (PostgreSQL: shut
down the connection's socket, so the blocked receive returns at once; SQLite: interrupt the
connection). The caller then gets a `TransientStorageError` and the usual retry rules apply.

Bounds are per thread: `limit(seconds)` lowers the bound of every call the thread makes inside it, and
ends retrying once its time is spent (the heartbeat uses it to finish within its interval).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from chokaq_ops import errors

log = logging.getLogger("chokaq.storage")
T = TypeVar("T")
R = TypeVar("R")


class DeadlineExceeded(errors.TransientStorageError):
    """A database call could not be made within its bound (its time limit was spent, no connection was
    free in time)."""


class CallAborted(DeadlineExceeded):
    """A database call outlived its bound and was aborted: its connection is broken, and the server may
    still run what it had received (a paused server resumes)."""


class _Watchdog:
    """One thread for the whole process: sleeps until the earliest deadline, aborts what has passed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._heap: list[tuple[float, int]] = []
        # token -> (deadline, abort callback); present only while the call is in flight
        self._live: dict[int, tuple[float, Callable[[], None]]] = {}
        self._fired: set[int] = set()
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None
        # When the thread looks at the heap next (monotonic): a deadline at or after it needs no wake-up.
        self._next_look = 0.0

    def arm(self, deadline: float, abort: Callable[[], None]) -> int:
        with self._lock:
            token = next(self._tokens)
            self._live[token] = (deadline, abort)
            heapq.heappush(self._heap, (deadline, token))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="chokaq-deadlines", daemon=True)
                self._thread.start()
            elif deadline < self._next_look:
                # Only a deadline earlier than the thread's next look wakes it: waking it for every call
                # (each one's deadline tops an empty heap) cost a thread switch per database call.
                self._cv.notify()
            return token

    def disarm(self, token: int) -> bool:
        """Forget a finished call; True when its abort was fired."""
        with self._lock:
            self._live.pop(token, None)
            # Calls mostly end in the order they began: dropping finished entries from the top keeps the
            # heap as small as the number of calls in flight (lazily, it would hold every call of the last
            # CommandTimeout seconds).
            heap = self._heap
            while heap and heap[0][1] not in self._live:
                heapq.heappop(heap)
            if token in self._fired:
                self._fired.discard(token)
                return True
            return False

    def _wait(self, seconds: float) -> None:
        """(lock held) Sleep until woken or `seconds` have passed."""
        self._next_look = time.monotonic() + seconds
        self._cv.wait(seconds)
        self._next_look = 0.0  # looking now: nothing needs to wake the thread until it sleeps again

    def _loop(self) -> None:
        with self._lock:
            while True:
                while self._heap and self._heap[0][1] not in self._live:
                    heapq.heappop(self._heap)  # finished in time
                if not self._heap:
                    self._wait(5.0)
                    continue
                deadline, token = self._heap[0]
                left = deadline - time.monotonic()
                if left > 0:
                    self._wait(left)
                    continue
                heapq.heappop(self._heap)
                _, abort = self._live[token]
                self._fired.add(token)
                # Under the lock: the call is still in flight (disarm takes the lock), so its connection
                # and socket are still its own and cannot have been closed and reused.
                try:
                    abort()
                except Exception as exc:  # an abort that fails leaves the call to its own timeouts
                    log.warning("could not abort a database call past its deadline: %s", exc)


_watchdog = _Watchdog()
_local = threading.local()


@contextlib.contextmanager
def limit(seconds: float | None) -> Iterator[None]:
    """Bound every database call this thread makes inside the block to end `seconds` from now at the
    latest (retries included). Nested limits keep the earlier end."""
    if seconds is None:
        yield
        return
    end = time.monotonic() + max(0.0, seconds)
    outer = getattr(_local, "end", None)
    _local.end = end if outer is None else min(outer, end)
    try:
        yield
    finally:
        _local.end = outer


def remaining() -> float | None:
    """Seconds left under this thread's `limit`, or None without one."""
    end = getattr(_local, "end", None)
    return None if end is None else end - time.monotonic()


def bound_for(default: float | None) -> float | None:
    """The bound of the next call: the default (Storage.CommandTimeout) or what is left of the thread's
    limit, whichever ends first. Raises DeadlineExceeded when the limit is already spent."""
    left = remaining()
    if left is None:
        return default
    if left <= 0:
        raise DeadlineExceeded("time limit spent before the database call began")
    return left if default is None else min(default, left)


def watched(fn: Callable[[T], R], arg: T, seconds: float, abort: Callable[[], None], what: str) -> R:
    """`fn(arg)` (one database call to `what`, a dialect's name) with `abort` fired if it is still running
    after `seconds`. An error raised by an aborted call becomes DeadlineExceeded. A plain call, not a
    context manager: it runs for every statement, and a generator-based `with` cost more than the watch
    itself."""
    token = _watchdog.arm(time.monotonic() + seconds, abort)
    try:
        result = fn(arg)
    except BaseException as exc:
        if _watchdog.disarm(token):
            raise CallAborted(f"{what} call did not answer within {seconds:.3g}s; aborted") from exc
        raise
    # Finished as the abort fired: the result stands. A PostgreSQL connection is broken by then, and its
    # next user meets a disconnect, which is transient and retried on a fresh connection.
    _watchdog.disarm(token)
    return result
