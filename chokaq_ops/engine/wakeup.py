"""Wake-ups for an idle claim loop: new, resurrected, released or now-due jobs start within milliseconds
instead of at the next poll (`Worker.PollingInterval`, which stays as the safety net).

- In-process: a Store of this process that enqueues calls `storage.signals.publish`, which reaches every
  worker of the process on the same database.
- PostgreSQL: the statements that make jobs claimable (enqueue, resurrect, release, reschedule, the
  rescue of abandoned fetches) call `pg_notify('chokaq_jobs', '')` once per statement, delivered at
  commit. Each worker process holds one listening connection through psycopg 3 (pyodbc cannot receive
  notifications), imported only here. A listener that loses its connection reconnects with a bounded
  backoff, and wakes the loop once it is back (anything enqueued meanwhile is found by that claim).
- SQLite: a thread reads `PRAGMA data_version` on a connection of its own every
  `Worker.ChangeCheckInterval` seconds while the file changes; the number changes whenever another
  connection (any process) commits to the file. Once the file has been quiet for HOT_WINDOW_S the checks
  back off, doubling up to IDLE_CHECK_S apart (ChangeChecks): 500 checks a second were 4 % of a core for
  an idle `chokaq serve`. A commit brings the fast pace back at once; this process's own enqueues wake its
  workers in-process whatever the pace.

A wake only sets the claim loop's flag: a storm of notifications while the loop claims costs one more
claim at most, never one per notification.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from typing import Any

from chokaq_ops.storage import Store, signals
from chokaq_ops.storage.dialects import PostgresDialect, SqliteDialect

log = logging.getLogger("chokaq.worker")

CHANNEL = "chokaq_jobs"
RECONNECT_MIN_S = 0.1
RECONNECT_MAX_S = 5.0
LISTEN_TICK_S = 0.5  # how often a quiet listener looks at its stop flag
# SQLite: the change checks stay at Worker.ChangeCheckInterval for this long after the file last changed
# (a producer enqueueing every few ms keeps them there), then back off, doubling, to at most IDLE_CHECK_S
# apart (and never further apart than Worker.PollingInterval).
HOT_WINDOW_S = 0.1
IDLE_CHECK_S = 0.2


class ChangeChecks:
    """The pace of the SQLite watcher's checks: `fastest` apart while the file changes, backing off by
    doubling to `slowest` once it has been quiet for `hot_window` seconds."""

    def __init__(self, fastest: float, slowest: float, hot_window: float = HOT_WINDOW_S) -> None:
        self.fastest = fastest
        self.slowest = max(fastest, slowest)
        self.hot_window = hot_window
        self.interval = fastest
        self._changed_at: float | None = None

    def after(self, changed: bool, now: float) -> float:
        """The wait before the next check, given whether this one saw a change (at monotonic `now`)."""
        if changed or self._changed_at is None:
            self._changed_at = now
            self.interval = self.fastest
        elif now - self._changed_at >= self.hot_window:
            self.interval = min(self.slowest, self.interval * 2)
        return self.interval


_shared_lock = threading.Lock()
_shared: dict[str, tuple[Watcher, int]] = {}


def acquire(store: Store, *, change_check_interval: float, polling_interval: float = 1.0) -> Watcher:
    """The process's watcher of `store`'s database, started on first use: one listening connection per
    process and database, however many workers. Its wakes reach every subscriber of the database URL
    (storage/signals.py). Each `acquire` is paired with a `release`."""
    url = store.dialect.url
    with _shared_lock:
        watcher, users = _shared.get(url, (None, 0))
        if watcher is None:
            watcher = Watcher(
                store, change_check_interval=change_check_interval, polling_interval=polling_interval
            )
            watcher.start()
        _shared[url] = (watcher, users + 1)
        return watcher


def release(watcher: Watcher) -> None:
    url = watcher.store.dialect.url
    with _shared_lock:
        current, users = _shared.get(url, (None, 0))
        if current is not watcher:
            return
        if users > 1:
            _shared[url] = (watcher, users - 1)
            return
        del _shared[url]
    watcher.stop()


class Watcher:
    """Watches one database for jobs made claimable by other processes; wakes the workers of this one."""

    def __init__(self, store: Store, *, change_check_interval: float, polling_interval: float = 1.0) -> None:
        self.store = store
        self.change_check_interval = change_check_interval
        self.checks = ChangeChecks(change_check_interval, min(IDLE_CHECK_S, polling_interval))
        self.listening = threading.Event()  # set while connected (and, on PostgreSQL, listening)
        self.reconnects = 0
        self.backend_pid: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def wake(self) -> None:
        signals.publish(self.store.dialect.url)

    def start(self) -> None:
        dialect = self.store.dialect
        if isinstance(dialect, PostgresDialect):
            self._thread = threading.Thread(
                target=self._listen_pg, args=(dialect,), name="chokaq-wakeup", daemon=True
            )
        elif isinstance(dialect, SqliteDialect) and dialect.path != ":memory:":
            self._thread = threading.Thread(
                target=self._watch_sqlite, args=(dialect.path,), name="chokaq-wakeup", daemon=True
            )
        else:
            return  # one process only: the in-process wake-up is all there is
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(LISTEN_TICK_S * 4)

    # ------------------------------------------------------------------ PostgreSQL

    def _listen_pg(self, dialect: PostgresDialect) -> None:
        try:
            import psycopg
        except ImportError:
            log.warning("psycopg is not installed: new jobs are found by polling only (pip install psycopg)")
            return
        params = dialect.libpq_params()
        pause = RECONNECT_MIN_S
        while not self._stop.is_set():
            conn: Any = None
            try:
                conn = psycopg.connect(autocommit=True, **params)
                conn.execute(f"LISTEN {CHANNEL}")
                self.backend_pid = conn.info.backend_pid
                self.listening.set()
                pause = RECONNECT_MIN_S
                self.wake()  # jobs enqueued while no one listened
                while not self._stop.is_set():
                    for _ in conn.notifies(timeout=LISTEN_TICK_S, stop_after=1):
                        self.wake()
            except psycopg.Error as exc:
                self.listening.clear()
                if self._stop.is_set():
                    return
                self.reconnects += 1
                log.warning("job listener lost its connection (reconnecting in %.1fs): %s", pause, exc)
                self._stop.wait(pause)
                pause = min(RECONNECT_MAX_S, pause * 2)
            finally:
                self.listening.clear()
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.close()

    # ------------------------------------------------------------------ SQLite

    def _watch_sqlite(self, path: str) -> None:
        conn: sqlite3.Connection | None = None
        last = None
        while not self._stop.is_set():
            try:
                if conn is None:
                    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=1.0)
                    self.listening.set()
                version = conn.execute("PRAGMA data_version").fetchone()[0]
                changed = last is not None and version != last
                if changed:
                    self.wake()
                last = version
            except sqlite3.Error as exc:
                log.warning("cannot watch the SQLite file for new jobs (trying again): %s", exc)
                self.listening.clear()
                with contextlib.suppress(Exception):
                    if conn is not None:
                        conn.close()
                conn, last = None, None
                self._stop.wait(RECONNECT_MAX_S)
                continue
            self._stop.wait(self.checks.after(changed, time.monotonic()))
        self.listening.clear()
        if conn is not None:
            conn.close()
