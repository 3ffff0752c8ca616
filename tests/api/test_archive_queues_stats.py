"""Archive, queues and stats through the Flask test client."""

from __future__ import annotations

from datetime import timedelta

from tests.api.conftest import enqueue, events_settled, pagination, to_archive, to_dlq


def test_archive_lists_gets_and_filters(client, store):
    done = to_archive(store, 3, queue="mail", tags="eu")
    to_archive(store, 1, queue="sms")
    r = client.get("/archive?queue=mail&sort=duration_ms&order=asc", role="reader")
    assert r.status_code == 200 and pagination(r)["total"] == 3
    assert {j["status"] for j in r.json} == {"succeeded"} and r.json[0]["duration_ms"] == 12.5
    assert len(client.get("/archive?tag=eu", role="reader").json) == 3
    assert client.get(f"/archive/{done[0]}", role="reader").json["location"] == "archive"
    dead = to_dlq(store, 1, queue="x")[0]
    assert client.get(f"/archive/{dead}", role="reader").status_code == 404
    assert client.get("/archive?sort=reason", role="reader").status_code == 422


def test_archive_purge_by_age_or_timestamp(client, store):
    to_archive(store, 2)
    assert client.post("/archive/purge", role="admin", json={"older_than": "30d"}).json["purged"] == 0
    cutoff = (store.now() + timedelta(seconds=-0.0)).isoformat()
    r = client.post("/archive/purge", role="admin", json={"older_than": cutoff})
    assert r.status_code == 200 and (r.json["purged"], r.json["batches"]) == (2, 1)
    assert r.json["cutoff"].endswith("Z")
    assert store.stats()["archive"] == 0 and store.stats()["succeeded_total"] == 0
    [row] = store.list_audit(action="purge_archive").items
    assert (row["actor"], row["count"]) == ("admin", 2)


def test_archive_purge_rejects_bad_cutoffs(client):
    for value in ("soon", "-5d", 0, True, "2999-01-01T00:00:00Z", None):
        r = client.post("/archive/purge", role="admin", json={"older_than": value})
        assert r.status_code == 422 and "older_than" in r.json["errors"]["json"], (value, r.json)
    assert client.post("/archive/purge", role="admin", json={}).status_code == 422


def test_queues_show_state_counts_lag_and_totals(client, store):
    enqueue(store, 2, queue="mail")
    to_dlq(store, 1, queue="sms")
    r = client.get("/queues", role="reader")
    queues = {q["name"]: q for q in r.json}
    assert {"default", "mail", "sms"} <= set(queues)
    assert (queues["mail"]["pending"], queues["mail"]["enqueued_total"]) == (2, 2)
    assert queues["sms"]["failed_total"] == 1
    assert queues["mail"]["effective_zombie_timeout_seconds"] == 600
    assert client.get("/queues/mail", role="reader").json["due_pending"] == 2
    assert client.get("/queues/nope", role="reader").status_code == 404


def test_pause_resume_as_operator_and_limits_as_admin_with_null_clearing(client, store):
    enqueue(store, 1, queue="mail")
    r = client.patch("/queues/mail", role="operator", json={"paused": True})
    assert r.status_code == 200 and r.json["paused"] is True
    for body in (
        {"max_workers": 2},
        {"active": False},
        {"zombie_timeout_seconds": 120},
        {"paused": False, "max_workers": None},
    ):
        assert client.patch("/queues/mail", role="operator", json=body).status_code == 403, body
    r = client.patch("/queues/mail", role="admin", json={"max_workers": 2, "zombie_timeout_seconds": 120})
    assert (r.json["max_workers"], r.json["zombie_timeout_seconds"]) == (2, 120)
    assert r.json["effective_zombie_timeout_seconds"] == 120
    r = client.patch("/queues/mail", role="admin", json={"max_workers": None})
    assert (r.json["max_workers"], r.json["zombie_timeout_seconds"]) == (None, 120)
    changes = store.list_audit(action="set_queue").items
    assert [a["actor"] for a in changes] == ["admin", "admin", "operator"]
    assert {e["kind"] for e in events_settled(store, 3)} >= {"queue"}


def test_queue_patch_validates_each_field(client, store):
    for body, field in (
        ({"zombie_timeout_seconds": 30}, "zombie_timeout_seconds"),  # not above 3 x 12s heartbeat max
        ({"max_workers": 0}, "max_workers"),
        ({"paused": "yes please"}, "paused"),
        ({"paused": None}, "paused"),
        ({}, "paused"),
        ({"colour": "red"}, "colour"),
    ):
        r = client.patch("/queues/default", role="admin", json=body)
        assert r.status_code == 422 and field in r.json["errors"]["json"], (body, r.json)
    assert store.queue_stats("default")[0]["paused"] is False


def test_stats_totals_and_rates(client, store):
    enqueue(store, 2)
    to_archive(store, 1, queue="a")
    to_dlq(store, 1, queue="b")
    s = client.get("/stats", role="reader").json
    assert (s["enqueued_total"], s["succeeded_total"], s["failed_total"]) == (4, 1, 1)
    assert (s["pending"], s["hot"], s["archive"], s["dlq"]) == (2, 2, 1, 1)
    assert s["processed_1m"] == 2 and s["failure_rate_1m"] == 50.0


def test_rescue_sweeps_now_and_announces_it(store, settings, tokens, bound_app):
    import time

    from tests.api.conftest import WORKER, ApiClient

    fast = settings.with_overrides(
        {
            "execution.heartbeat_interval_min": 0.01,
            "execution.heartbeat_interval_max": 0.02,
            "recovery.processing_zombie_timeout": 0.1,
            "recovery.fetched_job_timeout": 0.1,
        }
    )
    client = ApiClient(bound_app(fast, store=store), tokens)
    abandoned = enqueue(store, 1, queue="a")[0]
    store.fetch(WORKER, 1, queues=["a"])
    zombie = enqueue(store, 1, queue="z")[0]
    store.fetch(WORKER, 1, queues=["z"])
    store.mark_processing(WORKER, [zombie])
    time.sleep(0.15)
    r = client.post("/rescue", role="operator")
    assert r.status_code == 200 and r.json == {"recovered": 1, "archived": 1}
    assert store.get_job(abandoned)["status"] == "pending"
    dead = client.get(f"/dlq/{zombie}", role="reader").json
    assert dead["failure_reason"] == "Zombie" and dead["worker_id"] == WORKER
    assert [e["kind"] for e in events_settled(store, 1)] == ["rescue"]  # the sweep's one event
