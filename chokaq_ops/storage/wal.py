"""SQLite's write-ahead log kept small (docs/endurance.md, "SQLite").

A reader that keeps a read transaction open (a notebook, a report, `sqlite3` in a terminal) pins the log:
no checkpoint may copy the frames after its snapshot back into the database, so the log cannot restart
and grows with every commit (1.5 GB in four minutes at 1,000 jobs/s). Once it lets go, the log must come
back under Storage.WalLimitMb on its own while workers keep writing: every connection sets
`journal_size_limit` (a log that restarts is cut back to the limit), and `keep()`, run every few seconds
by each serving process, checkpoints what it may (PASSIVE: never waits for anyone) and, when every frame
is back in the database and the file is over the limit, restarts and truncates it (TRUNCATE, waiting
at most 50 ms for a reader). How long the log has been pinned is what readiness and the metrics report.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from typing import Any

from chokaq_ops.storage.database import Database

TRUNCATE_WAIT_MS = 50  # a TRUNCATE checkpoint waits this long for readers, then gives up until next time
STALE_S = 10.0  # state() checkpoints itself when keep() has not run for this long
KEEP_INTERVAL_S = 5.0  # how often a serving process runs keep() (engine/hosting.py)


class Wal:
    def __init__(self, db: Database, limit_bytes: int) -> None:
        self.db = db
        self.limit_bytes = limit_bytes
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._ran_at: float | None = None
        self._last: tuple[int, int] | None = None  # (frames, copied) of the last round
        # Since when no round copied anything new while frames waited: a reader's snapshot holds them.
        self._pinned_since: float | None = None
        self.truncated = 0  # times keep() cut the log back

    @property
    def path(self) -> str | None:
        path = getattr(self.db.dialect, "path", None)
        return None if not path or path == ":memory:" or path.startswith("file:") else f"{path}-wal"

    def size(self) -> int | None:
        """The log's size in bytes (0 when there is none yet; None on PostgreSQL)."""
        path = self.path
        if path is None:
            return None
        try:
            return os.path.getsize(path)
        except OSError:
            return 0

    def keep(self) -> None:
        """One round: checkpoint what no reader needs; truncate the log if it is all checkpointed and over
        the limit (or at it). Never waits on a reader for longer than TRUNCATE_WAIT_MS."""
        if self.path is None:
            return
        with self._lock:
            conn = self._connection()
            busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            now = time.monotonic()
            self._ran_at = now
            last, self._last = self._last, (frames, copied)
            # Workers' short read transactions hold a few frames back at any moment; a long reader holds
            # the same frame round after round while frames pile up behind it.
            stuck = copied < frames and last is not None and frames >= last[0] and copied <= last[1]
            if not stuck:
                self._pinned_since = None
            elif self._pinned_since is None:
                self._pinned_since = now
            if busy or copied < frames:
                return  # a reader's snapshot still needs frames the database does not hold yet
            # At the limit too: journal_size_limit cuts a log that restarts back to exactly the limit, and
            # only a TRUNCATE takes it under (the soak left it at 64 MiB for good).
            if (self.size() or 0) >= self.limit_bytes:
                busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                if not busy:
                    self.truncated += 1

    def state(self) -> dict[str, Any] | None:
        """Size, limit, and for how long no checkpoint could copy every frame back (a reader pins the log);
        None on PostgreSQL."""
        if self.path is None:
            return None
        if self._ran_at is None or time.monotonic() - self._ran_at > STALE_S:
            with contextlib.suppress(sqlite3.Error):  # a busy moment: report what there is
                self.keep()
        since = self._pinned_since
        return {
            "size_bytes": self.size(),
            "limit_bytes": self.limit_bytes,
            "pinned_seconds": 0.0 if since is None else round(time.monotonic() - since, 1),
        }

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = self.db.dialect.connect()
            conn.execute(f"PRAGMA busy_timeout = {TRUNCATE_WAIT_MS}")
            self._conn = conn
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self.db.dialect.close(self._conn)
                self._conn = None
