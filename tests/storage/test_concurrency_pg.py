"""Concurrency on PostgreSQL with real row locks (reference §11.1, 7-8, 20-21; docs/worker.md, §4.13): many
workers claim each job once, concurrent moves of one job happen once, counters stay exact, caps hold."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from storage_factories import (
    OPS,
    age,
    assert_one_table,
    audit,
    buckets,
    counters,
    dead,
    events,
    jobs,
    processing,
    scalar,
    sql,
)

from chokaq_ops import errors
from chokaq_ops.models import FailureReason, NewJob
from chokaq_ops.records import HotJob
from chokaq_ops.storage import Dead, Retry, Store
from tests.support.dbprobe import allow_inserts, reject_inserts


@pytest.fixture
def pg(pg_url: str) -> Iterator[Store]:
    with Store(pg_url, pool_size=24, transient_retry_base_delay=0.02) as s:
        yield s


def together(n: int, fn: Callable[[int], Any]) -> list[Any]:
    """Run fn(0..n-1) on n threads released at once; exceptions are returned, not raised."""
    gate = threading.Barrier(n)

    def run(i: int) -> Any:
        gate.wait()
        try:
            return fn(i)
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(run, range(n)))


def test_16_workers_claim_each_of_20000_jobs_exactly_once(pg):
    for start in range(0, 20_000, 5000):
        res = pg.enqueue(jobs(5000, prefix=f"c{start // 5000}_"))
        assert {r.status for r in res} == {"new"}

    def drain(i: int) -> list[str]:
        mine: list[str] = []
        while batch := pg.fetch(f"w{i}", 100):
            mine += [r["id"] for r in batch]
        return mine

    claimed = together(16, drain)
    assert not [c for c in claimed if isinstance(c, Exception)], claimed
    everything = [job for per_worker in claimed for job in per_worker]
    assert len(everything) == 20_000 and len(set(everything)) == 20_000
    owners = dict(sql(pg, "SELECT id, worker_id FROM jobs_hot"))
    for i, per_worker in enumerate(claimed):
        assert {owners[j] for j in per_worker} <= {f"w{i}"}
    assert scalar(pg, "SELECT count(*) FROM jobs_hot WHERE status <> 1") == 0
    assert sum(1 for c in claimed if c) > 1  # the claims really were concurrent


def test_8_concurrent_resurrects_of_one_job_move_it_once(pg):
    ids = dead(pg, 5, prefix="r")
    for job in ids:
        got = together(
            8,
            lambda i, job=job: (
                pg.resurrect(job, actor=OPS) if i % 2 else pg.resurrect_many(ids=[job], actor=OPS)
            ),
        )
        wins = [g for g in got if isinstance(g, HotJob) or (not isinstance(g, Exception) and g.count == 1)]
        losses = [
            g for g in got if isinstance(g, errors.InvalidState) or (hasattr(g, "count") and g.count == 0)
        ]
        assert len(wins) == 1 and len(losses) == 7, got
    assert_one_table(pg, ids)
    assert all(pg.get_job(j)["location"] == "hot" for j in ids)
    assert counters(pg)["failed"] == 0
    assert len(audit(pg, "resurrect")) == 5 and len(events(pg, "resurrect")) == 5
    assert scalar(pg, "SELECT count(*) FROM jobs_hot") == 5


def test_concurrent_finalizations_of_the_same_job_apply_once(pg):
    ids = processing(pg, "w", 20, prefix="same")

    def finalize(i: int) -> list[str]:
        out: list[str] = []
        for job in ids:
            if i % 3 == 0:
                out += pg.archive_succeeded("w", [(job, 1.0)])
            elif i % 3 == 1:
                out += pg.move_to_dlq("w", [Dead(job, FailureReason.Transient, "x")])
            else:
                out += pg.reschedule("w", [Retry(job, 3600)])
        return out

    got = together(9, finalize)
    assert not [g for g in got if isinstance(g, Exception)], got
    applied = Counter(j for g in got for j in g)
    assert applied == Counter(ids)  # every job finalized by exactly one call
    where = assert_one_table(pg, ids)
    c = counters(pg)
    archived, dlq = sum(v == "archive" for v in where.values()), sum(v == "dlq" for v in where.values())
    retried = sum(v == "hot" for v in where.values())
    assert (c["succeeded"], c["failed"], c["retried"]) == (archived, dlq, retried)
    assert archived + dlq + retried == 20
    b = buckets(pg)
    assert b.get(("default", 0, -1), (0,))[0] == archived
    assert b.get(("default", 1, int(FailureReason.Transient)), (0,))[0] == dlq


def test_concurrent_finalizations_of_different_jobs_keep_counters_exact(pg):
    per_worker = {f"w{i}": processing(pg, f"w{i}", 30, prefix=f"d{i}_", queue=f"q{i % 2}") for i in range(8)}
    zombies = processing(pg, "gone", 20, prefix="z", queue="q0")
    age(pg, "jobs_hot", zombies, 3600, "heartbeat_at")

    def finish(i: int) -> int:
        worker = f"w{i}"
        if i == 8:  # the rescue sweep, racing the workers
            return len(pg.archive_zombies(600))
        n = 0
        for k, job in enumerate(per_worker[worker]):
            if k % 3 == 0:
                n += len(pg.move_to_dlq(worker, [Dead(job, FailureReason.Fatal, "f", None, 2.0)]))
            else:
                n += len(pg.archive_succeeded(worker, [(job, 1.0)]))
        return n

    got = together(9, finish)
    assert got == [30] * 8 + [20]
    c = counters(pg)
    assert (c["succeeded"], c["failed"], c["enqueued"]) == (8 * 20, 8 * 10 + 20, 8 * 30 + 20)
    assert sum(v[0] for k, v in buckets(pg).items() if k[1] == 0) == 160
    assert sum(v[0] for k, v in buckets(pg).items() if k[1] == 1) == 100
    assert scalar(pg, "SELECT count(*) FROM jobs_hot") == 0
    q0 = counters(pg, "q0")
    assert (q0["succeeded"], q0["failed"]) == (80, 60)


def test_concurrent_first_use_enqueues_create_one_queue_row_and_one_winner_per_key(pg):
    got = together(16, lambda i: pg.enqueue([NewJob(type="t", queue="first-use", idempotency_key="once")]))
    assert not [g for g in got if isinstance(g, Exception)], got
    results = [g[0] for g in got]
    assert sum(r.created for r in results) == 1
    assert len({r.id for r in results}) == 1  # the losers get the winner's id
    assert scalar(pg, "SELECT count(*) FROM queues WHERE name = 'first-use'") == 1
    # The counter is a delta per transaction-id bucket and slot (queue_counts): no row all 16 producers
    # waited for.
    assert scalar(pg, "SELECT count(*) FROM stats_summary WHERE queue = 'first-use'") == 0
    assert counters(pg, "first-use")["enqueued"] == 1

    got = together(16, lambda i: pg.enqueue([NewJob(type="t", queue="first-use-2")]))
    assert scalar(pg, "SELECT count(*) FROM queues WHERE name = 'first-use-2'") == 1
    assert counters(pg, "first-use-2")["enqueued"] == 16


def test_max_workers_is_exact_under_concurrent_fetchers(pg):
    pg.set_queue("capped", actor=OPS, max_workers=3)
    pg.enqueue(jobs(60, prefix="cap", queue="capped") + jobs(60, prefix="free", queue="free"))
    stop = threading.Event()
    worst = [0]

    def monitor() -> None:
        while not stop.is_set():
            n = scalar(pg, "SELECT count(*) FROM jobs_hot WHERE queue = 'capped' AND status IN (1, 2)")
            worst[0] = max(worst[0], int(n))

    def work(i: int) -> int:
        done = 0
        idle = 0
        while idle < 5:
            batch = pg.fetch(f"w{i}", 4, exact_caps=True)
            if not batch:
                idle += 1
                time.sleep(0.01)
                continue
            idle = 0
            ids = [r["id"] for r in batch]
            pg.mark_processing(f"w{i}", ids)
            time.sleep(0.01)  # hold the slots for a moment, as a handler would
            done += len(pg.archive_succeeded(f"w{i}", [(j, 1.0) for j in ids]))
        return done

    watcher = threading.Thread(target=monitor)
    watcher.start()
    try:
        got = together(12, work)
    finally:
        stop.set()
        watcher.join()
    assert not [g for g in got if isinstance(g, Exception)], got
    assert sum(got) == 120 and counters(pg)["succeeded"] == 120
    assert 1 <= worst[0] <= 3


# ------------------------------------------------------------------------------------ errors inside a move


def _state(store: Store) -> tuple[Any, ...]:
    return (
        sql(
            store, "SELECT id, status, worker_id, attempt_count FROM jobs_hot WHERE queue <> 'x' ORDER BY id"
        ),
        sql(store, "SELECT id FROM jobs_dlq WHERE queue <> 'x' ORDER BY id"),
        sql(store, "SELECT id FROM jobs_archive WHERE queue <> 'x' ORDER BY id"),
        counters(store),
        buckets(store),
        len(audit(store)),
        len(events(store)),
    )


def test_a_failing_insert_inside_a_move_leaves_the_source_row_and_counters_unchanged(store):
    """Runs on both dialects: an insert into the target that fails (a trigger rejects one row) aborts the
    whole move, for the batch is one transaction."""
    ok, clash = processing(store, "w", 2, prefix="a")
    reject_inserts(store, "jobs_archive", clash)
    before = _state(store)
    with pytest.raises(errors.ChokaqError):
        store.archive_succeeded("w", [(ok, 1.0), (clash, 1.0)])
    assert _state(store) == before  # neither job moved
    allow_inserts(store, "jobs_archive")

    reject_inserts(store, "jobs_dlq", ok)
    with pytest.raises(errors.ChokaqError):
        store.move_to_dlq("w", [Dead(ok, FailureReason.Fatal, "e")])
    assert _state(store) == before
    allow_inserts(store, "jobs_dlq")

    [gone] = dead(store, 1, prefix="g", queue="qg")
    reject_inserts(store, "jobs_hot", gone)
    before = _state(store)
    with pytest.raises(errors.ChokaqError):
        store.resurrect(gone, actor=OPS)
    with pytest.raises(errors.ChokaqError):
        store.resurrect_many(ids=[gone], actor=OPS)
    assert _state(store) == before
    assert scalar(store, "SELECT count(*) FROM jobs_dlq WHERE id = ?", gone) == 1
    allow_inserts(store, "jobs_hot")
    # The worker can still finish its jobs normally once the fault is gone.
    assert sorted(store.archive_succeeded("w", [(ok, 1.0), (clash, 1.0)])) == sorted([ok, clash])


def test_an_edit_accepted_while_claims_race_it_is_what_the_claim_returns(pg):
    """Operators edit pending jobs while workers claim them. A claim reads its candidates, then locks them
    (by ctid); an edit that commits in between makes the lock re-read the row at its newest version. So
    whichever wins, an accepted edit is what a worker gets, and a refused one (the job was claimed) left
    the job as it was: no worker runs a payload an operator was told they had replaced."""
    rounds = 60
    ids: list[str] = []
    edited: dict[str, bool] = {}
    claimed: dict[str, str] = {}

    def edit(job: str) -> None:
        try:
            pg.edit_pending(job, actor=OPS, payload={"v": 2})
            edited[job] = True
        except errors.InvalidState:
            edited[job] = False

    def claim(i: int) -> None:
        for row in pg.fetch(f"w{i}", 4, start=4):
            claimed[row.id] = row.payload

    # Each round: four new jobs, then four claimers and four editors (one per job) released together.
    for _ in range(rounds // 4):
        batch = [r.id for r in pg.enqueue([NewJob(type="t", payload={"v": 1}) for _j in range(4)])]
        ids.extend(batch)
        together(8, lambda i, batch=batch: claim(i) if i < 4 else edit(batch[i - 4]))
    while rest := pg.fetch("w-rest", 100, start=100):  # what every claimer skipped (locked by an edit)
        claimed.update({r.id: r.payload for r in rest})
    assert sorted(claimed) == sorted(ids) and sorted(edited) == sorted(ids)
    for job in ids:
        assert claimed[job] == ('{"v":2}' if edited[job] else '{"v":1}'), (job, edited[job], claimed[job])
    assert sum(edited.values()) not in (0, rounds), "every race went one way: it tested nothing"
