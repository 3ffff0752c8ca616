"""The API next to a real engine Host in one process (what `chokaq serve` runs): the operator's
workflow through the Flask test client, readiness of the hosted worker, and its metrics."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from chokaq_api import create_app
from chokaq_ops.engine.handlers import Registry
from chokaq_ops.engine.hosting import Host
from tests.api.conftest import ApiClient

MISSING_COMMA = '{"to": "user@example.com", "subject": "Welcome!" "body": "Hello, World!"}'


def wait_for(check: Callable[[], object], timeout: float = 10.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


@pytest.fixture
def hosted(store, settings, tokens):
    sent: list[dict] = []
    registry = Registry()

    @registry.job("email.send.v1")
    def send(payload, ctx):
        sent.append(payload)

    fast = settings.with_overrides({"worker.polling_interval": 0.05, "worker.shutdown_grace_period": 1})
    host = Host(fast, store, registry=registry, run_rescue=False, run_retention=False, concurrency=2)
    host.start()
    try:
        yield ApiClient(create_app(fast, store=store, host=host), tokens), host, sent
    finally:
        host.shutdown()


def test_seed_workflow_malformed_json_dies_is_fixed_resurrected_and_archived(hosted, store):
    client, _, sent = hosted
    job = client.post("/jobs", role="operator", json={"type": "email.send.v1", "payload": MISSING_COMMA}).json
    wait_for(lambda: client.get(f"/jobs/{job['id']}", role="reader").json["location"] == "dlq")
    found = client.get("/dlq?reason=Fatal", role="reader").json
    assert [j["id"] for j in found] == [job["id"]]
    assert "JSON" in found[0]["error_details"] or "json" in found[0]["error_details"]
    fixed = json.loads(MISSING_COMMA.replace('"Welcome!" "body"', '"Welcome!", "body"'))
    assert client.patch(f"/dlq/{job['id']}", role="operator", json={"payload": fixed}).status_code == 200
    back = client.post(f"/dlq/{job['id']}/resurrect", role="operator").json
    # The reply reads the job after the move commits; the hosted worker may have claimed or even run it
    # by then, so the reply says where it went, not that it still waits.
    assert back["location"] in ("hot", "archive"), back
    wait_for(lambda: client.get(f"/jobs/{job['id']}", role="reader").json["location"] == "archive")
    assert sent == [fixed]
    trail = client.get(f"/audit?job_id={job['id']}", role="reader").json
    assert [(a["action"], a["actor"]) for a in reversed(trail)] == [
        ("enqueue", "operator"),
        ("edit_dlq", "operator"),
        ("resurrect", "operator"),
    ]
    stats = client.get("/stats", role="reader").json
    assert (stats["enqueued_total"], stats["succeeded_total"], stats["failed_total"], stats["dlq"]) == (
        1,
        1,
        0,
        0,
    )


def test_readiness_follows_the_hosted_worker_and_metrics_show_its_counters(hosted):
    client, host, _ = hosted
    ready = wait_for(lambda: (r := client.get("/health/ready", role="reader")).status_code == 200 and r)
    worker = ready.json["checks"]["worker"]
    assert worker["status"] == "ok" and worker["data"]["worker_id"] == host.worker.worker_id
    client.post("/jobs", role="operator", json={"type": "email.send.v1", "payload": {"n": 1}})

    def succeeded() -> bool:
        text = client.get("/metrics", role="reader").get_data(as_text=True)
        return any(
            line.startswith("chokaq_jobs_succeeded_total{")
            and 'type="email.send.v1"' in line
            and line.endswith(" 1.0")
            for line in text.splitlines()
        )

    wait_for(succeeded)
    host.shutdown()
    r = client.get("/health/ready", role="reader")
    assert r.status_code == 503 and r.json["checks"]["worker"]["status"] == "unhealthy"
    assert "worker" in r.json["errors"]["checks"]
