"""Database faults under a running `chokaq worker` on PostgreSQL: its connections killed, the server
unreachable for a few seconds, and commit replies lost (through a TCP proxy the test cuts or has swallow
a reply; the shared server is never touched).
Heartbeat failures are counted, the worker reconnects and carries on, and no job is lost or run twice."""

from __future__ import annotations

import threading
import time

import pytest

from chokaq_ops.models import NewJob
from chokaq_ops.storage import Store
from crash.procs import FAST, free_port, starts, wait_for, write_config
from crash.proxy import CuttableProxy
from crash.support import assert_one_table_each, counts, sql

pytestmark = [pytest.mark.slow, pytest.mark.postgres_only]

# Zombie timeout well above the outage, so a worker that cannot write heartbeats for a few seconds is
# not mistaken for a dead one; a short fetched timeout, because a claim whose reply is lost leaves rows
# fetched that the worker never saw, and phase 1 of the sweep is what returns them; few store-level
# retries so the outage reaches the worker's own handling; and every call bounded well inside the zombie
# timeout, as the defaults are (30 s against 10 minutes): a claim whose reply stalls is given up, and the
# jobs it started recovered, before the sweep could take them for zombies.
FAULT_CONFIG = {
    "Recovery": {**FAST["Recovery"], "ProcessingZombieTimeout": "20s", "FetchedJobTimeout": "4s"},
    "Storage": {"MaxTransientRetries": 1, "TransientRetryBaseDelay": "50ms", "CommandTimeout": "5s"},
}


def enqueue_work(store, n_long: int, n_short: int) -> list[str]:
    jobs = [NewJob(type="crash.sleep", id=f"long{i:03d}", payload='{"seconds": 1.5}') for i in range(n_long)]
    jobs += [
        NewJob(type="crash.sleep", id=f"short{i:03d}", payload='{"seconds": 0.05}') for i in range(n_short)
    ]
    store.enqueue(jobs)
    return [j.id for j in jobs]


def assert_all_done_once(store, tmp_path, ids: list[str]) -> None:
    try:
        wait_for(lambda: counts(store)["archive"] == len(ids), 60, f"all {len(ids)} jobs archived")
    except AssertionError as exc:
        dead = sql(store, "SELECT id, failure_reason, attempt_count, error_details FROM jobs_dlq")
        hot = sql(store, "SELECT id, status, worker_id, attempt_count FROM jobs_hot")
        ran = starts(tmp_path)
        raise AssertionError(f"{exc}; dlq {dead[:10]}; hot {hot[:10]}; runs {[ran[d[0]] for d in dead]}")
    c = counts(store)
    assert (c["hot"], c["dlq"], c["succeeded_total"], c["failed_total"]) == (0, 0, len(ids), 0)
    assert_one_table_each(store, ids)
    ran = starts(tmp_path)
    assert {j: n for j, n in ran.items() if n != 1} == {}  # no job ran twice
    assert set(ran) == set(ids)
    attempts = {r[0] for r in sql(store, "SELECT DISTINCT attempt_count FROM jobs_archive")}
    assert attempts == {1}


def backends(store, db: str) -> list[int]:
    return [
        r[0]
        for r in sql(
            store, "SELECT pid FROM pg_stat_activity WHERE datname = ? AND pid <> pg_backend_pid()", db
        )
    ]


def test_killed_connections_are_survived(pg_store, pg_url, tmp_path, spawn):
    store = pg_store
    db = pg_url.rpartition("/")[2]
    # No store-level retries at all: a heartbeat that picks a pooled connection we killed fails at once
    # (and every other path must cope on the worker's own terms).
    config = write_config(tmp_path / "chokaq.toml", **{**FAULT_CONFIG, "Storage": {"MaxTransientRetries": 0}})
    ids = enqueue_work(store, 12, 200)
    port = free_port()
    w = spawn(pg_url, config, "w1", concurrency=4, metrics_port=port)
    wait_for(lambda: len(starts(tmp_path)) >= 6, 30, "work under way")

    # Terminate every backend of this test's database except our own, over and over for 2.5 s: a
    # connection the worker reopens is killed again, so some heartbeat writes run out of retries. Which
    # writes a kill lands in is chance (the pool hands out live connections, a beat takes a millisecond,
    # and while the starts fail few jobs run): the storm goes on, up to 15 s, until one beat has failed
    # (8 s ran out without one in 2 of ~20 runs on a loaded 2-core machine).
    killer = Store(pg_url, pool_size=1)  # our own connection, excluded by pg_backend_pid()
    killed = 0
    began = time.monotonic()
    while True:
        for pid in backends(killer, db):
            killed += sql(killer, "SELECT pg_terminate_backend(?)", pid)[0][0] is True
        time.sleep(0.02)
        elapsed = time.monotonic() - began
        if elapsed >= 15.0 or (
            elapsed >= 2.5 and w.metrics().get("chokaq_jobs_heartbeat_failures_total", 0) > 0
        ):
            break
    killer.close()
    assert killed > 0
    store.pool.discard_idle()  # our reader's idle connections were terminated too

    assert_all_done_once(store, tmp_path, ids)
    assert w.alive(), "the worker died instead of reconnecting"
    metrics = w.metrics()
    log = w.log()
    failures = metrics.get("chokaq_jobs_heartbeat_failures_total", 0)
    print(f"\nterminated {killed} backends; heartbeat failures counted: {failures:g}")
    assert failures > 0 and "heartbeat write failed" in log, log[-3000:]
    assert backends(store, db), "the worker holds connections again"


def worker_behind(proxy: CuttableProxy, pg_url: str, tmp_path, spawn, store, n_long: int, n_short: int):
    """A worker (concurrency 4, metrics served) reaching the server through `proxy`, once it has work under
    way: the jobs' ids and the worker."""
    config = write_config(tmp_path / "chokaq.toml", **FAULT_CONFIG)
    ids = enqueue_work(store, n_long, n_short)
    w = spawn(proxy.url_for(pg_url), config, "w1", concurrency=4, metrics_port=free_port())
    wait_for(lambda: len(starts(tmp_path)) >= 6 and proxy.connections > 0, 30, "work under way")
    return ids, w


def test_an_unreachable_server_is_survived(pg_store, pg_url, tmp_path, spawn, proxy):
    store = pg_store
    ids, w = worker_behind(proxy, pg_url, tmp_path, spawn, store, 12, 200)
    proxy.cut()
    outage = threading.Event()
    threading.Timer(3.0, lambda: (proxy.restore(), outage.set())).start()
    # During the outage the handlers keep running; what they finish waits to be recorded.
    outage.wait(10)
    assert proxy.refused > 0, "the worker did not even try to reconnect during the outage"
    assert_all_done_once(store, tmp_path, ids)
    assert w.alive()
    metrics = w.metrics()
    assert metrics.get("chokaq_jobs_heartbeat_failures_total", 0) > 0, w.log()[-3000:]


def test_commit_replies_lost_by_the_network_lose_no_job_and_run_none_twice(
    pg_store, pg_url, tmp_path, spawn, proxy
):
    """For three seconds the proxy swallows every commit reply it can (re-armed 20 ms after each): claims,
    starts, heartbeats and finishes that committed but whose connection died before the worker heard. The
    worker and its store must find what each lost call did (docs/storage-contract.md, "Lost replies")."""
    store = pg_store
    ids, w = worker_behind(proxy, pg_url, tmp_path, spawn, store, 4, 240)
    end = time.monotonic() + 3.0
    while time.monotonic() < end:
        proxy.lose_next_commit_reply()
        time.sleep(0.02)
    print(f"\ncommit replies lost: {proxy.lost_replies}")
    assert proxy.lost_replies >= 10, "too few replies were lost to test anything"
    assert_all_done_once(store, tmp_path, ids)
    assert w.alive()
    # The worker itself knows every finish landed: none taken for a conflict with another writer.
    wait_for(lambda: w.metrics().get("chokaq_jobs_succeeded_total") == len(ids), 10, "all counted")
    assert w.metrics().get("chokaq_jobs_state_transition_conflicts_total", 0) == 0, w.log()[-3000:]
