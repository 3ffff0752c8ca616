"""One execution of one job: the payload parsed, the handler called, the outcome classified.

The worker moves `Run`s between its threads; `execute` is what an execution thread does with one, and
returns the `Outcome` the completer writes (archive, DLQ or retry). Nothing here touches the database.
"""

from __future__ import annotations

import json
import time
import traceback
from datetime import datetime, timedelta

from chokaq_ops import tracing
from chokaq_ops.engine import retry
from chokaq_ops.engine.handlers import Handler, JobContext
from chokaq_ops.fingerprint import fingerprint_text
from chokaq_ops.models import FailureReason
from chokaq_ops.records import ClaimedJob, Started
from chokaq_ops.settings import RetrySettings

# A Run's life in this process. Only RUNNING -> DONE delivers the handler's own outcome; every other
# exit was decided while the handler still ran (its late result is then discarded).
RUNNING, DONE, TIMED_OUT, HEARTBEAT_FAILED, LOST, ABANDONED = (
    "running",
    "done",
    "timed_out",
    "heartbeat_failed",
    "lost",
    "abandoned",
)
OK, DEAD, RETRY, DEFER = "ok", "dead", "retry", "defer"  # DEFER: met by an open circuit, never ran

MAX_ERROR_CHARS = 64_000  # a RecursionError traceback can be megabytes; keep the head and the end


class Run:
    """A job this worker marked processing: its row, handler, context and in-process state."""

    __slots__ = (
        "attempt",
        "created_at",
        "ctx",
        "deadline",
        "flushing",
        "handler",
        "hb_failures",
        "id",
        "lost",
        "max_attempts",
        "mono_start",
        "payload",
        "queue",
        "renewed_at",
        "started_at",
        "state",
        "timeout",
        "timeout_source",
        "trace_context",
        "type",
    )

    def __init__(
        self,
        row: ClaimedJob,
        marked: Started | ClaimedJob,  # the start the store recorded (a claim-and-start's row has it)
        handler: Handler | None,
        *,
        worker_id: str,
        max_attempts: int,
        timeout: float,
        timeout_source: str,
        now: float,
    ) -> None:
        self.id: str = row.id
        self.queue: str = row.queue
        self.type: str = row.type
        self.payload: str | None = row.payload
        self.created_at: datetime | None = row.created_at
        self.trace_context: str | None = row.trace_context  # the producer's, for the consumer span's link
        # A renewing resurrect restarted the job's lifetime clock (Retry.MaxJobAge) here.
        self.renewed_at: datetime | None = row.renewed_at
        self.attempt: int = marked.attempt_count
        self.started_at: datetime | None = marked.started_at  # database clock
        self.handler = handler
        self.max_attempts = max_attempts
        self.timeout = timeout
        self.timeout_source = timeout_source
        self.mono_start = now
        self.deadline = now + timeout
        self.state = RUNNING
        self.flushing = False  # the completer is writing this job's outcome
        self.lost = False  # the worker no longer owns the row: any outcome is a no-op
        self.hb_failures = 0
        self.ctx = JobContext(
            job_id=self.id,
            attempt=self.attempt,
            queue=self.queue,
            type=self.type,
            worker_id=worker_id,
            priority=int(row.priority or 0),
            tags=row.tags,
            max_attempts=max_attempts,
            timeout=timeout,
        )

    def db_now(self) -> datetime | None:
        """Now on the database clock, from the start time the database gave us plus elapsed time
        (no extra round trip, and a worker with a wrong clock still computes right)."""
        if self.started_at is None:
            return None
        return self.started_at + timedelta(seconds=time.monotonic() - self.mono_start)


class Outcome:
    """What the completer writes for a run: archive (ok), DLQ (dead) or reschedule (retry)."""

    __slots__ = (
        "counts_for_circuit",
        "delay",
        "duration_ms",
        "error",
        "fingerprint",
        "kind",
        "reason",
        "run",
    )

    def __init__(
        self,
        run: Run,
        kind: str,
        duration_ms: float | None = None,
        *,
        reason: FailureReason | None = None,
        error: str | None = None,
        delay: float = 0.0,
        fingerprint: str | None = None,
    ) -> None:
        self.run = run
        self.kind = kind
        self.duration_ms = duration_ms
        self.reason = reason
        self.error = error
        self.delay = delay
        self.fingerprint = fingerprint or (fingerprint_text(error).id if kind == DEAD else None)
        # A failure the handler raised that says the downstream may be unwell: set by `failed` for
        # everything but fatal errors (timeouts by the job's own limit, shutdowns, lost jobs never count).
        self.counts_for_circuit = False


def execute(run: Run, policy: RetrySettings) -> Outcome:
    """Parse the payload, call the handler, classify what happened. Never raises. With OpenTelemetry
    (chokaq_ops/tracing.py) all of it runs inside the job's consumer span, which ends with the outcome."""
    if not tracing.consumer_spans():
        return _execute(run, policy, None)
    span = tracing.ConsumerSpan(
        queue=run.queue,
        job_id=run.id,
        job_type=run.type,
        attempt=run.attempt,
        worker_id=run.ctx.worker_id,
        trace_context=run.trace_context,
    )
    outcome = None
    try:
        outcome = _execute(run, policy, span)
        return outcome
    finally:
        if outcome is None:
            span.finish("dead", error="the execution thread failed")
        else:
            reason = outcome.reason.name if outcome.reason is not None else None
            span.finish(outcome.kind, reason, outcome.error)


def _execute(run: Run, policy: RetrySettings, span: tracing.ConsumerSpan | None) -> Outcome:
    handler = run.handler
    start = time.perf_counter()
    try:
        if handler is None:
            return Outcome(run, DEAD, 0.0, reason=FailureReason.Fatal, error=_unknown_type(run))
        try:
            payload = retry.parse_payload(run.payload)
        except json.JSONDecodeError as exc:
            text = f"FATAL: invalid JSON payload for job type {run.type!r}: {exc}\n{format_exception(exc)}"
            return Outcome(run, DEAD, 0.0, reason=FailureReason.Fatal, error=clip(text))
        handler.fn(payload, run.ctx)
        return Outcome(run, OK, (time.perf_counter() - start) * 1000.0)
    except BaseException as exc:  # a handler may raise anything, SystemExit included; the thread survives
        if span is not None:
            span.exception(exc)
        return failed(run, exc, (time.perf_counter() - start) * 1000.0, policy)


def failed(run: Run, exc: BaseException, duration_ms: float, policy: RetrySettings) -> Outcome:
    handler = run.handler
    decision = retry.decide(
        exc,
        attempt=run.attempt,
        max_attempts=run.max_attempts,
        policy=policy,
        fatal=handler.fatal if handler else (),
        retry_on=handler.retry_on if handler else (),
        created_at=run.created_at,
        renewed_at=run.renewed_at,
        db_now=run.db_now(),
    )
    trace = format_exception(exc)
    if decision.retry:
        summary = f"{type(exc).__name__}: {exc}"
        # Fingerprinted from the traceback, as the dead-lettering of the same error will be: the failure
        # history groups a job's retried attempts with its final failure.
        out = Outcome(
            run,
            RETRY,
            duration_ms,
            delay=decision.delay,
            error=clip(summary, 4000),
            fingerprint=fingerprint_text(trace).id,
        )
        out.counts_for_circuit = True
        return out
    if decision.reason is FailureReason.Fatal:
        text = f"FATAL: {type(exc).__name__}: {exc}\n{trace}"
    elif decision.reason is FailureReason.RetryLifetimeExpired:
        text = f"{decision.note}. Last error: {type(exc).__name__}: {exc}\n{trace}"
    else:
        # The verdict and its cause on the first line (what the failure history and listings show):
        # "MaxRetriesExceeded: attempt 3 of 3 failed: ConnectionError: relay refused", then the traceback.
        text = f"{decision.note}: {cause_line(exc)}\n{trace}"
    out = Outcome(run, DEAD, duration_ms, reason=decision.reason, error=clip(text))
    out.counts_for_circuit = decision.reason is not FailureReason.Fatal
    return out


def cause_line(exc: BaseException) -> str:
    """`Type: first line of the message` of an exception (`Type` alone when it has no message)."""
    message = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {message[0]}" if message else type(exc).__name__


def format_exception(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)).rstrip("\n")


def clip(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    if len(text) <= limit:
        return text
    head = limit // 8
    tail = limit - head - 100
    return f"{text[:head]}\n... ({len(text) - head - tail} characters cut) ...\n{text[-tail:]}"


def _unknown_type(run: Run) -> str:
    return f"FATAL: no handler registered for type {run.type!r} in worker {run.ctx.worker_id}"


def preempted(run: Run, reason: FailureReason, text: str) -> Outcome:
    """The outcome decided while the handler still runs (timeout, heartbeat failure)."""
    elapsed = (time.monotonic() - run.mono_start) * 1000.0
    return Outcome(run, DEAD, elapsed, reason=reason, error=text)
