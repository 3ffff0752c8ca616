"""The upkeep (engine/upkeep.py, docs/endurance.md "Upkeep") keeps PostgreSQL's churning tables small
without the server's autovacuum: it vacuums when a vacuum can remove something and not while a snapshot
older than the last vacuum keeps everything, rebuilds jobs_hot's indexes once a long snapshot has left
them large, drops the invalid copies an interrupted rebuild leaves, and puts the connection's statement
timeout back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from chokaq_ops.engine import upkeep as upkeep_mod
from chokaq_ops.engine.handlers import Registry
from chokaq_ops.engine.hosting import Host
from chokaq_ops.engine.upkeep import VACUUM_MIN_DEAD, Upkeep
from chokaq_ops.settings import Settings
from chokaq_ops.storage import Store
from chokaq_ops.storage.dialects import from_url

pytestmark = pytest.mark.postgres_only


@pytest.fixture
def pg(pg_url: str) -> Iterator[Store]:
    with Store(pg_url, pool_size=1, transient_retry_base_delay=0.02) as s:
        yield s


@pytest.fixture
def sql(pg_url: str) -> Iterator[Any]:
    """Another application's connection, in autocommit."""
    conn = from_url(pg_url).connect()
    conn.autocommit = True
    yield conn
    conn.close()


def _hot(store: Store) -> dict[str, Any]:
    return next(r for r in store.run("upkeep_tables", write=False) if r["name"] == "jobs_hot")


def _churn(sql: Any, store: Store, rows: int, tag: str) -> dict[str, Any]:
    """`rows` jobs inserted and deleted (dead versions), then the statistics read once they show them."""
    sql.execute(
        "INSERT INTO jobs_hot (id, queue, type, payload, status, priority, due_at, created_at, updated_at) "
        "SELECT ? || g, 'q', 't', '{}', 0, 10, now(), now(), now() FROM generate_series(1, ?) g",
        f"{tag}-",
        rows,
    )
    sql.execute("DELETE FROM jobs_hot WHERE id LIKE ?", f"{tag}-%")
    sql.execute("SELECT pg_stat_force_next_flush()")
    sql.execute("SELECT 1")  # the flush happens when this session next goes idle
    deadline = time.monotonic() + 10
    while (hot := _hot(store))["dead"] < rows and time.monotonic() < deadline:
        time.sleep(0.1)
    return hot


def _holder(url: str) -> Any:
    """A session holding a snapshot, as an analyst's notebook does."""
    conn = from_url(url).connect()
    conn.autocommit = False
    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    conn.execute("SELECT count(*) FROM jobs_archive").fetchall()
    return conn


def test_dead_versions_are_vacuumed_when_nobody_holds_a_snapshot(pg, sql):
    assert _churn(sql, pg, VACUUM_MIN_DEAD + 1000, "a")["dead"] >= VACUUM_MIN_DEAD
    done = Upkeep(pg).run(force=True)
    assert "jobs_hot" in done["vacuumed"]
    assert _hot(pg)["dead"] < VACUUM_MIN_DEAD
    # Nothing left to do: the next round vacuums nothing.
    assert Upkeep(pg).run(force=True)["vacuumed"] == []


def test_a_held_snapshot_older_than_the_last_vacuum_is_waited_out(pg, sql, pg_url):
    up = Upkeep(pg)
    holder = _holder(pg_url)
    try:
        _churn(sql, pg, VACUUM_MIN_DEAD + 1000, "b")
        # The holder began after the last vacuum (there was none): one vacuum may remove what died before it.
        assert "jobs_hot" in up.run(force=True)["vacuumed"]
        hot = _churn(sql, pg, VACUUM_MIN_DEAD + 1000, "c")
        assert hot["dead"] >= VACUUM_MIN_DEAD and not hot["removable"]
        # Now it began before the last vacuum: every version since is kept, and a vacuum would only read.
        assert up.run(force=True)["vacuumed"] == []
    finally:
        holder.rollback()
        holder.close()
    assert "jobs_hot" in up.run(force=True)["vacuumed"]
    assert _hot(pg)["dead"] < VACUUM_MIN_DEAD


def test_indexes_left_large_are_rebuilt_once_no_old_snapshot_is_held(pg, sql, monkeypatch):
    """Whatever the dead versions of the last seconds (a busy queue always has tens of thousands): the
    rebuild takes only the versions some snapshot may still see."""
    monkeypatch.setattr(upkeep_mod, "REINDEX_MIN_BYTES", 2 * 2**20)
    up = Upkeep(pg)
    _churn(sql, pg, 60_000, "d")
    large = int(_hot(pg)["index_bytes"])
    assert large > 4 * 2**20
    done = up.run(force=True)
    assert done["vacuumed"] == ["jobs_hot"] and done["reindexed"]
    assert int(_hot(pg)["index_bytes"]) < large / 10
    assert pg.run("upkeep_invalid_hot_indexes", write=False) == []
    # At most once per REINDEX_GAP_S, however large they grow again.
    _churn(sql, pg, 60_000, "e")
    assert not up.run(force=True)["reindexed"]


def test_no_rebuild_while_a_long_snapshot_is_held(pg, sql, pg_url, monkeypatch):
    """REINDEX CONCURRENTLY waits for every older snapshot: the upkeep does not start one behind a holder."""
    monkeypatch.setattr(upkeep_mod, "REINDEX_MIN_BYTES", 2 * 2**20)
    monkeypatch.setattr(upkeep_mod, "REINDEX_MAX_HORIZON_S", 0.5)
    up = Upkeep(pg)
    holder = _holder(pg_url)
    try:
        _churn(sql, pg, 60_000, "f")
        time.sleep(1.0)
        assert not up.run(force=True)["reindexed"]
    finally:
        holder.rollback()
        holder.close()
    assert up.run(force=True)["reindexed"]


def test_an_interrupted_rebuild_leaves_no_invalid_index_behind(pg, sql, monkeypatch):
    """A failed CREATE INDEX CONCURRENTLY (as an interrupted REINDEX CONCURRENTLY's `_ccnew` copy) stays
    invalid and maintained by every write; the upkeep drops it before it rebuilds."""
    sql.execute(
        "INSERT INTO jobs_hot (id, queue, type, payload, status, priority, due_at, created_at, updated_at) "
        "SELECT 'dup' || g, 'q', 't', '{}', 0, 10, now(), now(), now() FROM generate_series(1, 3) g"
    )
    with pytest.raises(Exception, match=r"(?i)duplicate|unique"):
        sql.execute("CREATE UNIQUE INDEX CONCURRENTLY ix_jobs_hot_ccnew ON jobs_hot (queue)")
    assert [r["name"] for r in pg.run("upkeep_invalid_hot_indexes", write=False)] == ["ix_jobs_hot_ccnew"]
    monkeypatch.setattr(upkeep_mod, "REINDEX_MIN_BYTES", 0)
    monkeypatch.setattr(upkeep_mod, "REINDEX_BYTES_PER_ROW", 0)
    assert Upkeep(pg).run(force=True)["reindexed"]
    assert pg.run("upkeep_invalid_hot_indexes", write=False) == []


def test_the_connection_keeps_its_statement_timeout(pg):
    """VACUUM runs with no statement timeout; the pooled connection (the only one) gets its own back."""
    before = pg.run("session_statement_timeout", write=False)[0]["value"]
    assert before not in ("0", "0ms")  # Storage.CommandTimeout
    pg.db.run_outside_transaction("upkeep_vacuum_jobs_hot")
    assert pg.run("session_statement_timeout", write=False)[0]["value"] == before


def test_hosting_runs_it_unless_switched_off(pg):
    settings = Settings().with_overrides({"storage.url": pg.url})
    assert Host(settings, pg, registry=Registry(), run_worker=False, run_schedules=False).upkeep is not None
    off = settings.with_overrides({"storage.upkeep": False})
    assert Host(off, pg, registry=Registry(), run_worker=False, run_schedules=False).upkeep is None
    # Without the rescue (a worker-only host), the process that runs the rescue does the upkeep too.
    assert Host(settings, pg, registry=Registry(), run_worker=False, run_rescue=False).upkeep is None
