"""The dead-letter queue through the Flask test client."""

from __future__ import annotations

import json

from chokaq_ops.models import FailureReason
from tests.api.conftest import enqueue, pagination, to_dlq

MISSING_COMMA = '{"to": "user@example.com", "subject": "Welcome!" "body": "Hello, World!"}'


def test_list_filters_by_reason_and_queue_sorts_and_pages(client, store):
    fatal = to_dlq(store, 3, queue="mail", reason=FailureReason.Fatal)
    to_dlq(store, 2, queue="mail", reason=FailureReason.Zombie)
    to_dlq(store, 1, queue="sms", reason=FailureReason.Fatal)
    r = client.get("/dlq?reason=Fatal&queue=mail&sort=id&order=asc&page_size=2", role="reader")
    assert r.status_code == 200
    assert [j["id"] for j in r.json] == sorted(fatal)[:2]
    assert {j["failure_reason"] for j in r.json} == {"Fatal"}
    assert pagination(r)["total"] == 3 and pagination(r)["next_page"] == 2
    page2 = client.get("/dlq?reason=fatal&queue=mail&sort=id&order=asc&page_size=2&page=2", role="reader")
    assert [j["id"] for j in page2.json] == sorted(fatal)[2:]
    assert pagination(client.get("/dlq", role="reader"))["total"] == 6
    newest_first = client.get("/dlq?page_size=6", role="reader").json
    assert [j["failed_at"] for j in newest_first] == sorted(
        (j["failed_at"] for j in newest_first), reverse=True
    )


def test_list_rejects_unknown_reasons_sorts_orders_and_fields_naming_them(client):
    for query, field in (
        ("reason=Exploded", "reason"),
        ("sort=payload", "sort"),
        ("order=sideways", "order"),
        ("colour=red", "colour"),
        ("failed_from=2026-01-01T00:00:00", "failed_from"),  # no zone: refused, not guessed
        ("failed_to=soon", "failed_to"),
        ("failed_from=" + "9" * 40, "failed_from"),  # an age past year 1: refused, never a 500
        ("page_size=0", "page_size"),
        ("page=0", "page"),
    ):
        r = client.get(f"/dlq?{query}", role="reader")
        assert r.status_code == 422, query
        assert list(r.json["errors"]["query"]) == [field], (query, r.json)
        assert field in r.json["message"]


def test_list_filters_by_dates_search_tag_and_fingerprint(client, store):
    ids = to_dlq(store, 2, queue="q", tags="eu,vip", error="KeyError: 'sku-1234'")
    to_dlq(store, 1, queue="q2", error="TimeoutError: slow")
    job = store.get_job(ids[0])
    at = job["failed_at"].isoformat()
    assert len(client.get("/dlq", query_string={"failed_from": at, "queue": "q"}, role="reader").json) == 2
    assert client.get("/dlq?failed_to=2000-01-01T00:00:00Z", role="reader").json == []
    assert len(client.get("/dlq?search=sku-1234", role="reader").json) == 2
    assert len(client.get("/dlq?tag=vip", role="reader").json) == 2
    fp = client.get(f"/dlq/{ids[0]}", role="reader").json["fingerprint"]
    assert {j["id"] for j in client.get(f"/dlq?fingerprint={fp}", role="reader").json} == set(ids)
    plus_as_space = at.replace("+", " ")  # an unencoded + in a pasted URL
    assert len(client.get(f"/dlq?failed_from={plus_as_space}&queue=q", role="reader").json) == 2


def test_summary_counts_by_reason_queue_and_type_with_error_groups(client, store):
    to_dlq(store, 3, queue="mail", reason=FailureReason.Zombie, error="Zombie detected: heartbeat expired")
    to_dlq(store, 1, queue="sms", reason=FailureReason.Fatal, type="sms.send.v1")
    r = client.get("/dlq/summary", role="reader")
    assert r.status_code == 200
    s = r.json
    assert s["total"] == 4
    assert [(e["value"], e["count"]) for e in s["by_reason"]] == [("Zombie", 3), ("Fatal", 1)]
    assert {e["value"]: e["count"] for e in s["by_type"]} == {"email.send.v1": 3, "sms.send.v1": 1}
    assert s["top_errors"][0]["count"] == 3 and s["top_errors"][0]["failure_reason"] == "Zombie"
    assert client.get("/dlq/summary?queue=sms", role="reader").json["total"] == 1
    assert client.get("/dlq/summary?top=0", role="reader").status_code == 422


def test_dead_job_shows_error_details_and_heartbeat_evidence(client, store):
    job_id = to_dlq(store, 1, reason=FailureReason.Zombie, error="Zombie detected: heartbeat expired")[0]
    r = client.get(f"/dlq/{job_id}", role="reader")
    assert r.status_code == 200
    job = r.json
    assert job["failure_reason"] == "Zombie" and job["error_details"].startswith("Zombie detected")
    assert job["worker_id"] and job["heartbeat_at"] and job["started_at"] and job["failed_at"]
    assert job["runtime_seconds"] >= 0 and job["heartbeat_age_seconds"] >= 0
    hot = enqueue(store, 1)[0]
    elsewhere = client.get(f"/dlq/{hot}", role="reader")
    assert elsewhere.status_code == 404 and "hot" in elsewhere.json["message"]


def test_edit_dead_job_requires_valid_json_and_leaves_the_row_alone_otherwise(client, store):
    job_id = to_dlq(store, 1, payload=MISSING_COMMA)[0]
    r = client.patch(f"/dlq/{job_id}", role="operator", json={"payload": MISSING_COMMA})
    assert r.status_code == 422 and list(r.json["errors"]["json"]) == ["payload"]
    assert "not valid JSON" in r.json["message"]
    assert store.get_job(job_id)["payload"] == MISSING_COMMA
    fixed = {"to": "user@example.com", "subject": "Welcome!", "body": "Hello, World!"}
    r = client.patch(f"/dlq/{job_id}", role="operator", json={"payload": fixed, "tags": "fixed"})
    assert r.status_code == 200 and json.loads(r.json["payload"]) == fixed
    assert (r.json["location"], r.json["tags"], r.json["last_modified_by"]) == ("dlq", "fixed", "operator")
    edit = store.list_audit(job_id=job_id).items[0]
    assert edit["actor"] == "operator"
    assert json.loads(edit["details"])["before"]["payload"] == MISSING_COMMA


def test_resurrect_one_with_a_new_payload_and_priority(client, store):
    job_id = to_dlq(store, 1, payload=MISSING_COMMA)[0]
    before = store.stats()["failed_total"]
    r = client.post(
        f"/dlq/{job_id}/resurrect", role="operator", json={"payload": {"ok": True}, "priority": 30}
    )
    assert r.status_code == 200
    assert (r.json["location"], r.json["status"], r.json["attempt_count"], r.json["priority"]) == (
        "hot",
        "pending",
        0,
        30,
    )
    assert store.stats()["failed_total"] == before - 1
    again = client.post(f"/dlq/{job_id}/resurrect", role="operator")
    assert again.status_code == 409 and "hot" in again.json["message"]
    assert client.post("/dlq/missing/resurrect", role="operator").status_code == 404
    bad = client.post(f"/dlq/{job_id}/resurrect", role="operator", json={"priority": "high"})
    assert bad.status_code == 422 and "priority" in bad.json["errors"]["json"]


def test_preview_changes_nothing(client, store):
    ids = to_dlq(store, 3, queue="mail", reason=FailureReason.Zombie)
    to_dlq(store, 1, queue="sms")
    r = client.post("/dlq/preview", role="reader", json={"filter": {"reason": "Zombie"}, "sample": 2})
    assert r.status_code == 200
    assert r.json["matched"] == 3 and len(r.json["sample_ids"]) == 2
    assert r.json["by_reason"] == {"Zombie": 3} and r.json["by_queue"] == {"mail": 3}
    by_ids = client.post("/dlq/preview", role="reader", json={"ids": [ids[0], "ghost"]}).json
    assert by_ids["matched"] == 1 and by_ids["sample_ids"] == [ids[0]]
    assert store.count_dlq() == 4


def test_bulk_resurrect_by_ids_and_by_filter_audits_every_job(client, store):
    ids = to_dlq(store, 3, queue="mail", reason=FailureReason.Zombie)
    others = to_dlq(store, 2, queue="sms", reason=FailureReason.Fatal)
    r = client.post("/dlq/resurrect", role="operator", json={"ids": [ids[0]]})
    assert r.json == {"resurrected": 1, "batches": 1}
    r = client.post(
        "/dlq/resurrect",
        role="operator",
        json={"filter": {"reason": "Zombie"}, "max_jobs": 1},
    )
    assert r.json == {"resurrected": 1, "batches": 1}
    r = client.post("/dlq/resurrect", role="operator", json={"filter": {"queue": "mail"}})
    assert r.json == {"resurrected": 1, "batches": 1}
    assert {store.get_job(i)["location"] for i in ids} == {"hot"}
    assert {store.get_job(i)["location"] for i in others} == {"dlq"}
    rows = client.get("/audit?action=resurrect", role="reader").json
    assert sorted(a["job_id"] for a in rows) == sorted(ids) and {a["actor"] for a in rows} == {"operator"}
    assert {a["plan_id"] for a in rows} == {None}


def test_bulk_requests_must_name_a_selection(client, store):
    to_dlq(store, 1)
    cases = [
        ({}, "ids"),
        ({"ids": ["a"], "filter": {"queue": "x"}}, "ids"),
        ({"filter": {}}, "filter"),
        ({"filter": {"reason": "Sleepy"}}, "filter"),
        ({"filter": {"queue": "x", "owner": "me"}}, "filter"),
        ({"ids": [f"j{i}" for i in range(1001)]}, "ids"),
        ({"filter": {"queue": "x"}, "max_jobs": 0}, "max_jobs"),
        ({"ids": ["a"], "actor": "mallory"}, "actor"),
    ]
    for body, field in cases:
        for path in ("/dlq/resurrect", "/dlq/purge"):
            r = client.post(path, role="admin", json=body)
            assert r.status_code == 422, (path, body, r.json)
            assert field in r.json["errors"]["json"], (path, body, r.json)
    assert store.count_dlq() == 1


def test_purge_by_ids_and_filter_adjusts_the_counters(client, store):
    ids = to_dlq(store, 3, queue="mail")
    to_dlq(store, 2, queue="sms")
    assert client.post("/dlq/purge", role="admin", json={"ids": ids[:1]}).json == {"purged": 1, "batches": 1}
    r = client.post("/dlq/purge", role="admin", json={"filter": {"queue": "mail"}})
    assert r.json == {"purged": 2, "batches": 1}
    assert store.count_dlq() == 2 and store.stats()["failed_total"] == 2
    assert len(store.list_audit(action="purge_dlq").items) == 3
