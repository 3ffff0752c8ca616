"""Bounded maintenance on SQLite and PostgreSQL: pruning, the rescue phases and plan freezing commit in
transactions of at most CleanupBatchSize rows, each visible to another connection as soon as it ends,
and together finish the whole job; on SQLite a writer waiting for the lock gets it between batches."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from crash.support import age, counts, enqueue, fetched, processing, sql

from chokaq_ops.engine.rescue import Rescuer
from chokaq_ops.models import Actor, DlqFilter, FailureReason, HotFilter
from chokaq_ops.settings import Settings
from chokaq_ops.storage import Store
from chokaq_ops.storage.worker_ops import Dead
from tests.support.dbprobe import ago_expr, scalar

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

    def __init__(
        self, store: Store, names: str, look: Callable[[], Any], then: Callable[[int], None] | None = None
    ) -> None:
        self.seen: list[Any] = []
        # The Database's own runner: the storage parts run their batches through it.
        original = store.db.run

        def run(query: str, /, **params: Any) -> list[dict[str, Any]]:
            rows = original(query, **params)
            if query in names.split():
                assert params.get("batch", BATCH) == BATCH and len(params.get("items", ())) <= BATCH
                self.seen.append(look())
                if then is not None:
                    then(len(self.seen))  # something another client does between two batches
            return rows

        store.db.run = run  # type: ignore[method-assign]


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
    assert done == {"buckets": 8, "events": 8, "failures": 0, "schedule_runs": 0, "batches": 6}
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
            counts(observer)["failed_total"],
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


@pytest.mark.sqlite_only
def test_sqlite_heartbeats_land_between_prune_batches(db_url):
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


# ------------------------------------------------------------------------------------ plan freezing


def dead(store: Store, n: int, prefix: str, minutes_ago: int = 0) -> list[str]:
    """n dead jobs, the first the most recent failure, one minute apart, `minutes_ago` before now."""
    ids = processing(store, "w", n, prefix=prefix)
    assert sorted(store.move_to_dlq("w", [Dead(i, FailureReason.Fatal, "boom") for i in ids])) == sorted(ids)
    for i, job_id in enumerate(ids):
        age(store, "jobs_dlq", [job_id], 60 * (minutes_ago + i + 1), "failed_at")
    return ids


def plan_rows(observer: Store) -> tuple[int, int]:
    return (
        int(scalar(observer, "SELECT count(*) FROM plan_items")),
        int(scalar(observer, "SELECT count(*) FROM plans")),
    )


def test_a_filter_plan_is_frozen_in_batches_as_of_its_start_without_one_long_snapshot(batched, observer):
    ids = dead(batched, 8, "d")
    running = processing(batched, "w", 1, prefix="r")

    def meanwhile(batch: int) -> None:
        if batch == 1:
            # After the first batch: a matching job dies (it failed after the freeze began), and one not
            # yet frozen leaves the DLQ. Each batch reads in a transaction of its own (no snapshot held
            # for the whole freeze: docs/endurance.md). SQLite's clock counts milliseconds, and a death in
            # the freeze's own millisecond counts as dead by its start: this one comes a tick later.
            time.sleep(0.002)
            assert batched.move_to_dlq("w", [Dead(running[0], FailureReason.Fatal, "late")]) == running
            assert batched.resurrect(ids[-1], actor=Actor("bob"))

    probe = BatchProbe(batched, "plan_add_items", lambda: plan_rows(observer), meanwhile)
    plan = batched.create_plan("purge", actor=Actor("alice"), flt=DlqFilter())
    # Transactions of at most 3 items, each seen by another connection before the plan existed.
    assert probe.seen == [(3, 0), (6, 0), (7, 0)]
    assert plan_rows(observer) == (7, 1)
    items = batched.plan_items(plan["id"])
    # The jobs that had failed when freezing began, newest failure first: the late death is out, and so
    # is the job that left before its batch was read.
    assert [i["id"] for i in items] == ids[:-1]
    assert [i["ord"] for i in items] == list(range(7))
    assert [i["chunk"] for i in items] == [0] * 7  # the execution chunk (1000) is not the freeze batch
    assert (plan["total"], plan["chunks"]) == (7, 1)
    batched.approve_plan(plan["id"], actor=Actor("carol"))
    after, chunk = batched.execute_plan_chunk(plan["id"], actor=Actor("alice"))
    assert chunk == {"chunk": 0, "claimed": 7, "done": 7, "skipped": 0}
    assert (after["state"], after["done"], after["skipped"]) == ("done", 7, 0)
    assert {r[0] for r in sql(batched, "SELECT id FROM jobs_dlq")} == set(running)


def test_an_id_plan_is_frozen_in_batches_and_a_job_entering_the_dlq_meanwhile_stays_out(batched, observer):
    ids = dead(batched, 7, "d")
    running = processing(batched, "w", 1, prefix="r")

    def meanwhile(batch: int) -> None:
        if batch == 1:
            time.sleep(0.002)  # a tick of SQLite's millisecond clock after the freeze's start (see above)
            assert batched.move_to_dlq("w", [Dead(running[0], FailureReason.Fatal, "late")]) == running

    probe = BatchProbe(batched, "plan_add_items", lambda: plan_rows(observer), meanwhile)
    wanted = [*ids[:4], running[0], *ids[4:]]  # the running job's id sits in the second batch
    plan = batched.create_plan(
        "resurrect", actor=Actor("alice"), ids=wanted, edits={ids[5]: {"priority": 3}}, chunk_size=2
    )
    assert probe.seen == [(3, 0), (5, 0), (7, 0)]  # batches of 3 given ids; the second found two
    items = batched.plan_items(plan["id"])
    assert [i["id"] for i in items] == ids
    assert [i["chunk"] for i in items] == [0, 0, 1, 1, 2, 2, 3]
    assert [i["priority"] for i in items if i["id"] == ids[5]] == [3]
    assert (plan["total"], plan["chunks"], plan["edited"]) == (7, 4, 1)


def test_a_failed_freeze_leaves_no_plan_and_no_items(batched, observer):
    dead(batched, 8, "d")

    def fail(batch: int) -> None:
        if batch == 2:
            raise RuntimeError("the process dies here")

    probe = BatchProbe(batched, "plan_add_items", lambda: plan_rows(observer), fail)
    with pytest.raises(RuntimeError):
        batched.create_plan("purge", actor=Actor("alice"), flt=DlqFilter())
    assert probe.seen == [(3, 0), (6, 0)]
    assert plan_rows(observer) == (0, 0)


def test_freezing_batches_split_jobs_with_the_same_time_without_losing_or_repeating_one(batched, observer):
    ids = dead(batched, 8, "d")
    sql(batched, f"UPDATE jobs_dlq SET failed_at = {ago_expr(batched)}", 3600)
    pending = enqueue(batched, 7, prefix="p")
    sql(batched, f"UPDATE jobs_hot SET created_at = {ago_expr(batched)}", 60)
    probe = BatchProbe(batched, "plan_add_items", lambda: plan_rows(observer))
    purge = batched.create_plan("purge", actor=Actor("alice"), flt=DlqFilter())
    cancel = batched.create_plan("cancel", actor=Actor("alice"), flt=HotFilter())
    assert [n for n, _ in probe.seen] == [3, 6, 8, 11, 14, 15]
    # Ties on the time are ordered by id, and each batch starts right after the last id of the one before.
    assert [i["id"] for i in batched.plan_items(purge["id"])] == sorted(ids)
    assert [i["id"] for i in batched.plan_items(cancel["id"])] == sorted(pending)
