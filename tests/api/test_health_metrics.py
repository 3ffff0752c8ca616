"""Probes and metrics through the Flask test client."""

from __future__ import annotations

import time

from chokaq_ops.settings import Settings
from chokaq_ops.storage import Store
from tests.api.conftest import ApiClient, enqueue


def test_liveness_and_readiness_are_open_and_the_detail_needs_a_reader(client):
    assert client.get("/health/live", role=None).json == {"status": "ok"}
    assert client.get("/health/ready", role=None).json == {"status": "ok"}
    assert client.get("/health/ready", token="chq_forged").status_code == 401
    r = client.get("/health/ready", role="reader")
    assert r.status_code == 200 and r.json["status"] == "ok"
    checks = r.json["checks"]
    assert {name: c["status"] for name, c in checks.items()} == {
        "storage": "ok",
        "schema": "ok",
        "worker": "skipped",
        "queue_lag": "ok",
        "horizon": "ok",
    }


def test_readiness_degrades_then_fails_on_queue_lag(store, settings, tokens, bound_app):
    enqueue(store, 1, queue="slow")
    time.sleep(0.06)
    degraded = settings.with_overrides(
        {"health.queue_lag_degraded": 0.05, "health.queue_lag_unhealthy": 3600}
    )
    r = ApiClient(bound_app(degraded, store=store), tokens).get("/health/ready", role="reader")
    assert r.status_code == 200 and r.json["status"] == "degraded"
    assert r.json["checks"]["queue_lag"]["data"]["worst_queue"] == "slow"
    failing = settings.with_overrides({"health.queue_lag_degraded": 0.01, "health.queue_lag_unhealthy": 0.05})
    anonymous = ApiClient(bound_app(failing, store=store), tokens).get("/health/ready", role=None)
    assert anonymous.status_code == 503 and anonymous.json["errors"] == {
        "checks": {"queue_lag": ["unhealthy"]}
    }
    assert "slow" not in str(anonymous.json) and "checks" not in anonymous.json  # queue names need a token
    r = ApiClient(bound_app(failing, store=store), tokens).get("/health/ready", role="reader")
    assert r.status_code == 503
    assert r.json["code"] == 503 and r.json["status"] == "Service Unavailable"
    assert list(r.json["errors"]["checks"]) == ["queue_lag"] and "slow" in r.json["message"] + str(r.json)
    store.set_queue("slow", actor=_actor(), paused=True)  # a paused queue is allowed to wait
    r = ApiClient(bound_app(failing, store=store), tokens).get("/health/ready", role=None)
    assert r.status_code == 200


def _actor():
    from chokaq_ops.models import Actor

    return Actor("test")


def test_readiness_fails_on_an_unmigrated_schema(tmp_path, bound_app):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    with Store(url, pool_size=1) as empty:
        app = bound_app(Settings().with_overrides({"storage.url": url}), store=empty)
        r = app.test_client().get("/api/v1/health/ready")
    assert r.status_code == 503 and r.json["message"].startswith("not ready: schema")
    assert r.json["errors"]["checks"]["schema"] == ["unhealthy"] and "checks" not in r.json


def test_readiness_fails_when_the_database_is_unreachable(tmp_path, bound_app):
    url = f"sqlite:///{tmp_path}"  # a directory: every connection attempt fails
    with Store(url, pool_size=1, max_transient_retries=0) as gone:
        app = bound_app(Settings().with_overrides({"storage.url": url}), store=gone)
        r = app.test_client().get("/api/v1/health/ready", headers={"Authorization": "Bearer chq_any"})
        assert app.test_client().get("/api/v1/health/live").status_code == 200
    # No token can be checked with the database gone: the probe still answers, with the status only.
    assert r.status_code == 503 and r.json["errors"]["checks"]["storage"] == ["unhealthy"]
    assert r.json["message"].startswith("not ready: storage")


def test_metrics_need_a_reader_unless_configured_open(client, store, settings, tokens, bound_app):
    enqueue(store, 2, queue="mail")
    assert client.get("/metrics", role=None).status_code == 401
    r = client.get("/metrics", role="reader")
    assert r.status_code == 200 and r.mimetype == "text/plain"
    text = r.get_data(as_text=True)
    assert 'chokaq_queue_jobs{queue="mail",status="pending"} 2.0' in text
    assert "chokaq_storage_up 1.0" in text
    open_app = bound_app(settings.with_overrides({"api.metrics_open": True}), store=store)
    assert open_app.test_client().get("/api/v1/metrics").status_code == 200


def test_queue_gauges_name_the_busiest_queues_and_sum_the_rest():
    from chokaq_ops.engine.metrics import OTHER, cap_queues

    queues = [
        {
            "name": f"q{i}",
            "pending": i,
            "fetched": 0,
            "processing": 0,
            "failed_total": 1,
            "max_lag_seconds": float(i),
            "paused": i == 0,
        }
        for i in range(10)
    ]
    shown = cap_queues(queues, 4)
    assert [q["name"] for q in shown] == ["q9", "q8", "q7", OTHER]
    other = shown[-1]
    assert (other["pending"], other["failed_total"], other["max_lag_seconds"], other["paused"]) == (
        sum(range(7)),
        7,
        6.0,
        True,
    )
    assert cap_queues(queues, 10) == queues


def test_queue_lag_counts_jobs_a_dead_worker_holds_and_clears_when_they_drain(
    store, settings, tokens, bound_app
):
    """Readiness turns degraded then unhealthy as a backlog ages, and back once it drains. A job a dead
    worker (registry row older than Health.WorkerHeartbeatTimeout) fetched is waiting too: nobody runs it;
    the same job fetched by a live worker is not."""
    from tests.support.dbprobe import age, sql

    s = settings.with_overrides(
        {
            "health.queue_lag_degraded": 5,
            "health.queue_lag_unhealthy": 10,
            "health.worker_heartbeat_timeout": 30,
        }
    )
    client = ApiClient(bound_app(s, store=store), tokens)

    def ready():
        r = client.get("/health/ready", role="reader")
        return r.status_code, r.json.get("status"), r.json

    [job] = enqueue(store, 1, queue="held")
    store.worker_register("w-dead", host="h", pid=1, queues=None, concurrency=1, running=0, prefetched=0)
    assert [r["id"] for r in store.fetch("w-dead", 1, ["held"])] == [job]
    age(store, "jobs_hot", [job], 7, "due_at")
    assert ready()[:2] == (200, "ok")  # fetched by a live worker: being worked on
    ago = (
        "now() - interval '60 seconds'"
        if store.dialect.name == "postgresql"
        else ("strftime('%Y-%m-%d %H:%M:%f', 'now', '-60 seconds')")
    )
    sql(store, f"UPDATE workers SET last_seen_at = {ago}")
    code, status, body = ready()
    assert (code, status) == (200, "degraded")
    lag = body["checks"]["queue_lag"]["data"]
    assert (lag["worst_queue"], lag["stranded"]) == ("held", 1) and lag["max_lag_seconds"] >= 7
    age(store, "jobs_hot", [job], 12, "due_at")
    code, _, body = ready()
    assert code == 503 and "held" in str(body)
    metrics = client.get("/metrics", role="reader").get_data(as_text=True)
    assert any(line.startswith('chokaq_queue_lag_seconds{queue="held"} 1') for line in metrics.splitlines())
    assert store.recover_orphaned(30) == [{"id": job, "queue": "held"}]  # the sweep: back to pending...
    store.fetch("w-live", 1, ["held"])
    store.mark_processing("w-live", [job])
    store.archive_succeeded("w-live", [(job, 1.0)])  # ...and drained
    assert ready()[:2] == (200, "ok")
