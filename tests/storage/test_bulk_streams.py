"""Bulk resurrects and purges with chunks in flight together (Storage.BulkStreams, storage/bulk_streams.py,
docs/configuration.md): every match moved once, the chunks planned over disjoint rows, an operation that
goes on past a chunk another session holds, and an error that stops it with every job in one table."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from storage_factories import OPS, assert_one_table, audit, dead_bulk, scalar, sql

from chokaq_ops import errors
from chokaq_ops.models import DlqFilter, FailureReason
from chokaq_ops.settings import load_settings
from chokaq_ops.storage import Store, admin_ops
from tests.support.dbprobe import allow_inserts, reject_inserts, row_locked

ZOMBIES = DlqFilter(reason=FailureReason.Zombie, queue="bs")


def _seed(store: Store, n: int) -> list[str]:
    """`n` Zombies in queue bs (several share a failed_at: ties are ordered by id) and 20 other dead jobs."""
    ids = dead_bulk(store, n, prefix="z", reason=FailureReason.Zombie, queue="bs")
    dead_bulk(store, 20, prefix="f", reason=FailureReason.Fatal, queue="bs")
    return ids


def _in_order(store: Store) -> list[str]:
    """The Zombies in the order a bulk operation by filter takes them: newest failure first, then id."""
    rows = sql(store, "SELECT id FROM jobs_dlq WHERE failure_reason = 2 ORDER BY failed_at DESC, id")
    return [r[0] for r in rows]


@pytest.mark.parametrize("by", ["filter", "ids"])
def test_a_bulk_resurrect_moves_every_match_once_in_chunks_of_its_size(
    store: Store, monkeypatch: pytest.MonkeyPatch, by: str
) -> None:
    monkeypatch.setattr(admin_ops, "RESURRECT_CHUNK", 10)
    ids = _seed(store, 95)
    seen: list[int] = []
    kw: dict[str, Any] = {"flt": ZOMBIES} if by == "filter" else {"ids": ids}
    result = store.resurrect_many(actor=OPS, progress=seen.append, **kw)
    assert (result.count, result.batches) == (95, 10)
    assert seen == sorted(seen) and seen[-1] == 95 and len(seen) == 10  # one report per committed chunk
    assert set(assert_one_table(store, ids).values()) == {"hot"}
    assert scalar(store, "SELECT count(*) FROM jobs_dlq WHERE failure_reason = 2") == 0
    assert scalar(store, "SELECT count(*) FROM jobs_dlq") == 20  # the other dead jobs stay
    moved = [a["job_id"] for a in audit(store, "resurrect")]
    assert sorted(moved) == sorted(ids)  # one audit row per job: none moved twice


def test_a_capped_resurrect_by_filter_takes_exactly_the_first_matches(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """max_jobs over chunks planned ahead: the plan stops at the cap, not at the end of a chunk."""
    monkeypatch.setattr(admin_ops, "RESURRECT_CHUNK", 10)
    _seed(store, 95)
    first = _in_order(store)[:35]
    result = store.resurrect_many(actor=OPS, flt=ZOMBIES, max_jobs=35)
    assert (result.count, result.batches) == (35, 4)
    assert sorted(r[0] for r in sql(store, "SELECT id FROM jobs_hot")) == sorted(first)


def test_a_bulk_purge_by_filter_deletes_every_match_once(store: Store) -> None:
    store.cleanup_batch_size = 10
    ids = _seed(store, 95)
    result = store.purge_dlq(actor=OPS, flt=ZOMBIES)
    assert (result.count, result.batches) == (95, 10)
    assert scalar(store, "SELECT count(*) FROM jobs_dlq") == 20
    assert sorted(a["job_id"] for a in audit(store, "purge_dlq")) == sorted(ids)


def test_storage_bulk_streams_is_checked_and_sqlite_runs_one(tmp_path) -> None:
    assert load_settings(None, env={}, overrides={"storage.bulk_streams": 3}).storage.bulk_streams == 3
    for bad in (0, 17):
        with pytest.raises(errors.ConfigError, match="BulkStreams"):
            load_settings(None, env={}, overrides={"Storage.BulkStreams": bad})
    with Store(f"sqlite:///{tmp_path / 'one.db'}", bulk_streams=4) as s:
        assert s.db.bulk_streams == 1  # one writer at a time: chunks would only queue for the lock


def test_chunks_in_flight_never_outnumber_the_pool(pg_url: str) -> None:
    # Each chunk holds a pooled connection while it runs: more streams than connections would wait on
    # each other for one.
    with (
        Store(pg_url, pool_size=1, bulk_streams=4) as one,
        Store(pg_url, pool_size=8, bulk_streams=4) as eight,
    ):
        assert (one.db.bulk_streams, eight.db.bulk_streams) == (1, 4)


# ---------------------------------------------------------------------------- PostgreSQL, real row locks


def _hot(store: Store) -> int:
    return int(scalar(store, "SELECT count(*) FROM jobs_hot"))


@pytest.mark.parametrize("by", ["filter", "ids"])
def test_chunks_in_flight_together_go_on_past_a_chunk_another_session_holds(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, by: str
) -> None:
    """The first chunk waits for a row another session holds; with one chunk at a time the whole
    operation would wait behind it. Here the other chunks commit meanwhile, and the held chunk moves
    once the row is released."""
    monkeypatch.setattr(admin_ops, "RESURRECT_CHUNK", 10)
    with Store(pg_url, pool_size=8, bulk_streams=2) as store:
        ids = _seed(store, 60)
        first = _in_order(store)[0]
        kw: dict[str, Any] = {"flt": ZOMBIES} if by == "filter" else {"ids": _in_order(store)}
        outcome: list[Any] = []
        with row_locked(store, "SELECT id FROM jobs_dlq WHERE id = ? FOR UPDATE", first):
            runner = threading.Thread(target=lambda: outcome.append(store.resurrect_many(actor=OPS, **kw)))
            runner.start()
            deadline = time.monotonic() + 20
            while _hot(store) < 50 and time.monotonic() < deadline:
                time.sleep(0.05)
            moved_meanwhile, waiting = _hot(store), runner.is_alive()
            held_dead = scalar(store, "SELECT count(*) FROM jobs_dlq WHERE id = ?", first)
        runner.join(timeout=30)  # released: the held chunk moves now
        assert not runner.is_alive()
        assert moved_meanwhile == 50, "the chunks after the held one did not commit while it waited"
        assert waiting and held_dead == 1  # the held chunk had not moved before the release
        [result] = outcome
        assert result.count == 60
        assert set(assert_one_table(store, ids).values()) == {"hot"}


def test_an_error_in_one_chunk_stops_the_operation_with_every_job_in_one_table(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chunk whose insert fails (a trigger rejects one job) rolls back alone: the chunks committed
    before or beside it stay committed, the error reaches the caller, and no job is lost or doubled."""
    monkeypatch.setattr(admin_ops, "RESURRECT_CHUNK", 10)
    with Store(pg_url, pool_size=8, bulk_streams=2) as store:
        ids = _seed(store, 80)
        rejected = _in_order(store)[35]  # in the fourth chunk
        reject_inserts(store, "jobs_hot", rejected)
        with pytest.raises(errors.ChokaqError, match="rejected by the test"):
            store.resurrect_many(actor=OPS, flt=ZOMBIES)
        where = assert_one_table(store, ids)
        assert where[rejected] == "dlq"
        held_back = [i for i in _in_order(store) if i in set(ids)]
        assert len(held_back) >= 10  # the failed chunk's ten at least, every one still dead
        hot = {i for i, at in where.items() if at == "hot"}
        assert {a["job_id"] for a in audit(store, "resurrect")} == hot  # audit rows only for what moved
        assert len(hot) >= 30  # the three chunks before it committed
        allow_inserts(store, "jobs_hot")
        rest = store.resurrect_many(actor=OPS, flt=ZOMBIES)
        assert rest.count == 80 - len(hot)
        assert set(assert_one_table(store, ids).values()) == {"hot"}


def test_an_interrupted_operation_lets_the_chunks_in_flight_end_and_starts_no_other(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The caller's progress callback raises at the first commit (Ctrl-C in the CLI): the chunks in
    flight end (committed whole), no thread takes another, and running it again finishes the rest."""
    monkeypatch.setattr(admin_ops, "RESURRECT_CHUNK", 10)
    with Store(pg_url, pool_size=8, bulk_streams=2) as store:
        ids = _seed(store, 60)

        def interrupt(done: int) -> None:
            raise KeyboardInterrupt(f"interrupted after {done}")

        with pytest.raises(KeyboardInterrupt):
            store.resurrect_many(actor=OPS, flt=ZOMBIES, progress=interrupt)
        where = assert_one_table(store, ids)
        moved = sorted(where.values()).count("hot")
        # The reported chunk, the other stream's chunk in flight, and at most one more either had taken
        # before it saw the stop: never the other three.
        assert moved % 10 == 0 and 10 <= moved <= 30, moved
        assert len(audit(store, "resurrect")) == moved
        rest = store.resurrect_many(actor=OPS, flt=ZOMBIES)
        assert rest.count == 60 - moved
        assert set(assert_one_table(store, ids).values()) == {"hot"}


@pytest.mark.parametrize("by", ["filter", "ids"])
def test_a_chunk_whose_connection_is_killed_in_flight_is_retried_and_counted_once(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, by: str
) -> None:
    """A real fault in a helper thread's chunk: the first chunk waits for a row another session holds;
    at the first commit of another chunk that session kills every connection of the store (the waiting
    chunk's among them) and lets the row go. The killed chunks are retried in their own threads, and the
    count is what committed: every job once, one audit row each."""
    monkeypatch.setattr(admin_ops, "RESURRECT_CHUNK", 10)
    with Store(pg_url, pool_size=8, bulk_streams=2, transient_retry_base_delay=0.02) as store:
        ids = _seed(store, 60)
        order = _in_order(store)
        kw: dict[str, Any] = {"flt": ZOMBIES} if by == "filter" else {"ids": order}
        killed: list[int] = []
        with row_locked(store, "SELECT id FROM jobs_dlq WHERE id = ? FOR UPDATE", order[0]) as holder:

            def fault(done: int) -> None:
                if not killed:
                    cur = holder.cursor()
                    cur.execute(
                        "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                    killed.append(int(cur.fetchone()[0]))
                    holder.rollback()

            result = store.resurrect_many(actor=OPS, progress=fault, **kw)
        assert killed and killed[0] >= 1
        assert store.db.retries_done >= 1  # the waiting chunk's statement died and was run again
        assert result.count == 60
        assert set(assert_one_table(store, ids).values()) == {"hot"}
        assert sorted(a["job_id"] for a in audit(store, "resurrect")) == sorted(ids)
