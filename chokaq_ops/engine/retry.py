"""Failure taxonomy and retry policy (docs/worker.md): what a failed execution turns into.

Pure functions over settings and exceptions, so the rules can be read and tested without a database.

Fatal (DLQ `Fatal`, never retried) when the raised exception, or one of its explicit causes
(`raise X from cause`) for the marker classes, is:

- `FatalJobError` (and subclasses), or one of the classes the handler declared with `@job(fatal=...)`;
- a built-in that says the input itself is wrong, so running it again cannot help: `TypeError` (wrong
  argument types or count, including a handler whose signature does not accept `(payload, ctx)`),
  `ValueError` (bad values; includes `json.JSONDecodeError` and `UnicodeError`) and
  `NotImplementedError`. These stand for the original's ArgumentException, FormatException,
  JsonException and NotSupportedException. Only the raised exception itself is judged for these,
  not its causes: a library that wraps a ValueError in its own error class decides for itself.
- the worker's own fatal conditions: invalid payload JSON and unknown job type.

A handler can send any class back to retrying with `@job(retry_on=...)`; `retry_on` wins over every
fatal rule except `FatalJobError`.

Everything else is retried with backoff until `max_attempts` executions have failed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from chokaq_ops.errors import FatalJobError, ThrottledError
from chokaq_ops.models import FailureReason
from chokaq_ops.settings import RetrySettings

FATAL_BUILTINS: tuple[type[BaseException], ...] = (TypeError, ValueError, NotImplementedError)


def causes(exc: BaseException) -> list[BaseException]:
    """The exception and its explicit causes, outermost first (cycles cut)."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__
    return chain


def is_fatal(
    exc: BaseException,
    declared: tuple[type[BaseException], ...] = (),
    retry_on: tuple[type[BaseException], ...] = (),
) -> bool:
    chain = causes(exc)
    if any(isinstance(e, FatalJobError) for e in chain):
        return True
    if retry_on and isinstance(exc, retry_on):
        return False
    if declared and any(isinstance(e, declared) for e in chain):
        return True
    return isinstance(exc, FATAL_BUILTINS)


def throttle_delay(exc: BaseException) -> float | None:
    """The retry-after a ThrottledError asked for (outermost in the cause chain), else None."""
    for e in causes(exc):
        if isinstance(e, ThrottledError) and e.retry_after is not None:
            return max(0.0, float(e.retry_after))
    return None


def is_throttled(exc: BaseException) -> bool:
    return any(isinstance(e, ThrottledError) for e in causes(exc))


def backoff(failed_attempt: int, policy: RetrySettings, rand: Callable[[], float] = random.random) -> float:
    """Seconds before the next execution after execution number `failed_attempt` (1-based) failed:
    min(BaseDelay * BackoffMultiplier^(n-1), MaxDelay) + jitter, the jitter uniform in
    [0, JitterMaxDelay) and clipped so the total never exceeds MaxDelay.

    The first retry waits BaseDelay (3 s by default); the original .NET code waited BaseDelay *
    Multiplier because it passed n+1 — docs/worker.md fixes that deliberately."""
    n = max(1, int(failed_attempt))
    try:
        raw = policy.base_delay * policy.backoff_multiplier ** (n - 1)
    except OverflowError:
        raw = float("inf")
    capped = min(raw, policy.max_delay)
    room = max(0.0, min(policy.jitter_max_delay, policy.max_delay - capped))
    return capped + room * rand()


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with a failed execution: retry after `delay` seconds, or dead-letter with `reason`."""

    retry: bool
    delay: float = 0.0
    reason: FailureReason | None = None
    note: str = ""  # a line to put before the traceback (why this outcome)


def decide(
    exc: BaseException,
    *,
    attempt: int,
    max_attempts: int,
    policy: RetrySettings,
    fatal: tuple[type[BaseException], ...] = (),
    retry_on: tuple[type[BaseException], ...] = (),
    created_at: datetime | None = None,
    db_now: datetime | None = None,
    rand: Callable[[], float] = random.random,
    renewed_at: datetime | None = None,
) -> Decision:
    """The outcome of execution number `attempt` failing with `exc`.

    `created_at` and `db_now` are database-clock times (the job's creation and now); with
    `Retry.MaxJobAge` set, a retry that would run after the lifetime clock's start + MaxJobAge becomes
    RetryLifetimeExpired instead. The clock starts at `created_at`, or at `renewed_at` when a resurrect
    renewed the job's retry budget (docs/failures.md, "Resurrect renews the retry budget")."""
    if is_fatal(exc, fatal, retry_on):
        return Decision(False, reason=FailureReason.Fatal)
    throttled = is_throttled(exc)
    if attempt >= max_attempts:
        reason = FailureReason.Throttled if throttled else FailureReason.MaxRetriesExceeded
        note = f"{reason.name}: attempt {attempt} of {max_attempts} failed"
        return Decision(False, reason=reason, note=note)
    after = throttle_delay(exc)
    delay = min(after, policy.max_delay) if after is not None else backoff(attempt, policy, rand)
    clock = lifetime_start(created_at, renewed_at)
    if policy.max_job_age is not None and clock is not None and db_now is not None:
        deadline = clock + timedelta(seconds=policy.max_job_age)
        next_at = db_now + timedelta(seconds=delay)
        if next_at > deadline:
            since = f"CreatedAt={_iso(created_at)}" if clock == created_at else f"RenewedAt={_iso(clock)}"
            note = (
                "RetryLifetimeExpired: retry lifetime expired before the next attempt could be scheduled. "
                f"{since}; NextScheduledAt={_iso(next_at)}; "
                f"MaxJobAge={policy.max_job_age:g}s"
            )
            return Decision(False, reason=FailureReason.RetryLifetimeExpired, note=note)
    return Decision(True, delay=delay)


def lifetime_start(created_at: datetime | None, renewed_at: datetime | None) -> datetime | None:
    """Where a job's lifetime clock (Retry.MaxJobAge) starts: its renewal by a resurrect, else creation."""
    if renewed_at is not None and (created_at is None or renewed_at > created_at):
        return renewed_at
    return created_at


def _iso(value: datetime) -> str:
    return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_payload(text: str | None) -> object:
    """The handler's payload: parsed JSON (None for an empty payload). Raises json.JSONDecodeError."""
    if text is None or text == "":
        return None
    return json.loads(text)
