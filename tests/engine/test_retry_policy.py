"""The failure taxonomy and the backoff formula, as pure functions (docs/worker.md)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from chokaq_ops.engine import retry
from chokaq_ops.errors import FatalJobError, ThrottledError
from chokaq_ops.models import FailureReason
from chokaq_ops.settings import RetrySettings

POLICY = RetrySettings(base_delay=3.0, max_delay=3600.0, backoff_multiplier=2.0, jitter_max_delay=1.0)


def test_first_retry_waits_the_base_delay_not_base_times_multiplier():
    assert retry.backoff(1, POLICY, rand=lambda: 0.0) == 3.0
    assert retry.backoff(2, POLICY, rand=lambda: 0.0) == 6.0
    assert retry.backoff(3, POLICY, rand=lambda: 0.0) == 12.0


def test_jitter_is_added_below_its_maximum():
    assert retry.backoff(1, POLICY, rand=lambda: 0.5) == 3.5
    assert 3.0 <= retry.backoff(1, POLICY) < 4.0


def test_cap_and_jitter_clipped_so_the_total_never_exceeds_max_delay():
    assert retry.backoff(20, POLICY, rand=lambda: 0.999) == 3600.0
    # 3599.5 leaves 0.5 s of room: the jitter is clipped to it, never past the cap.
    near = RetrySettings(base_delay=3599.5, max_delay=3600.0, backoff_multiplier=2.0, jitter_max_delay=1.0)
    assert retry.backoff(1, near, rand=lambda: 0.999) <= 3600.0
    assert retry.backoff(1, near, rand=lambda: 0.999) == pytest.approx(3599.5 + 0.4995)
    assert retry.backoff(10_000, POLICY, rand=lambda: 0.5) == 3600.0  # no overflow


class Declared(Exception):
    pass


@pytest.mark.parametrize(
    "exc",
    [
        FatalJobError("no"),
        TypeError("send() takes 1 positional argument but 2 were given"),
        ValueError("bad"),
        json.JSONDecodeError("Expecting ',' delimiter", '{"a": 1 "b": 2}', 8),
        NotImplementedError(),
        UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
    ],
)
def test_fatal_builtins_and_marker(exc):
    assert retry.is_fatal(exc)


def test_marker_in_the_cause_chain_is_fatal_but_builtins_are_judged_on_the_raised_exception():
    try:
        try:
            raise FatalJobError("root")
        except FatalJobError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert retry.is_fatal(outer)
    try:
        try:
            raise ValueError("inner")
        except ValueError as inner:
            raise ConnectionError("wrapped") from inner
    except ConnectionError as outer:
        assert not retry.is_fatal(outer)


def test_declared_fatal_and_retry_on():
    assert not retry.is_fatal(Declared())
    assert retry.is_fatal(Declared(), declared=(Declared,))
    assert not retry.is_fatal(ValueError("transient, says the library"), retry_on=(ValueError,))
    assert retry.is_fatal(FatalJobError("always"), retry_on=(FatalJobError,))


@pytest.mark.parametrize("exc", [RuntimeError("x"), ConnectionError("x"), TimeoutError("x"), KeyError("k")])
def test_other_errors_retry(exc):
    assert not retry.is_fatal(exc)


def test_decide_retry_exhausted_and_throttled():
    d = retry.decide(RuntimeError("x"), attempt=1, max_attempts=3, policy=POLICY, rand=lambda: 0.0)
    assert d.retry and d.delay == 3.0
    d = retry.decide(RuntimeError("x"), attempt=3, max_attempts=3, policy=POLICY)
    assert not d.retry and d.reason is FailureReason.MaxRetriesExceeded
    d = retry.decide(ThrottledError("slow", retry_after=42), attempt=1, max_attempts=3, policy=POLICY)
    assert d.retry and d.delay == 42.0  # no jitter
    d = retry.decide(ThrottledError("slow", retry_after=99_999), attempt=1, max_attempts=3, policy=POLICY)
    assert d.delay == 3600.0  # capped at MaxDelay
    d = retry.decide(ThrottledError("slow", retry_after=1), attempt=3, max_attempts=3, policy=POLICY)
    assert d.reason is FailureReason.Throttled
    d = retry.decide(ValueError("bad"), attempt=1, max_attempts=3, policy=POLICY)
    assert d.reason is FailureReason.Fatal


def test_decide_lifetime_expired_uses_database_times():
    created = datetime(2026, 1, 1, tzinfo=UTC)
    policy = RetrySettings(base_delay=60.0, max_delay=3600.0, jitter_max_delay=0.0, max_job_age=3600.0)
    ok = retry.decide(
        RuntimeError("x"), attempt=1, max_attempts=5, policy=policy, created_at=created,
        db_now=created + timedelta(seconds=3000),
    )  # fmt: skip
    assert ok.retry
    late = retry.decide(
        RuntimeError("x"), attempt=1, max_attempts=5, policy=policy, created_at=created,
        db_now=created + timedelta(seconds=3590),
    )  # fmt: skip
    assert not late.retry and late.reason is FailureReason.RetryLifetimeExpired
    assert "CreatedAt=2026-01-01T00:00:00.000Z" in late.note and "MaxJobAge=3600s" in late.note
    no_budget = RetrySettings(base_delay=60.0, max_job_age=None)
    assert retry.decide(
        RuntimeError("x"), attempt=1, max_attempts=5, policy=no_budget, created_at=created,
        db_now=created + timedelta(days=400),
    ).retry  # fmt: skip
