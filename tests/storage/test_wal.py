"""SQLite's write-ahead log stays bounded (storage/wal.py, docs/endurance.md): a reader that keeps a read
transaction open pins it and it grows, the store says for how long; once the reader lets go, the log is
cut back under Storage.WalLimitMb while writers keep going."""

from __future__ import annotations

import sqlite3
import time

import pytest

from chokaq_ops.models import NewJob
from chokaq_ops.storage import Store
from chokaq_ops.storage.migrate import migrate

LIMIT = 1 * 2**20


def _write(store: Store, n: int) -> None:
    for _ in range(n):
        store.enqueue([NewJob(type="t", payload='{"pad": "' + "x" * 2000 + '"}') for _ in range(200)])


def test_a_pinned_log_grows_and_is_cut_back_once_the_reader_lets_go(tmp_path):
    path = tmp_path / "chokaq.db"
    with Store(f"sqlite:///{path}", pool_size=2, wal_limit_bytes=LIMIT) as store:
        migrate(store)
        store.enqueue([NewJob(type="t")])
        reader = sqlite3.connect(path)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM jobs_archive").fetchall()  # an analyst's open read
        store.wal.keep()
        _write(store, 5)
        store.wal.keep()
        _write(store, 5)
        store.wal.keep()
        time.sleep(0.05)
        _write(store, 2)
        store.wal.keep()
        state = store.wal.state()
        assert state is not None
        assert state["size_bytes"] > 3 * LIMIT  # pinned: nothing could be checkpointed past the reader
        assert state["pinned_seconds"] > 0
        reader.rollback()
        reader.close()
        _write(store, 1)  # workers keep writing meanwhile
        store.wal.keep()
        _write(store, 1)
        store.wal.keep()
        state = store.wal.state()
        assert state["size_bytes"] <= LIMIT and state["pinned_seconds"] == 0
        assert store.wal.truncated >= 1


def test_postgresql_has_no_log_to_keep(pg_url):
    with Store(pg_url, pool_size=1) as store:
        assert store.wal.state() is None and store.wal.size() is None
        store.wal.keep()  # nothing to do, no error


@pytest.mark.parametrize("limit_mb", [1, 64])
def test_connections_cut_a_restarted_log_back_to_the_limit(tmp_path, limit_mb):
    with Store(f"sqlite:///{tmp_path / 'x.db'}", pool_size=1, wal_limit_bytes=limit_mb * 2**20) as store:
        with store.connection() as conn:
            assert conn.execute("PRAGMA journal_size_limit").fetchone()[0] == limit_mb * 2**20
