"""Real `chokaq worker` processes killed and stopped on SQLite and PostgreSQL.

Timeouts are shortened (heartbeat 0.2-0.3 s, zombie and fetched timeouts 2 s, sweep every 0.5 s). Jobs
are read from outside the workers, straight from the database."""

from __future__ import annotations

import itertools
import json
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from chokaq_ops.models import NewJob
from crash.procs import FAST, executions, run_rescue, starts, wait_for, write_config
from crash.support import assert_one_table_each, counts, rescue_totals, sql

pytestmark = pytest.mark.slow


def hot(store, status: str | None = None, worker: str | None = None) -> list[dict]:
    rows = [store.get_job(r[0]) for r in sql(store, "SELECT id FROM jobs_hot ORDER BY id")]
    return [
        r
        for r in rows
        if (status is None or r["status"] == status) and (worker is None or r["worker_id"] == worker)
    ]


def enqueue(store, ids: list[str], type_: str, payload: dict | None = None) -> None:
    text = json.dumps(payload or {})
    store.enqueue([NewJob(type=type_, id=i, payload=text) for i in ids])


def prefetch_config(tmp_path):
    """Batches of 10, and a fetched timeout of 4 s: a live worker hands back a buffered job after half
    of it (2 s), so the buffer holds still long enough to be observed and killed."""
    return write_config(
        tmp_path / "chokaq.toml",
        Worker={**FAST["Worker"], "Prefetch": 10, "FetchBatchSize": 10},
        Recovery={**FAST["Recovery"], "FetchedJobTimeout": "4s"},
    )


def two_running_four_prefetched(store, db_url, config, tmp_path, spawn):
    """Six blocking jobs on a worker "w1" of concurrency 2: two run, four wait in its prefetch buffer."""
    ids = [f"b{i}" for i in range(6)]
    enqueue(store, ids, "crash.block")
    w1 = spawn(db_url, config, "w1", concurrency=2)
    wait_for(
        lambda: len(hot(store, "processing", "w1")) == 2 and len(hot(store, "fetched", "w1")) == 4,
        30,
        "two running and four prefetched jobs on w1",
    )
    wait_for(lambda: sum(starts(tmp_path).values()) == 2, 10, "two handlers started")
    return ids, w1


def test_sigkill_zombies_the_running_jobs_and_returns_the_prefetched_ones(store, db_url, tmp_path, spawn):
    """Concurrency 2 and six blocking jobs: two run, four wait in the prefetch buffer. SIGKILL. The two
    become zombies after the zombie timeout; the four come back untouched and another worker runs them."""
    config = prefetch_config(tmp_path)
    ids, w1 = two_running_four_prefetched(store, db_url, config, tmp_path, spawn)
    time.sleep(0.7)  # a few heartbeats
    w1.kill()
    running = {r["id"]: r for r in hot(store, "processing")}
    waiting = sorted(r["id"] for r in hot(store, "fetched"))
    assert len(running) == 2 and len(waiting) == 4
    assert {r["worker_id"] for r in running.values()} == {"w1"}
    before = counts(store)

    (tmp_path / "release").touch()  # from now on crash.block returns at once
    w2 = spawn(db_url, config, "w2", concurrency=2)  # also runs the sweep every 0.5 s
    wait_for(lambda: counts(store)["dlq"] == 2 and counts(store)["archive"] == 4, 30, "2 zombies, 4 done")

    after = counts(store)
    assert after["failed_total"] == before["failed_total"] + 2 and after["succeeded_total"] == 4
    assert after["hot"] == 0 and rescue_totals(store) == (4, 2)
    assert_one_table_each(store, ids)
    ran = starts(tmp_path)
    for job_id, last in running.items():
        dead = store.get_job(job_id)
        assert (dead["location"], dead["failure_reason"], dead["worker_id"]) == ("dlq", "Zombie", "w1")
        assert dead["heartbeat_at"] == last["heartbeat_at"]  # the last beat before the kill
        assert dead["heartbeat_at"] > dead["started_at"]  # it did beat while running
        assert (dead["failed_at"] - dead["heartbeat_at"]).total_seconds() >= 2.0  # not before the timeout
        err = dead["error_details"]
        assert err.startswith("Zombie detected: heartbeat expired")
        assert last["heartbeat_at"].strftime("%Y-%m-%dT%H:%M:%S") in err
        assert "worker w1" in err and "runtime " in err
        runtime = (dead["heartbeat_at"] - dead["started_at"]).total_seconds()
        assert dead["duration_ms"] == pytest.approx(runtime * 1000, abs=2)
        assert ran[job_id] == 1  # ran once, in w1, and was never re-run
    for job_id in waiting:
        done = store.get_job(job_id)
        assert (done["location"], done["worker_id"], done["attempt_count"]) == ("archive", "w2", 1)
        assert ran[job_id] == 1  # the prefetched job never ran in w1: only w2 ran it
    w1_runs = {j for e, j, _, pid in executions(tmp_path) if e == "start" and pid == w1.pid}
    assert w1_runs == set(running)
    assert "ZombieRescue: recovered" in w2.log()


def test_sigkill_then_chokaq_rescue_waits_for_the_zombie_timeout(store, db_url, tmp_path, spawn):
    # A 5 s zombie timeout: the first `chokaq rescue` process must run before it expires, and starting a
    # process took over 2 s on a loaded 2-core machine.
    config = write_config(
        tmp_path / "chokaq.toml", Recovery={**FAST["Recovery"], "ProcessingZombieTimeout": "5s"}
    )
    enqueue(store, ["z1"], "crash.block")
    w1 = spawn(db_url, config, "w1", concurrency=1)
    wait_for(lambda: starts(tmp_path)["z1"] == 1, 30, "z1 started")
    w1.kill()
    last = store.get_job("z1")
    assert last["status"] == "processing"
    assert run_rescue(db_url, config, tmp_path) == {"recovered": 0, "archived": 0}  # too early
    wait_for(lambda: (store.now() - last["heartbeat_at"]).total_seconds() > 5.2, 15, "the zombie timeout")
    assert run_rescue(db_url, config, tmp_path) == {"recovered": 0, "archived": 1}
    dead = store.get_job("z1")
    assert (dead["location"], dead["failure_reason"], dead["heartbeat_at"]) == (
        "dlq",
        "Zombie",
        last["heartbeat_at"],
    )
    assert counts(store)["failed_total"] == 1 and counts(store)["archive"] == 0


def test_heartbeat_keeps_advancing_while_a_long_handler_runs(store, db_url, tmp_path, spawn):
    """A handler that runs 3.5 s, longer than the 2 s zombie timeout, is never taken for a zombie."""
    config = write_config(tmp_path / "chokaq.toml")
    enqueue(store, ["long"], "crash.sleep", {"seconds": 3.5})
    spawn(db_url, config, "w1", concurrency=1)  # sweeps every 0.5 s itself
    wait_for(lambda: store.get_job("long")["status"] == "processing", 30, "the job to start")
    beats = []
    outside = None  # an outside `chokaq rescue` mid-run, in the background so sampling goes on
    while (job := store.get_job("long"))["location"] == "hot":
        if job["heartbeat_at"] is not None and (not beats or job["heartbeat_at"] != beats[-1]):
            beats.append(job["heartbeat_at"])
        if outside is None and len(beats) > 8:
            outside = ThreadPoolExecutor(1)
            rescued = outside.submit(run_rescue, db_url, config, tmp_path)
        time.sleep(0.1)
    assert beats == sorted(beats) and len(beats) >= 8, beats  # ~every 0.25 s for 3.5 s
    assert max((b - a).total_seconds() for a, b in itertools.pairwise(beats)) < 1.5  # zombie timeout 2 s
    assert outside is not None and rescued.result(timeout=30) == {"recovered": 0, "archived": 0}
    outside.shutdown()
    done = store.get_job("long")
    assert done["location"] == "archive" and done["duration_ms"] >= 3400
    assert counts(store)["failed_total"] == 0


def test_sigterm_releases_prefetched_jobs_at_once_and_lets_running_ones_finish(
    store, db_url, tmp_path, spawn
):
    config = prefetch_config(tmp_path)
    ids = [f"s{i}" for i in range(6)]
    enqueue(store, ids, "crash.sleep", {"seconds": 2.0})
    w1 = spawn(db_url, config, "w1", concurrency=2)
    wait_for(
        lambda: len(hot(store, "processing", "w1")) == 2 and len(hot(store, "fetched", "w1")) == 4,
        30,
        "two running and four prefetched jobs",
    )
    running = sorted(r["id"] for r in hot(store, "processing"))
    waiting = sorted(r["id"] for r in hot(store, "fetched"))
    # Running means in user code: a SIGTERM between a claim's commit and its jobs reaching their threads
    # rightly hands the started ones back as well (they never ran).
    wait_for(lambda: sorted(starts(tmp_path)) == running, 10, "both running jobs in their handlers")
    t0 = time.monotonic()
    w1.signal(signal.SIGTERM)
    released = wait_for(
        lambda: (
            [r for r in hot(store, "pending") if r["id"] in waiting]
            if len(hot(store, "pending")) == 4
            else None
        ),
        1.5,
        "the prefetched jobs released right after SIGTERM",
    )
    released_after = time.monotonic() - t0
    assert all(r["worker_id"] is None and r["attempt_count"] == 0 for r in released)
    assert sorted(r["id"] for r in hot(store, "processing")) == running  # still running meanwhile
    assert w1.wait(timeout=10) == 0  # within the 10 s grace period
    stopped_after = time.monotonic() - t0
    for job_id in running:
        assert store.get_job(job_id)["location"] == "archive"
    assert sorted(r["id"] for r in hot(store, "pending")) == waiting
    assert set(starts(tmp_path)) == set(running)  # the released jobs never started
    assert released_after < stopped_after
