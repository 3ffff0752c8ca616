"""POST /jobs takes the caller's W3C trace context from its headers (docs/tracing.md)."""

from __future__ import annotations

import json

import pytest

from chokaq_ops import tracing

pytestmark = pytest.mark.skipif(not tracing.ENABLED, reason="tracing turned off (CHOKAQ_TRACING)")


def test_the_api_takes_the_callers_traceparent_header(client, store):
    header = "00-" + "c" * 32 + "-" + "d" * 16 + "-01"
    r = client.post("/jobs", role="operator", json={"type": "t"}, headers={"traceparent": header})
    assert r.status_code == 201
    assert json.loads(r.json["trace_context"])["traceparent"] == header
    bad = client.post("/jobs", role="operator", json={"type": "t"}, headers={"traceparent": "00-zz-yy-01"})
    assert bad.status_code == 201 and bad.json["trace_context"] is None
