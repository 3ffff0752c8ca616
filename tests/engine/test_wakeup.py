"""Instant pickup: idle workers polling once a minute are woken by jobs made claimable elsewhere (NOTIFY on
PostgreSQL, PRAGMA data_version on SQLite, in-process), delayed jobs start at their due time, and a
listener whose connection is killed comes back."""

from __future__ import annotations

import sqlite3
import statistics
import subprocess
import sys
import time

import pytest
from worker_support import enqueue, fast_settings, hosted, settled, wait_for

from chokaq_ops.engine import wakeup
from chokaq_ops.engine.handlers import Registry
from chokaq_ops.models import NewJob
from chokaq_ops.storage import Store, signals
from tests.support.dbprobe import sql

SLOW_POLL = {"worker__polling_interval": 60.0}


def _registry(started: list[str]) -> Registry:
    reg = Registry()

    @reg.job("quick")
    def quick(payload, ctx):
        started.append(ctx.job_id)

    return reg


def _enqueue_elsewhere(store: Store) -> str:
    """Enqueue from another process: no in-process wake-up can reach this one's worker."""
    code = (
        "import sys; from chokaq_ops.storage import Store; from chokaq_ops.models import NewJob\n"
        "with Store(sys.argv[1], pool_size=1) as s: print(s.enqueue([NewJob(type='quick')])[0].id)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, store.url], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


def _idle(host) -> None:
    """Wait until the worker listens and has made its first (empty) claim, so it sits in its long wait."""
    wait_for(lambda: host.worker.watcher.listening.is_set(), what="the listener")
    wait_for(
        lambda: host.worker.counts["fetched"] == 0 and host.worker.state.loop_stamp, what="the first claim"
    )
    time.sleep(0.3)


def test_a_worker_polling_once_a_minute_is_woken_by_another_process(store) -> None:
    started: list[str] = []
    with hosted(store, fast_settings(store, **SLOW_POLL), _registry(started)) as host:
        _idle(host)
        began = time.monotonic()
        job_id = _enqueue_elsewhere(store)
        settled(store, job_id, "archive", timeout=10)
        # A poll would have come after 60 s; the wake-up came within the subprocess's own run.
        assert time.monotonic() - began < 20
        assert started == [job_id]


def test_without_instant_pickup_the_same_job_waits_for_the_poll(store) -> None:
    started: list[str] = []
    settings = fast_settings(store, **SLOW_POLL, worker__instant_pickup=False)
    with hosted(store, settings, _registry(started)) as host:
        wait_for(lambda: host.worker.state.loop_stamp, what="the first claim")
        time.sleep(0.3)
        job_id = _enqueue_elsewhere(store)
        time.sleep(1.0)
        assert store.get_job(job_id)["status"] == "pending" and started == []


def test_delayed_jobs_start_at_their_due_time(store) -> None:
    started: list[str] = []
    with hosted(store, fast_settings(store, **SLOW_POLL), _registry(started)) as host:
        _idle(host)
        delays = [0.4, 0.8, 1.2]
        ids = [enqueue(store, "quick", delay_seconds=d) for d in delays]
        late = []
        for job_id, delay in zip(ids, delays, strict=True):
            row = settled(store, job_id, "archive", timeout=10)
            late.append((row["started_at"] - row["created_at"]).total_seconds() - delay)
        # Never early; the median within 50 ms of the due time (the database clock on both sides).
        assert min(late) >= 0, late
        assert statistics.median(late) < 0.05, late


def test_a_notification_storm_costs_one_claim_not_one_per_notification(store) -> None:
    started: list[str] = []
    with hosted(store, fast_settings(store, **SLOW_POLL), _registry(started)) as host:
        _idle(host)
        claims = []
        real = store.fetch

        def counted(*args, **kwargs):
            claims.append(1)
            return real(*args, **kwargs)

        host.worker.store.fetch = counted  # type: ignore[method-assign]
        try:
            for _ in range(5000):
                host.worker.fetcher.wake()
            time.sleep(0.5)
        finally:
            del host.worker.store.fetch
        # Wake-ups that arrive while a claim runs fold into one more claim: a few claims for the whole
        # storm (more when the machine is loaded and the 5,000 calls take longer), never one each.
        assert 1 <= len(claims) <= 25, len(claims)


@pytest.mark.postgres_only
def test_a_killed_listener_reconnects_and_wakes_again(store) -> None:
    started: list[str] = []
    with hosted(store, fast_settings(store, **SLOW_POLL), _registry(started)) as host:
        _idle(host)
        watcher = host.worker.watcher
        first = watcher.backend_pid
        assert sql(store, "SELECT application_name FROM pg_stat_activity WHERE pid = ?", first) == [
            ("chokaq-listener",)
        ]
        assert sql(store, "SELECT pg_terminate_backend(?)", first) == [(True,)]
        wait_for(lambda: watcher.listening.is_set() and watcher.backend_pid != first, what="a new listener")
        assert watcher.reconnects == 1
        _idle(host)
        job_id = _enqueue_elsewhere(store)
        settled(store, job_id, "archive", timeout=10)
        assert started == [job_id]


@pytest.mark.postgres_only
def test_enqueues_notify_once_per_statement_and_only_while_a_worker_waits(store) -> None:
    import psycopg
    import pyodbc

    listener = psycopg.connect(autocommit=True, **store.dialect.libpq_params())
    listener.execute("LISTEN chokaq_jobs")

    def heard() -> int:
        return sum(1 for _ in listener.notifies(timeout=0.3))

    try:
        # Every worker busy (none marked idle): a notifying commit would serialize producers for nothing.
        enqueue(store, "quick")
        assert heard() == 0
        store.run("mark_idle", worker_id="w-idle")
        store.enqueue([NewJob(type="quick") for _ in range(50)])
        assert heard() == 1  # one statement, fifty jobs: one notification
        enqueue(store, "quick")
        assert heard() == 1
        store.run("unmark_idle", worker_id="w-idle")
        enqueue(store, "quick")
        assert heard() == 0
        # In the application's transaction it always notifies, at its commit and never on rollback.
        app = pyodbc.connect(store.dialect.odbc, autocommit=False)
        try:
            store.enqueue_on(app, [NewJob(type="quick")])
            assert heard() == 0
            app.rollback()
            assert heard() == 0
            store.enqueue_on(app, [NewJob(type="quick")])
            app.commit()
            assert heard() == 1
        finally:
            app.close()
    finally:
        listener.close()


def test_sqlite_change_checks_back_off_while_idle_and_speed_up_at_a_commit(tmp_path) -> None:
    # The idle worker's look for other processes' commits: doubling from Worker.ChangeCheckInterval to
    # IDLE_CHECK_S while the file is quiet, back to the fastest pace at the first commit it sees. The
    # intervals are recorded as the watcher chose them, so the test reads no clock.
    url = f"sqlite:///{tmp_path / 'idle.db'}"
    with Store(url, pool_size=1) as store:
        store.now()  # the file exists
        chosen: list[tuple[bool, float]] = []
        watcher = wakeup.Watcher(store, change_check_interval=0.001, polling_interval=1.0)
        after = watcher.checks.after

        def record(changed: bool, now: float) -> float:
            interval = after(changed, now)
            chosen.append((changed, interval))
            return interval

        watcher.checks.after = record  # type: ignore[method-assign]  # the test records the pace
        woken: list[str] = []

        def wake() -> None:
            woken.append("wake")

        signals.subscribe(url, wake)
        watcher.start()
        try:
            wait_for(lambda: chosen and chosen[-1][1] == wakeup.IDLE_CHECK_S, what="the back-off", timeout=30)
            quiet = [interval for _, interval in chosen]
            assert quiet[0] == 0.001 and quiet == sorted(quiet)  # it only ever slowed down
            assert any(0.001 < i < wakeup.IDLE_CHECK_S for i in quiet)  # by steps, not at once
            other = sqlite3.connect(tmp_path / "idle.db", isolation_level=None)
            other.execute("CREATE TABLE elsewhere (x integer)")  # a commit no in-process signal announces
            other.close()
            wait_for(lambda: any(changed for changed, _ in chosen), what="the change", timeout=30)
            changed_at = next(i for i, (changed, _) in enumerate(chosen) if changed)
            assert chosen[changed_at][1] == 0.001  # back to the fastest pace at once
            assert woken  # and the workers of this process were woken
        finally:
            signals.unsubscribe(url, wake)
            watcher.stop()
