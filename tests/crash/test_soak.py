"""Soak: 4 worker processes x concurrency 8, 5 % failing handlers, one worker SIGKILLed mid-run, the
sweep run by the survivors. Afterwards every job is in exactly one table, the counters equal the rows,
and no job ran more often than the rules allow (a recovered prefetch never ran).

Both databases run 50,000 jobs; CHOKAQ_SOAK_JOBS overrides that. The circuit breaker is off: with its
default policy (5 failures within 60 s) a type failing 5 % of 1,000 jobs/s would stay open, deferring
every job by Retry.CircuitBreakerDelay; tests/crash/test_circuits.py covers circuits under real processes."""

from __future__ import annotations

import os
import time
from collections import defaultdict

import pytest

from chokaq_ops.models import NewJob
from crash.handlers_crash import soak_fate
from crash.procs import FAST, executions, wait_for, write_config
from crash.support import assert_one_table_each, counts, events, sql

pytestmark = pytest.mark.slow

WORKERS, CONCURRENCY = 4, 8
JOBS = {"postgresql": 50_000, "sqlite": 50_000}


def soak_config(tmp_path):
    # Timeouts of a few seconds: short enough to rescue within the test, long enough that a live worker
    # on this busy 2-core machine never looks dead.
    return write_config(
        tmp_path / "chokaq.toml",
        Recovery={**FAST["Recovery"], "FetchedJobTimeout": "4s", "ProcessingZombieTimeout": "4s"},
        Circuit={"Enabled": False},
    )


def held_by(store, worker: str) -> int:
    """Jobs fetched or processing under `worker`, read from the table."""
    return int(
        sql(store, "SELECT count(*) FROM jobs_hot WHERE worker_id = ? AND status IN (1, 2)", worker)[0][0]
    )


def sessions_of(store, ports: set[int]) -> int:
    """PostgreSQL server sessions whose client is on one of these local ports."""
    if not ports:
        return 0
    found = sql(
        store,
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE client_port = ANY(CAST(string_to_array(?, ',') AS int[]))",
        ",".join(map(str, sorted(ports))),
    )
    return int(found[0][0])


def test_soak_with_a_killed_worker(store, db_url, dialect, tmp_path, spawn):
    n = int(os.environ.get("CHOKAQ_SOAK_JOBS", JOBS[dialect]))
    ids = [f"soak{i:06d}" for i in range(n)]
    t0 = time.monotonic()
    for start in range(0, n, 5000):
        store.enqueue([NewJob(type="soak.work", id=i, payload="{}") for i in ids[start : start + 5000]])
    enqueue_s = time.monotonic() - t0
    config = soak_config(tmp_path)
    t0 = time.monotonic()
    workers = [spawn(db_url, config, f"soak-w{k}", concurrency=CONCURRENCY) for k in range(WORKERS)]
    victim = workers[1]
    wait_for(lambda: counts(store)["archive"] >= n * 0.3, 300, "30 % of the jobs done", interval=0.2)
    # Kill it while it holds jobs: with no-op jobs a worker spends much of its time waiting for its next
    # claim with nothing reserved, and a kill then would leave nothing for the sweep to rescue.
    wait_for(lambda: held_by(store, victim.name) >= 2, 60, "the victim holding jobs", interval=0.001)
    ports = victim.tcp_ports() if dialect == "postgresql" else set()
    assert ports or dialect == "sqlite", "the victim's database connections were not found"
    victim.kill()
    killed_at = time.monotonic() - t0
    # A statement the victim had sent still runs to its commit on the server (an archive of the jobs it
    # had finished): what it held is read once its server sessions are gone.
    wait_for(lambda: not sessions_of(store, ports), 30, "the victim's sessions ended", interval=0.01)
    # What it held when it died (its jobs finish in milliseconds: the count above may be gone by now).
    left = held_by(store, victim.name)
    wait_for(lambda: counts(store)["hot"] == 0, 300, "every job finished", interval=0.2)
    drain_s = time.monotonic() - t0
    for w in workers:
        assert w is victim or w.alive(), f"{w.name} died:\n{w.log()[-2000:]}"

    # Every job in exactly one table; succeeded + dead + pending = enqueued; counters = rows.
    where = assert_one_table_each(store, ids)
    assert len(where) == n
    c = counts(store)
    assert c["archive"] + c["dlq"] + c["hot"] == n
    assert (c["enqueued_total"], c["succeeded_total"], c["failed_total"]) == (n, c["archive"], c["dlq"])

    rows = {
        r[0]: {"loc": r[1], "attempts": int(r[2]), "reason": r[3], "worker": r[4]}
        for r in sql(store, "SELECT id, 'archive', attempt_count, NULL, worker_id FROM jobs_archive")
        + sql(store, "SELECT id, 'dlq', attempt_count, failure_reason, worker_id FROM jobs_dlq")
    }
    retried = c["retried_total"]
    assert retried == sum(r["attempts"] - 1 for r in rows.values())  # every later attempt followed a retry

    runs: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for event, job_id, attempt, pid in executions(tmp_path):
        if event == "start":
            runs[job_id].append((attempt, pid))
    zombies = {j for j, r in rows.items() if r["reason"] == 2}
    for job_id, r in rows.items():
        attempts = sorted(a for a, _ in runs[job_id])
        assert len(attempts) == len(set(attempts)), f"{job_id} ran attempt twice: {runs[job_id]}"
        expected = list(range(1, r["attempts"] + 1))
        if job_id in zombies:  # killed mid-attempt: the last attempt may not have reached user code
            assert r["worker"] == victim.name, f"false zombie {job_id} on {r['worker']}"
            assert attempts in (expected, expected[:-1]), (job_id, runs[job_id], r)
            continue
        assert attempts == expected, (job_id, runs[job_id], r)
        fate = soak_fate(job_id)
        want = {"ok": ("archive", None, 1), "fatal": ("dlq", 6, 1), "flaky": ("dlq", 0, 2)}[fate]
        assert (r["loc"], r["reason"], r["attempts"]) == want, (job_id, fate, r)

    # The victim's prefetched jobs came back untouched: the victim never ran the attempt they came back for.
    data = [e["data"] for e in events(store, "rescue")]
    recovered = [i for d in data for i in d["recovered_ids"]]
    for job_id in recovered:
        assert all(pid != victim.pid for _, pid in runs[job_id] if _ == rows[job_id]["attempts"]), runs[
            job_id
        ]
    assert len(recovered) + len(zombies) >= left, ("the sweep rescued less than the kill left", left)
    print(
        f"\nsoak {dialect}: {n} jobs, {WORKERS}x{CONCURRENCY}, enqueue {enqueue_s:.1f}s, "
        f"victim killed at {killed_at:.1f}s, drained at {drain_s:.1f}s ({n / drain_s:.0f} jobs/s), "
        f"archive {c['archive']}, dlq {c['dlq']} (zombies {len(zombies)}), recovered {len(recovered)}, "
        f"retried {retried}"
    )
