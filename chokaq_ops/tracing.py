"""Traces across the queue (docs/tracing.md): with `opentelemetry-api` installed (`pip install chokaq[otel]`),
the producer's W3C trace context is stored with the job at enqueue, and the worker runs the handler inside
a CONSUMER span linked to it, with OpenTelemetry's messaging semantic conventions and the outcome.

The import is tried once, here, at module load. Without the package nothing of OpenTelemetry is imported
and the hot paths only read `ENABLED` (False): the producer stores no context, the worker opens no span.
`CHOKAQ_TRACING=off` turns it off with the package installed.

What is stored is W3C Trace Context only (`traceparent`, `tracestate`), read and written with the W3C
propagator whatever the application's global propagators are: the job's column holds one format that any
worker can read. The consumer span is a new trace root with a link to the producer's span, not its child:
a job may run hours after its request ended, retries each get their own span linked to the same producer,
and a job resurrected from the DLQ days later keeps that link.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

MAX_CONTEXT_CHARS = 1024  # a longer context (a huge tracestate) keeps its traceparent alone
SYSTEM = "chokaq"

try:  # the one guarded import: everything below needs it only when ENABLED
    from opentelemetry import context as _context
    from opentelemetry import trace as _trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # the `otel` extra is not installed
    ENABLED = False
else:
    ENABLED = os.environ.get("CHOKAQ_TRACING", "").strip().lower() not in ("0", "off", "false", "no")
    _PROPAGATOR = TraceContextTextMapPropagator()
    _TRACER: Any = _trace.get_tracer("chokaq_ops")  # a proxy until the application sets a provider


_OWN_PROVIDER = False  # a provider is set: use_tracer_provider was called, or the global one
_looked_at = float("-inf")  # when consumer_spans last asked OpenTelemetry for the global provider


def use_tracer_provider(provider: Any) -> None:
    """Spans of this process go to `provider` instead of OpenTelemetry's global one (tests, embedders
    with several providers)."""
    global _TRACER, _OWN_PROVIDER
    if ENABLED:
        _TRACER = provider.get_tracer("chokaq_ops")
        _OWN_PROVIDER = True


PROVIDER_LOOK_S = 1.0  # how often the worker looks for a provider while none is set


def consumer_spans() -> bool:
    """Whether the worker opens a consumer span per execution: ENABLED and a tracer provider set, the
    application's global one (also from the environment, OTEL_PYTHON_TRACER_PROVIDER) or
    use_tracer_provider's. With none, OpenTelemetry's proxy gives out the thread's current span, which
    in an execution thread is the invalid one: the handler would see exactly what it sees without a
    span, and making it cost a few microseconds of a no-op job's ~100 us of worker CPU
    (docs/tracing.md). A provider the application sets after the worker started is seen within
    PROVIDER_LOOK_S (looking on every execution cost about a microsecond: an environment lookup). The
    producer's side is not gated so: a valid context may be current without any provider (propagated
    from a request), and it is stored with the job."""
    global _OWN_PROVIDER, _looked_at
    if _OWN_PROVIDER:
        return True
    if not ENABLED:
        return False
    now = time.monotonic()
    if now - _looked_at < PROVIDER_LOOK_S:
        return False
    _looked_at = now
    if isinstance(_trace.get_tracer_provider(), _trace.ProxyTracerProvider):
        return False
    _OWN_PROVIDER = True  # OpenTelemetry sets the global provider once: no need to look again
    return True


def current_context() -> str | None:
    """The calling thread's current span as the JSON the job stores, or None outside a sampled or
    unsampled valid span. Called by the producer for each job only when ENABLED."""
    # Most enqueues run outside any span (scripts, workers without a provider): the current span's
    # context is looked at first, and only a valid one is injected (the propagator's inject was 1.5 us).
    if not _trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return _encode(carrier)


def from_headers(headers: Any) -> str | None:
    """The W3C context an HTTP request carried (`traceparent`, `tracestate` headers), validated by the
    propagator, as the JSON the job stores; None when absent or malformed."""
    carrier = {k: v for k in ("traceparent", "tracestate") if (v := headers.get(k))}
    if "traceparent" not in carrier:
        return None
    span = _trace.get_current_span(_PROPAGATOR.extract(carrier)).get_span_context()
    if not span.is_valid:
        return None
    out: dict[str, str] = {}
    _PROPAGATOR.inject(out, context=_trace.set_span_in_context(_trace.NonRecordingSpan(span)))
    return _encode(out)


def _encode(carrier: dict[str, str]) -> str | None:
    if "traceparent" not in carrier:
        return None
    text = json.dumps(carrier, separators=(",", ":"), sort_keys=True)
    if len(text) > MAX_CONTEXT_CHARS:
        text = json.dumps({"traceparent": carrier["traceparent"]}, separators=(",", ":"))
    return text


def _link(stored: str | None) -> list[Any]:
    """The link to the producer's span from a job's stored context; none when missing or unreadable."""
    if not stored:
        return []
    try:
        carrier = json.loads(stored)
        if not isinstance(carrier, dict):
            return []
        span = _trace.get_current_span(_PROPAGATOR.extract(carrier)).get_span_context()
    except (ValueError, TypeError, AttributeError):
        return []
    return [_trace.Link(span)] if span.is_valid else []


class ConsumerSpan:
    """The span one execution runs in: started (and made current, so the handler's own spans are its
    children) by `start`, given the handler's exception by `exception`, ended by `finish` with the
    outcome the worker decided."""

    __slots__ = ("_span", "_token")

    def __init__(
        self,
        *,
        queue: str,
        job_id: str,
        job_type: str,
        attempt: int,
        worker_id: str,
        trace_context: str | None,
    ) -> None:
        self._span = _TRACER.start_span(
            f"process {queue}",
            kind=_trace.SpanKind.CONSUMER,
            links=_link(trace_context),
            attributes={
                "messaging.system": SYSTEM,
                # messaging.operation is the name of semantic conventions before 1.26; both are set.
                "messaging.operation": "process",
                "messaging.operation.type": "process",
                "messaging.operation.name": "process",
                "messaging.destination.name": queue,
                "messaging.message.id": job_id,
                "messaging.client.id": worker_id,
                "chokaq.job.type": job_type,
                "chokaq.job.attempt": attempt,
            },
        )
        self._token = _context.attach(_trace.set_span_in_context(self._span))

    def exception(self, exc: BaseException) -> None:
        """The handler raised: an `exception` event with its type, message and stack trace."""
        self._span.record_exception(exc, escaped=True)
        self._span.set_attribute("error.type", f"{type(exc).__module__}.{type(exc).__qualname__}")

    def finish(self, outcome: str, reason: str | None = None, error: str | None = None) -> None:
        """End the span with the outcome (`ok`, `retry`, `dead`): an error status unless it succeeded."""
        span = self._span
        try:
            span.set_attribute("chokaq.job.outcome", outcome)
            if reason is not None:
                span.set_attribute("chokaq.job.failure_reason", reason)
            if outcome != "ok":
                first = (error or outcome).strip().splitlines()
                span.set_status(_trace.Status(_trace.StatusCode.ERROR, first[0][:200] if first else outcome))
        finally:
            _context.detach(self._token)
            span.end()
