"""End to end against real `chokaq serve` processes over HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import threading
import time

import pytest
import requests

from chokaq_ops.models import NewJob
from tests.support.served import wait_for

pytestmark = pytest.mark.slow

MISSING_COMMA = '{"to": "user@example.com", "subject": "Welcome!" "body": "Hello, World!"}'
FIXED = {"to": "user@example.com", "subject": "Welcome!", "body": "Hello, World!"}


def test_seed_workflow_over_http(e2e):
    _store, tokens, serve, workdir = e2e
    api = serve("all", "--handlers", "tests.support.handlers_e2e", "--concurrency", "2")
    op = tokens["operator"]
    r = api.call(
        "POST", "/api/v1/jobs", op, json={"type": "email.send.v1", "payload": MISSING_COMMA, "queue": "mail"}
    )
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]
    dead = wait_for(
        lambda: api.call("GET", "/api/v1/dlq", op, params={"reason": "Fatal"}).json(),
        20,
        "the job to die as Fatal",
    )
    assert [j["id"] for j in dead] == [job_id]
    assert "JSON" in dead[0]["error_details"] or "json" in dead[0]["error_details"]
    assert api.call("PATCH", f"/api/v1/dlq/{job_id}", op, json={"payload": FIXED}).status_code == 200
    assert api.call("POST", f"/api/v1/dlq/{job_id}/resurrect", op).json()["location"] == "hot"
    done = wait_for(
        lambda: (j := api.call("GET", f"/api/v1/jobs/{job_id}", op).json())["location"] == "archive" and j,
        20,
        "the fixed job to be archived",
    )
    assert json.loads(done["payload"]) == FIXED and done["attempt_count"] == 1
    sent = [json.loads(line) for line in (workdir / "sent.jsonl").read_text().splitlines()]
    assert sent == [{"id": job_id, "payload": FIXED}]
    trail = api.call("GET", "/api/v1/audit", op, params={"job_id": job_id}).json()
    assert [(a["action"], a["actor"]) for a in reversed(trail)] == [
        ("enqueue", "operator-1"),
        ("edit_dlq", "operator-1"),
        ("resurrect", "operator-1"),
    ]
    stats = api.call("GET", "/api/v1/stats", op).json()
    assert (stats["enqueued_total"], stats["succeeded_total"], stats["failed_total"]) == (1, 1, 0)
    assert (stats["hot"], stats["archive"], stats["dlq"]) == (0, 1, 0)
    mail = api.call("GET", "/api/v1/queues/mail", op).json()
    assert (mail["enqueued_total"], mail["succeeded_total"], mail["failed_total"]) == (1, 1, 0)
    assert api.call("GET", "/api/v1/health/ready", op).json()["checks"]["worker"]["status"] == "ok"
    assert api.terminate() == 0, api.log()


def test_bulk_resurrect_of_2500_zombies_by_filter_commits_3_batches(e2e):
    store, tokens, serve, _ = e2e
    ids = [r.id for r in store.enqueue([NewJob(type="report.v1", queue="reports") for _ in range(2500)])]
    assert len(store.fetch("dead-worker", 2500, queues=["reports"])) == 2500
    store.mark_processing("dead-worker", ids)
    time.sleep(0.02)
    assert len(store.archive_zombies(0.001)) == 2500
    api = serve("api", "--no-worker", "--no-rescue", "--no-retention")
    preview = api.call(
        "POST", "/api/v1/dlq/preview", tokens["operator"], json={"filter": {"reason": "Zombie"}}
    )
    assert preview.json()["matched"] == 2500
    r = api.call(
        "POST",
        "/api/v1/dlq/resurrect",
        tokens["operator"],
        json={"filter": {"reason": "Zombie"}},
    )
    assert r.status_code == 200 and r.json() == {"resurrected": 2500, "batches": 3}
    assert store.count_dlq() == 0 and store.stats()["pending"] == 2500
    params = {"action": "resurrect", "page_size": 1}
    audit = api.call("GET", "/api/v1/audit", tokens["operator"], params=params)
    assert json.loads(audit.headers["X-Pagination"])["total"] == 2500


def test_an_sse_client_sees_the_rescue_after_a_worker_is_killed_mid_job(e2e):
    _store, tokens, serve, workdir = e2e
    worker = serve.worker(
        "worker-a", "--handlers", "tests.support.handlers_e2e", "--no-rescue", "--no-retention"
    )
    api = serve("api", "--no-worker", "--no-retention")
    received: list[dict] = []
    connected = threading.Event()

    def listen() -> None:
        with requests.get(
            api.base + "/api/v1/events",
            headers={"Authorization": f"Bearer {tokens['operator']}"},
            stream=True,
            timeout=30,
        ) as stream:
            connected.set()
            event: dict = {}
            for line in stream.iter_lines(decode_unicode=True):
                if line.startswith("event: "):
                    event["event"] = line[7:]
                elif line.startswith("data: "):
                    event["data"] = json.loads(line[6:])
                elif not line and event:
                    received.append(event)
                    if event.get("event") == "rescue":
                        return
                    event = {}

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    assert connected.wait(10)
    job_id = api.call(
        "POST", "/api/v1/jobs", tokens["operator"], json={"type": "slow.v1", "payload": {"seconds": 60}}
    ).json()["id"]
    wait_for(lambda: (workdir / f"started-{job_id}").exists(), 20, "the handler to start")
    worker.kill()
    listener.join(30)
    rescue = [e for e in received if e.get("event") == "rescue"]
    assert rescue, f"no rescue event; got {received}\n{api.log()}"
    assert job_id in rescue[0]["data"]["data"]["archived_ids"]
    dead = api.call("GET", f"/api/v1/dlq/{job_id}", tokens["operator"]).json()
    assert dead["failure_reason"] == "Zombie" and dead["heartbeat_at"] and dead["worker_id"] == "worker-a"


def test_served_limits_and_errors_keep_the_error_shape(e2e):
    _, tokens, serve, _ = e2e
    api = serve("api", "--no-worker", "--no-rescue", "--no-retention")
    big = api.call("POST", "/api/v1/jobs", tokens["operator"], json={"type": "t", "payload": "x" * 150_000})
    assert big.status_code == 413 and big.json()["code"] == 413
    assert api.call("GET", "/api/v1/dlq").status_code == 401
    assert api.call("GET", "/api/v1/dlq", tokens["operator"], params={"reason": "Boom"}).json()["errors"] == {
        "query": {
            "reason": [
                "unknown failure reason 'Boom'; expected one of "
                + ", ".join(r.name for r in __import__("chokaq_ops").FailureReason)
            ]
        }
    }
    assert api.terminate() == 0
