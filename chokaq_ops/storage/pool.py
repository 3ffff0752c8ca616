"""A small thread-safe connection pool: DB-API connections are not shared between threads."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from chokaq_ops.storage.deadline import DeadlineExceeded


class Pool:
    """At most `size` connections in use at once, and at most `size` open. A connection has a kind (""
    unless a caller asks for another, e.g. the PostgreSQL dialect's hot-path and producer connections
    with their own session settings); the factory is called with the kind, idle connections are reused
    for their own kind only, and one of another kind is closed to make room for a new one."""

    def __init__(
        self, factory: Callable[..., Any], size: int, closer: Callable[[Any], None] | None = None
    ) -> None:
        self._factory = factory
        # Closes a connection quietly (the factory's owner may keep something per connection to drop).
        self._close = closer or _close_quietly
        self._idle: dict[str, list[Any]] = {}
        # One lock for the places and the idle lists: a semaphore beside it was a second lock (and, in
        # Python, a Condition) taken twice per statement.
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)
        self.size = size
        self._free = size  # places not in use
        self._waiting = 0  # callers waiting for a place
        self._closed = False
        self._open = 0  # connections made and not closed yet, in use or idle

    @contextmanager
    def connection(self, kind: str = "", timeout: float | None = None) -> Iterator[Any]:
        """A connection of `kind`; waits at most `timeout` seconds for a free one (all in use: calls stuck
        on a paused server hold them) and then raises DeadlineExceeded."""
        conn = self.acquire(kind, timeout)
        try:
            yield conn
        except BaseException:
            self.release(conn, kind, failed=True)
            raise
        self.release(conn, kind)

    def acquire(self, kind: str = "", timeout: float | None = None) -> Any:
        """`connection` without the context manager (the hot paths' per-statement cost): every acquire
        must be followed by exactly one `release` of the connection it returned."""
        spare = None
        with self._lock:
            if self._free <= 0 and not self._wait_for_place(timeout):
                raise DeadlineExceeded(
                    f"no free database connection within {timeout:.3g}s (pool of {self.size})"
                )
            self._free -= 1
            idle = self._idle.get(kind)
            conn = idle.pop() if idle else None
            if conn is None and self._open >= self.size:
                # As many open as places, this kind has none idle: another kind's idle one gives way, or
                # a process that both enqueues and works would hold a pool of each kind.
                spare = next((c.pop() for c in self._idle.values() if c), None)
                if spare is not None:
                    self._open -= 1
            if conn is None:
                self._open += 1
        if spare is not None:
            self._close(spare)
        if conn is None:
            try:
                conn = self._factory(kind) if kind else self._factory()
            except BaseException:
                with self._lock:
                    self._open -= 1
                    self._give_back_place()
                raise
        return conn

    def release(self, conn: Any, kind: str = "", *, failed: bool = False) -> None:
        """Give back a connection from `acquire`. One that saw an error (`failed`) may be mid-transaction
        or dead: it is closed, never reused."""
        with self._lock:
            self._give_back_place()  # first: a release too many raises before it changes anything
            keep = not failed and not self._closed
            if keep:
                self._idle.setdefault(kind, []).append(conn)
            else:
                self._open -= 1
        if not keep:
            self._close(conn)

    def _wait_for_place(self, timeout: float | None) -> bool:
        """(lock held) Wait until a place is free; False when `timeout` seconds passed first."""
        end = None if timeout is None else time.monotonic() + timeout
        self._waiting += 1
        try:
            while self._free <= 0:
                if end is None:
                    self._freed.wait()
                    continue
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._freed.wait(left)
            return True
        finally:
            self._waiting -= 1

    def _give_back_place(self) -> None:
        """(lock held)"""
        if self._free >= self.size:
            raise RuntimeError("a connection was released more often than acquired")
        self._free += 1
        if self._waiting:
            self._freed.notify()

    def discard_idle(self) -> None:
        """Drop idle connections, e.g. after the server restarted."""
        with self._lock:
            idle, self._idle = self._idle, {}
            self._open -= sum(len(conns) for conns in idle.values())
        for conns in idle.values():
            for conn in conns:
                self._close(conn)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self.discard_idle()


def _close_quietly(conn: Any) -> None:
    with contextlib.suppress(Exception):
        conn.close()
