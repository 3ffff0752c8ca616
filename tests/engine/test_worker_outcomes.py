"""What a worker does with each kind of outcome, on SQLite and PostgreSQL with a real Store."""

from __future__ import annotations

import threading
import time

import pytest
from worker_support import blocking_job, enqueue, fast_settings, hosted, metric, settled, wait_for

from chokaq_ops.engine.handlers import Registry
from chokaq_ops.errors import FatalJobError, ThrottledError
from chokaq_ops.fingerprint import fingerprint_text


def test_success_archives_with_duration_and_context(store):
    reg = Registry()
    seen = {}

    @reg.job("ok")
    def ok(payload, ctx):
        seen.update(payload=payload, job_id=ctx.job_id, attempt=ctx.attempt, queue=ctx.queue, type=ctx.type)
        time.sleep(0.03)

    job_id = enqueue(store, "ok", '{"to": "a@b.c", "n": [1, 2]}', queue="mail")
    with hosted(store, fast_settings(store), reg) as host:
        row = settled(store, job_id, "archive")
        wait_for(lambda: metric(host, "chokaq_jobs_succeeded_total", queue="mail", type="ok") == 1)
        assert metric(host, "chokaq_jobs_started_total", queue="mail", type="ok") == 1
        assert metric(host, "chokaq_job_duration_seconds_count", queue="mail", type="ok") == 1
    assert seen == {"payload": {"to": "a@b.c", "n": [1, 2]}, "job_id": job_id, "attempt": 1, "queue": "mail",
                    "type": "ok"}  # fmt: skip
    assert row["attempt_count"] == 1 and row["worker_id"] == host.worker.worker_id
    assert 25 <= row["duration_ms"] < 5000
    assert row["started_at"] <= row["finished_at"]
    assert store.stats()["succeeded_total"] == 1


class PaymentDeclined(Exception):
    pass


SEEDS_PAYLOAD = '{"to": "ops@example.com" "subject": "Weekly report"}'  # the missing comma


def test_fatal_kinds_go_to_the_dlq_without_retry(store):
    reg = Registry()

    @reg.job("explicit")
    def explicit(payload, ctx):
        raise FatalJobError("account closed")

    @reg.job("declared", fatal=(PaymentDeclined,))
    def declared(payload, ctx):
        raise PaymentDeclined("card 4242 declined")

    @reg.job("badsig")
    def badsig(payload):  # does not accept ctx
        pass

    @reg.job("parse")
    def parse(payload, ctx):
        pass

    jobs = {
        "explicit": enqueue(store, "explicit"),
        "declared": enqueue(store, "declared"),
        "badsig": enqueue(store, "badsig"),
        "json": enqueue(store, "parse", SEEDS_PAYLOAD),
        "unknown": enqueue(store, "nope.v1"),
    }
    with hosted(store, fast_settings(store), reg) as host:
        rows = {k: settled(store, v, "dlq") for k, v in jobs.items()}
        wait_for(
            lambda: metric(host, "chokaq_jobs_failed_total", queue="default", type="parse", reason="Fatal")
        )
    for name, row in rows.items():
        assert row["failure_reason"] == "Fatal", name
        assert row["attempt_count"] == 1, name
        assert row["error_details"].startswith("FATAL: "), name
        assert row["fingerprint"] == fingerprint_text(row["error_details"]).id, name
    assert "FatalJobError: account closed" in rows["explicit"]["error_details"]
    assert "PaymentDeclined: card 4242 declined" in rows["declared"]["error_details"]
    assert (
        "TypeError" in rows["badsig"]["error_details"]
        and "positional argument" in rows["badsig"]["error_details"]
    )
    err = rows["json"]["error_details"]
    assert "invalid JSON payload for job type 'parse'" in err
    assert "Expecting ',' delimiter: line 1 column 26 (char 25)" in err
    assert "Traceback (most recent call last)" in err
    assert rows["unknown"]["error_details"].startswith("FATAL: no handler registered for type 'nope.v1'")
    assert rows["json"]["payload"] == SEEDS_PAYLOAD  # kept as is, for the operator to fix
    stats = store.stats()
    assert stats["failed_total"] == 5 and stats["retried_total"] == 0


def test_retries_count_attempts_and_wait_the_backoff(store):
    reg = Registry()
    starts: list[float] = []

    @reg.job("flaky", max_attempts=3)
    def flaky(payload, ctx):
        starts.append(time.monotonic())
        assert ctx.attempt == len(starts)
        if ctx.attempt < 3:
            raise ConnectionError(f"upstream down (attempt {ctx.attempt})")

    job_id = enqueue(store, "flaky")
    settings = fast_settings(
        store, retry__base_delay=0.3, retry__backoff_multiplier=2, retry__jitter_max_delay=0
    )
    with hosted(store, settings, reg) as host:
        row = settled(store, job_id, "archive")
        wait_for(lambda: metric(host, "chokaq_jobs_retried_total", queue="default", type="flaky") == 2)
    assert row["attempt_count"] == 3
    assert starts[1] - starts[0] >= 0.3 - 0.02  # first retry waits BaseDelay
    assert starts[2] - starts[1] >= 0.6 - 0.02  # then BaseDelay * Multiplier
    assert store.stats()["retried_total"] == 2


def test_max_retries_exceeded_keeps_the_last_traceback(store):
    reg = Registry()

    @reg.job("broken", max_attempts=2)
    def broken(payload, ctx):
        raise RuntimeError(f"still broken on attempt {ctx.attempt}")

    job_id = enqueue(store, "broken")
    with hosted(store, fast_settings(store), reg):
        row = settled(store, job_id, "dlq")
    assert row["failure_reason"] == "MaxRetriesExceeded"
    assert row["attempt_count"] == 2
    # The verdict and its cause on the first line, then the last traceback.
    assert row["error_details"].startswith(
        "MaxRetriesExceeded: attempt 2 of 2 failed: RuntimeError: still broken on attempt 2\nTraceback"
    )
    assert "RuntimeError: still broken on attempt 2" in row["error_details"]
    assert row["fingerprint"] == fingerprint_text(row["error_details"]).id


def test_throttled_waits_retry_after_and_dead_letters_as_throttled(store):
    reg = Registry()
    starts: list[float] = []

    @reg.job("api", max_attempts=2)
    def api(payload, ctx):
        starts.append(time.monotonic())
        raise ThrottledError("429 from upstream", retry_after=0.4)

    job_id = enqueue(store, "api")
    with hosted(store, fast_settings(store, retry__base_delay=0.05), reg):
        row = settled(store, job_id, "dlq")
    assert starts[1] - starts[0] >= 0.4 - 0.02  # retry-after, not the 0.05 s backoff
    assert row["failure_reason"] == "Throttled" and row["attempt_count"] == 2


def test_throttle_retry_after_is_capped_at_max_delay(store):
    reg = Registry()

    @reg.job("api")
    def api(payload, ctx):
        raise ThrottledError("come back tomorrow", retry_after=86400)

    job_id = enqueue(store, "api")
    with hosted(store, fast_settings(store, retry__max_delay=0.5), reg):
        row = wait_for(
            lambda: (j := store.get_job(job_id))["status"] == "pending" and j["attempt_count"] == 1 and j
        )
    assert row["scheduled_at"] - store.now() <= __import__("datetime").timedelta(seconds=0.6)


def test_retry_past_max_job_age_is_lifetime_expired(store):
    reg = Registry()

    @reg.job("slow.retry")
    def h(payload, ctx):
        raise ConnectionError("nope")

    job_id = enqueue(store, "slow.retry")
    settings = fast_settings(store, retry__base_delay=1, retry__max_job_age=0.5)
    with hosted(store, settings, reg):
        row = settled(store, job_id, "dlq")
    assert row["failure_reason"] == "RetryLifetimeExpired" and row["attempt_count"] == 1
    assert "MaxJobAge=0.5s" in row["error_details"] and "ConnectionError: nope" in row["error_details"]


def test_timeout_cancels_cooperatively_and_dead_letters(store):
    reg = Registry()
    observed = threading.Event()

    @reg.job("long", timeout=0.3)
    def long(payload, ctx):
        if ctx.cancelled.wait(10):
            observed.set()
            ctx.check_cancelled()

    @reg.job("per.queue")
    def per_queue(payload, ctx):
        ctx.cancelled.wait(10)

    a = enqueue(store, "long")
    b = enqueue(store, "per.queue", queue="reports")
    settings = fast_settings(store, **{"queues.reports.execution_timeout": 0.3})
    started = time.monotonic()
    with hosted(store, settings, reg) as host:
        rows = [settled(store, a, "dlq"), settled(store, b, "dlq")]
        assert time.monotonic() - started < 5
        wait_for(lambda: host.worker.counts["late_results"] == 2, what="late results discarded")
    assert observed.is_set()
    assert [r["failure_reason"] for r in rows] == ["Timeout", "Timeout"]
    assert "@job('long', timeout=...)" in rows[0]["error_details"]
    assert "Queues.reports.ExecutionTimeout" in rows[1]["error_details"]
    assert store.stats()["succeeded_total"] == 0


def test_a_handler_ignoring_cancellation_keeps_its_slot_until_it_returns(store):
    reg = Registry()
    release = threading.Event()

    @reg.job("stubborn", timeout=0.2)
    def stubborn(payload, ctx):
        release.wait(10)  # ignores ctx.cancelled

    @reg.job("next")
    def nxt(payload, ctx):
        pass

    a = enqueue(store, "stubborn", priority=20)
    b = enqueue(store, "next")
    with hosted(store, fast_settings(store), reg, concurrency=1) as host:
        assert settled(store, a, "dlq")["failure_reason"] == "Timeout"
        assert host.worker.health()["overdue_jobs"] == 1
        time.sleep(0.3)
        assert store.get_job(b)["status"] in ("pending", "fetched")  # the only slot is still taken
        release.set()
        settled(store, b, "archive")
    assert store.get_job(a)["location"] == "dlq"  # the late success changed nothing


def test_lost_lease_cancels_the_handler_and_its_late_result_is_a_no_op(store):
    reg = Registry()
    running = threading.Event()
    cancelled = threading.Event()

    @reg.job("victim")
    def victim(payload, ctx):
        running.set()
        if ctx.cancelled.wait(10):
            cancelled.set()
        # returns normally: a late success that must not produce an archive row

    job_id = enqueue(store, "victim")
    with hosted(store, fast_settings(store), reg) as host:
        running.wait(10)
        moved = store.archive_zombies(0.0)  # the sweep declares it a zombie (as after a network partition)
        assert [m["id"] for m in moved] == [job_id]
        wait_for(cancelled.is_set, what="handler cancelled by the heartbeat")
        wait_for(
            lambda: metric(host, "chokaq_jobs_state_transition_conflicts_total", transition="heartbeat") == 1
        )
        time.sleep(0.2)
    row = store.get_job(job_id)
    assert row["location"] == "dlq" and row["failure_reason"] == "Zombie"
    assert store.stats()["succeeded_total"] == 0 and store.stats()["archive"] == 0


def test_late_result_without_a_heartbeat_is_refused_by_the_fence(store):
    reg = Registry()
    running, go = blocking_job(reg, "victim")

    job_id = enqueue(store, "victim")
    # Heartbeats far apart: the completer's fenced write is what refuses the late success.
    settings = fast_settings(
        store, execution__heartbeat_interval_min=60, execution__heartbeat_interval_max=60
    )
    with hosted(store, settings, reg) as host:
        running.wait(10)
        store.archive_zombies(0.0)
        go.set()
        wait_for(
            lambda: (
                metric(host, "chokaq_jobs_state_transition_conflicts_total", transition="archive_succeeded")
                == 1
            )
        )
    assert store.get_job(job_id)["failure_reason"] == "Zombie"
    assert store.stats()["archive"] == 0


@pytest.mark.parametrize("payload", ["", "null"])
def test_empty_payload_is_none(store, payload):
    reg = Registry()
    got = []
    reg.job("t")(lambda p, ctx: got.append(p))
    job_id = enqueue(store, "t", payload)
    with hosted(store, fast_settings(store), reg):
        settled(store, job_id, "archive")
    assert got == [None]
