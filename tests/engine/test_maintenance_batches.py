"""Bounded maintenance on SQLite and PostgreSQL: pruning, the rescue phases and plan freezing commit in
transactions of at most CleanupBatchSize rows, each visible to another connection as soon as it ends,
and together finish the whole job; on SQLite a writer waiting for the lock gets it between batches."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from crash.support import age, counts, fetched, processing, sql
from dbprobe import ago_expr, scalar

from chokaq_ops.engine.rescue import Rescuer
from chokaq_ops.settings import Settings
from chokaq_ops.storage import Store

BATCH = 3
DAY = 86400


@pytest.fixture
def batched(db_url: str) -> Iterator[Store]:
    with Store(db_url, pool_size=8, cleanup_batch_size=BATCH, transient_retry_base_delay=0.02) as s:
        yield s


@pytest.fixture
def observer(db_url: str) -> Iterator[Store]:
    """A second store with its own connections: it sees only what the maintenance has committed."""
    with Store(db_url, pool_size=2) as s:
        yield s


class BatchProbe:
    """After each run of a named maintenance query returns (its transaction has ended), records what
    `look()` reads on the observer's own connection."""

    def __init__(self, store: Store, names: str, look: Callable[[], Any]) -> None:
        self.seen: list[Any] = []
        original = store.run

        def run(query: str, /, **params: Any) -> list[dict[str, Any]]:
            rows = original(query, **params)
            if query in names.split():
                assert params["batch"] == BATCH
                self.seen.append(look())
            return rows

        store.run = run  # type: ignore[method-assign]


def old_buckets_and_events(store: Store, n: int) -> None:
    for i in range(n):
        sql(
            store,
            "INSERT INTO metric_buckets (bucket_start, queue, outcome, failure_reason, completed_count)"
            f" VALUES ({ago_expr(store)}, ?, 0, 0, 1)",
            9 * DAY + i * 60,
            f"q{i}",
        )
        store.add_event("test", f"old {i}")
    sql(store, f"UPDATE events SET at = {ago_expr(store)}", 9 * DAY)


def test_pruning_commits_batches_of_cleanup_batch_size_until_done(batched, observer):
    old_buckets_and_events(batched, 8)
    fresh = batched.add_event("test", "fresh")
    sql(
        batched,
        "INSERT INTO metric_buckets (bucket_start, queue, outcome, failure_reason)"
        f" VALUES ({ago_expr(batched)}, 'q', 0, 0)",
        60,
    )

    def left() -> tuple[int, int]:
        return (
            int(scalar(observer, "SELECT count(*) FROM metric_buckets")),
            int(scalar(observer, "SELECT count(*) FROM events")),
        )

    probe = BatchProbe(batched, "prune_buckets prune_events", left)
    done = batched.prune(buckets_older_than_s=8 * DAY, events_older_than_s=8 * DAY)
    assert done == {"buckets": 8, "events": 8, "batches": 6}
    # Another connection saw each batch commit on its own: 3, 3, then the last 2 of the 8 old buckets
    # (the events still all there), then the same for the events.
    assert probe.seen == [(6, 9), (3, 9), (1, 9), (1, 6), (1, 3), (1, 1)]
    assert [r[0] for r in sql(batched, "SELECT id FROM events")] == [fresh]


def test_pruning_a_multiple_of_the_batch_stops_after_one_empty_batch(batched, observer):
    old_buckets_and_events(batched, 2 * BATCH)
    probe = BatchProbe(batched, "prune_events", lambda: int(scalar(observer, "SELECT count(*) FROM events")))
    done = batched.prune(buckets_older_than_s=8 * DAY, events_older_than_s=8 * DAY)
    assert probe.seen == [3, 0, 0] and done["events"] == 2 * BATCH


def test_recover_abandoned_commits_batches_until_done(batched, observer):
    ids = fetched(batched, "w1", 8, prefix="f")
    live = fetched(batched, "w2", 2, prefix="live")
    age(batched, "jobs_hot", ids, 700, "updated_at")
    probe = BatchProbe(
        batched,
        "recover_abandoned",
        lambda: int(scalar(observer, "SELECT count(*) FROM jobs_hot WHERE status = 1")),
    )
    report = Rescuer(batched, Settings()).sweep()  # fetched timeout 600 s
    assert probe.seen == [7, 4, 2]  # 8 abandoned + 2 live fetched rows: 3, 3, 2 recovered
    assert sorted(report.recovered_ids) == sorted(ids)
    assert {r[0] for r in sql(batched, "SELECT id FROM jobs_hot WHERE status = 1")} == set(live)


def test_archive_zombies_commits_batches_until_done(batched, observer):
    ids = processing(batched, "w1", 8, prefix="z")
    live = processing(batched, "w2", 1, prefix="live")
    for i, job_id in enumerate(ids):  # the later the id, the staler its heartbeat
        age(batched, "jobs_hot", [job_id], 700 + 10 * i, "updated_at", "heartbeat_at")
    before = counts(batched)
    probe = BatchProbe(
        batched,
        "archive_zombies",
        lambda: (
            int(scalar(observer, "SELECT count(*) FROM jobs_dlq")),
            int(scalar(observer, "SELECT coalesce(sum(failed_total), 0) FROM stats_summary")),
        ),
    )
    report = Rescuer(batched, Settings()).sweep()  # zombie timeout 600 s
    # Each batch moved its rows and their counters in one transaction.
    assert probe.seen == [(3, 3), (6, 6), (8, 8)]
    assert sorted(report.archived_ids) == sorted(ids)
    after = counts(batched)
    assert (after["hot"], after["dlq"], after["failed_total"]) == (before["hot"] - 8, 8, 8)
    assert [r[0] for r in sql(batched, "SELECT id FROM jobs_hot")] == live
    # The stalest go first.
    assert set(report.archived_ids[:BATCH]) == set(ids[-BATCH:])


def test_sqlite_heartbeats_land_between_prune_batches(db_url):
    if not db_url.startswith("sqlite"):
        pytest.skip("PostgreSQL locks rows, not the database: there is no writer lock to wait for")
    url = db_url
    with Store(url, cleanup_batch_size=500) as pruner, Store(url, pool_size=1) as worker:
        running = processing(worker, "w1", 2, prefix="p")
        sql(
            pruner,
            "INSERT INTO events (at, kind, message) WITH RECURSIVE s(g) AS"
            " (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < 20000)"
            " SELECT strftime('%Y-%m-%d %H:%M:%f', 'now', '-9 days'), 'test', 'old ' || g FROM s",
        )
        during: list[int] = []
        finished = threading.Event()

        def prune() -> None:
            try:
                pruner.prune(buckets_older_than_s=8 * DAY, events_older_than_s=8 * DAY)
            finally:
                finished.set()

        thread = threading.Thread(target=prune)
        thread.start()
        try:
            while not finished.is_set():
                assert worker.heartbeat("w1", running) == set(running)
                if not finished.is_set():
                    during.append(int(scalar(worker, "SELECT count(*) FROM events")))
                time.sleep(0.001)
        finally:
            thread.join(timeout=60)
        # Heartbeats landed while the prune was half done, not only after it: the pause between
        # batches let them take the writer lock.
        partial = [n for n in during if 0 < n < 20000]
        assert len(partial) >= 3, during
        assert int(scalar(worker, "SELECT count(*) FROM events")) == 0
