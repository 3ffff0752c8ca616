"""The Host: what it schedules with APScheduler, its health, and that nothing starts before start()."""

from __future__ import annotations

import subprocess
import sys
import threading
from datetime import UTC, datetime

from worker_support import enqueue, fast_settings, settled, wait_for

from chokaq_ops.engine.handlers import Registry
from chokaq_ops.engine.hosting import Host, heartbeat_trigger
from chokaq_ops.settings import Settings


def test_importing_the_engine_starts_nothing():
    code = (
        "import threading, chokaq_ops.engine.hosting, chokaq_ops.engine.worker, chokaq_ops.cli.worker\n"
        "from chokaq_ops import job\n"
        "assert threading.active_count() == 1, threading.enumerate()\n"
        "import sys; assert 'apscheduler.schedulers.background' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_schedules_jittered_heartbeat_rescue_and_retention(store):
    settings = Settings().with_overrides({"storage.url": store.url, "recovery.scan_interval": 0.2})
    reg = Registry()
    reg.job("t")(lambda p, ctx: None)
    host = Host(settings, store, registry=reg)
    assert host.worker is not None and not host.worker.running  # nothing runs before start()
    host.start()
    try:
        jobs = {j.id: j for j in host._scheduler.get_jobs()}
        # PostgreSQL folds counter deltas and keeps its churning tables small (engine/upkeep.py); SQLite
        # keeps its write-ahead log small (docs/endurance.md).
        folds = {"fold-counters", "upkeep"} if store.dialect.name == "postgresql" else {"wal"}
        assert set(jobs) == {"heartbeat", "rescue", "retention", "db-watch", "schedules"} | folds
        assert jobs["schedules"].trigger.interval.total_seconds() == 1.0  # Schedules.CheckInterval
        hb = jobs["heartbeat"].trigger
        assert hb.interval.total_seconds() == 8.0 and hb.jitter == 4.0  # 8 s + (0..4 s): 8-12 s by default
        assert jobs["rescue"].trigger.interval.total_seconds() == 0.2
        assert jobs["retention"].trigger.interval.total_seconds() == 3600.0
        wait_for(lambda: host.rescuer.sweeps >= 2, 5, "scheduled sweeps")  # first one at start
        health = host.health()
        assert health["scheduler_running"] and health["worker_running"]
        assert health["worker_heartbeat_age_seconds"] is not None
        assert health["worker_heartbeat_age_seconds"] < settings.health.worker_heartbeat_timeout
        assert health["running_jobs"] == 0 and health["prefetched_jobs"] == 0
    finally:
        host.shutdown()
    assert not host.health()["scheduler_running"] and not host.health()["worker_running"]
    assert host.worker.loop_age() is None


def test_parts_can_be_switched_off(store):
    host = Host(
        Settings(), store, run_worker=False, run_rescue=False, run_retention=True, run_schedules=False
    )
    assert host.worker is None and host.rescuer is None and host.retention is not None
    assert host.schedules is None
    host.start()
    try:
        assert [j.id for j in host._scheduler.get_jobs()] == ["retention"]
        assert host.health()["worker_running"] is False
    finally:
        host.shutdown()


def test_a_worker_without_handlers_claims_nothing(store):
    job_id = enqueue(store, "anything")
    host = Host(fast_settings(store), store, registry=Registry(), run_rescue=False, run_retention=False)
    host.start()
    try:
        wait_for(lambda: host.worker.loop_age() is not None)
        threading.Event().wait(0.2)
        assert store.get_job(job_id)["status"] == "pending"
        # Registering a handler later (a late import) starts the work.
        host.worker.registry.job("anything")(lambda p, ctx: None)
        settled(store, job_id, "archive")
    finally:
        host.shutdown()


def test_heartbeat_gaps_spread_over_the_whole_configured_window():
    """Execution.HeartbeatIntervalMin/Max 8/12 s: every gap between two beats lies in [8, 12] s, and the
    window is used whole (APScheduler's jitter only adds, so an interval of 10 +- 2 gave 10-12 s)."""
    trigger = heartbeat_trigger(8.0, 12.0)
    fire = datetime(2026, 1, 1, tzinfo=UTC)
    gaps = []
    for _ in range(2000):
        nxt = trigger.get_next_fire_time(fire, fire)
        gaps.append((nxt - fire).total_seconds())
        fire = nxt
    assert min(gaps) >= 8.0 and max(gaps) <= 12.0
    assert min(gaps) < 8.3 and max(gaps) > 11.7
    low = sum(1 for g in gaps if g < 10.0)
    assert 0.4 < low / len(gaps) < 0.6  # uniform: half the gaps below the middle
