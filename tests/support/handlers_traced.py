"""Handlers for the trace tests' real worker process (imported with --handlers). On import they install an
OpenTelemetry SDK provider whose spans are written, one JSON line each, to $CHOKAQ_TEST_SPANS: the test
process reads what the worker exported."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from chokaq_ops import job


class JsonLinesExporter(SpanExporter):
    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.lock, open(self.path, "a", encoding="utf-8") as f:
            for s in spans:
                f.write(json.dumps(span_dict(s)) + "\n")
        return SpanExportResult.SUCCESS


def span_dict(s: ReadableSpan) -> dict:
    ctx = s.get_span_context()
    return {
        "name": s.name,
        "kind": s.kind.name,
        "trace_id": f"{ctx.trace_id:032x}",
        "span_id": f"{ctx.span_id:016x}",
        "parent_span_id": f"{s.parent.span_id:016x}" if s.parent else None,
        "links": [
            {"trace_id": f"{lk.context.trace_id:032x}", "span_id": f"{lk.context.span_id:016x}"}
            for lk in s.links
        ],
        "attributes": dict(s.attributes or {}),
        "events": [{"name": e.name, "attributes": dict(e.attributes or {})} for e in s.events],
        "status": s.status.status_code.name,
        "status_description": s.status.description,
    }


if os.environ.get("CHOKAQ_TEST_SPANS"):
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(os.environ["CHOKAQ_TEST_SPANS"])))
    trace.set_tracer_provider(provider)

_tracer = trace.get_tracer("tests.handlers_traced")


@job("traced.ok.v1")
def traced_ok(payload, ctx):
    with _tracer.start_as_current_span("handler work"):  # the handler's own span: a child of the consumer's
        pass


@job("traced.fail.v1")
def traced_fail(payload, ctx):
    raise RuntimeError(f"boom {payload.get('n', 0)}")
