"""Per-job heartbeats: advancing while a handler runs, failures counted, degraded, cancelled."""

from __future__ import annotations

import threading
import time

from worker_support import blocking_job, enqueue, fast_settings, hosted, metric, settled, wait_for

from chokaq_ops import errors
from chokaq_ops.engine.handlers import Registry
from chokaq_ops.storage import Store


def test_heartbeat_keeps_advancing_while_a_long_handler_runs(store):
    reg = Registry()
    running, done = blocking_job(reg, "long")

    job_id = enqueue(store, "long")
    beats = []
    with hosted(store, fast_settings(store), reg) as host:
        running.wait(10)
        first = store.get_job(job_id)
        assert first["status"] == "processing"
        beats.append(first["heartbeat_at"])
        for _ in range(4):  # several heartbeat intervals (0.1-0.15 s each)
            wait_for(lambda: store.get_job(job_id)["heartbeat_at"] > beats[-1], 3, "a newer heartbeat")
            beats.append(store.get_job(job_id)["heartbeat_at"])
        assert host.health()["worker"]["last_heartbeat_write_seconds"] < 1
        done.set()
        settled(store, job_id, "archive")
    assert beats == sorted(beats) and len(set(beats)) == 5
    assert beats[0] == first["started_at"]  # mark_processing set it on the database clock


class FailingHeartbeats(Store):
    """A real store whose heartbeat writes fail, as when the database is overloaded."""

    def beat(self, worker_id, job_ids):
        raise errors.TransientStorageError("heartbeat write timed out")


def _failing_store(store: Store) -> FailingHeartbeats:
    return FailingHeartbeats(store.url, pool_size=8, transient_retry_base_delay=0.01)


def test_heartbeat_failures_are_counted_and_degraded_without_cancelling(store):
    reg = Registry()
    running, done, cancelled = threading.Event(), threading.Event(), threading.Event()

    @reg.job("steady")
    def steady(payload, ctx):
        running.set()
        done.wait(10)
        if ctx.cancelled.is_set():
            cancelled.set()

    job_id = enqueue(store, "steady")
    failing = _failing_store(store)
    settings = fast_settings(store, execution__heartbeat_failure_threshold=3)
    try:
        with hosted(failing, settings, reg) as host:
            running.wait(10)
            labels = {"queue": "default", "type": "steady"}
            wait_for(lambda: metric(host, "chokaq_jobs_heartbeat_failures_total", **labels) >= 7, 10)
            wait_for(lambda: metric(host, "chokaq_jobs_heartbeat_degraded_total", **labels) >= 2, 5)
            done.set()
            row = settled(failing, job_id, "archive")  # the job still succeeds
    finally:
        failing.close()
    assert not cancelled.is_set() and row["attempt_count"] == 1


def test_cancel_on_heartbeat_failure_dead_letters_as_heartbeat_failure(store):
    reg = Registry()
    cancelled = threading.Event()

    @reg.job("fragile")
    def fragile(payload, ctx):
        if ctx.cancelled.wait(10):
            cancelled.set()

    job_id = enqueue(store, "fragile")
    failing = _failing_store(store)
    settings = fast_settings(
        store, execution__heartbeat_failure_threshold=2, execution__cancel_on_heartbeat_failure=True
    )
    try:
        with hosted(failing, settings, reg) as host:
            row = settled(failing, job_id, "dlq")
            wait_for(cancelled.is_set, what="the handler saw the cancellation")
            assert metric(host, "chokaq_jobs_heartbeat_failures_total", queue="default", type="fragile") >= 2
    finally:
        failing.close()
    assert row["failure_reason"] == "HeartbeatFailure"
    assert "2 consecutive heartbeats failed" in row["error_details"]
    assert "heartbeat write timed out" in row["error_details"]


class FlakyArchive(Store):
    """A real store whose archive writes fail until `landable` is set (an overloaded database)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.landable = threading.Event()
        self.refused = 0

    def archive_succeeded(self, worker_id, items):
        if not self.landable.is_set():
            self.refused += 1
            raise errors.TransientStorageError("archive write timed out")
        return super().archive_succeeded(worker_id, items)


def test_a_job_whose_outcome_is_being_written_keeps_its_heartbeat(store):
    """Until the outcome lands the row is processing under this worker: its heartbeat must go on, or the
    sweep would take a finished job for a zombie while the completer retries the write."""
    reg = Registry()
    reg.job("quick")(lambda payload, ctx: None)
    flaky = FlakyArchive(store.url, pool_size=8, transient_retry_base_delay=0.01, max_transient_retries=0)
    job_id = enqueue(store, "quick")
    try:
        with hosted(flaky, fast_settings(store), reg):
            wait_for(lambda: flaky.refused >= 2, 10, "the outcome write failing")
            before = store.get_job(job_id)["heartbeat_at"]
            wait_for(
                lambda: store.get_job(job_id)["heartbeat_at"] > before,
                3,
                "a heartbeat while the outcome is still being written",
            )
            flaky.landable.set()
            row = settled(store, job_id, "archive")
    finally:
        flaky.close()
    assert row["attempt_count"] == 1


def test_a_beat_still_running_when_the_next_is_due_counts_as_failed(store):
    reg = Registry()
    running, done = blocking_job(reg, "steady")

    job_id = enqueue(store, "steady")
    with hosted(store, fast_settings(store), reg) as host:
        running.wait(10)
        w = host.worker
        with w.heartbeats.beat_lock:  # a beat in flight (stuck) while the scheduler's next one comes due
            w.heartbeat()
            w.heartbeat()
        labels = {"queue": "default", "type": "steady"}
        assert metric(host, "chokaq_jobs_heartbeat_failures_total", **labels) >= 2
        done.set()
        settled(store, job_id, "archive")


class SlowHeartbeats(Store):
    """A real store whose heartbeat writes land but take most of the beat's budget (a slow database);
    it counts the registry refreshes made meanwhile."""

    slow = 0.0
    beats = 0
    registers = 0

    def beat(self, worker_id, job_ids):
        out = super().beat(worker_id, job_ids)
        self.beats += 1
        time.sleep(self.slow)
        return out

    def worker_register(self, worker_id, **kw):
        self.registers += 1
        return super().worker_register(worker_id, **kw)


def test_a_slow_heartbeat_write_leaves_the_registry_row_for_a_later_beat(store):
    """The registry row is refreshed after the jobs' heartbeats and only in what is left of the beat's
    budget: while each heartbeat write takes 90 % of it, no beat adds the registry statement (which
    would push the beat past its interval), and none overruns; once writes are quick again, it is."""
    reg = Registry()
    running, done = blocking_job(reg, "long")
    job_id = enqueue(store, "long")
    slow = SlowHeartbeats(store.url, pool_size=8, transient_retry_base_delay=0.01)
    settings = fast_settings(store)  # heartbeats every 0.1-0.15 s: a budget of 0.08 s
    try:
        with hosted(slow, settings, reg) as host:
            running.wait(10)
            slow.slow = 0.9 * 0.1 * 0.8
            time.sleep(0.3)  # a beat begun before the switch ends
            beats, registers = slow.beats, slow.registers
            wait_for(lambda: slow.beats >= beats + 5, 5, "five slow beats")
            assert slow.registers == registers, "a slow beat still refreshed the registry row"
            slow.slow = 0.0
            wait_for(lambda: slow.registers > registers, 5, "the registry row refreshed again")
            labels = {"queue": "default", "type": "long"}
            assert metric(host, "chokaq_jobs_heartbeat_failures_total", **labels) == 0
            done.set()
            settled(slow, job_id, "archive")
    finally:
        slow.close()
