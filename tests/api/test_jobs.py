"""Hot jobs through the Flask test client: enqueue, list, find anywhere, edit while pending, cancel."""

from __future__ import annotations

import json

from tests.api.conftest import WORKER, enqueue, pagination, to_archive, to_dlq


def test_enqueue_creates_a_job_owned_by_the_token_and_audits_it(client, store):
    r = client.post(
        "/jobs",
        role="operator",
        json={"type": "email.send.v1", "payload": {"to": "a@example.com"}, "queue": "mail", "priority": 30},
    )
    assert r.status_code == 201, r.json
    job = r.json
    assert job["location"] == "hot" and job["status"] == "pending"
    assert json.loads(job["payload"]) == {"to": "a@example.com"}
    assert (job["queue"], job["priority"], job["created_by"]) == ("mail", 30, "operator")
    assert job["created_at"].endswith("Z")
    audit = store.list_audit(job_id=job["id"]).items
    assert [(a["action"], a["actor"]) for a in audit] == [("enqueue", "operator")]


def test_enqueue_keeps_a_payload_string_verbatim_even_when_it_is_not_json(client):
    broken = '{"to": "user@example.com", "subject": "Welcome!" "body": "Hello"}'
    r = client.post("/jobs", role="operator", json={"type": "email.send.v1", "payload": broken})
    assert r.status_code == 201
    assert r.json["payload"] == broken


def test_active_idempotency_duplicate_answers_200_with_the_existing_job(client):
    body = {"type": "t", "idempotency_key": "order-42"}
    first = client.post("/jobs", role="operator", json=body)
    second = client.post("/jobs", role="operator", json=body | {"payload": {"x": 1}})
    assert (first.status_code, second.status_code) == (201, 200)
    assert second.json["id"] == first.json["id"] and second.json["payload"] == "{}"


def test_enqueue_with_a_used_id_answers_409_and_inserts_nothing(client, store):
    archived = to_archive(store, 1)[0]
    r = client.post("/jobs", role="operator", json={"type": "t", "id": archived})
    assert r.status_code == 409 and r.json["errors"] == {"json": {"id": [r.json["message"]]}}
    assert store.stats()["hot"] == 0


def test_enqueue_rejects_bad_input_naming_the_field(client, store):
    cases = {
        "type": {"payload": {}},
        "delay_seconds": {"type": "t", "delay_seconds": 5, "scheduled_at": "2030-01-01T00:00:00Z"},
        "priority": {"type": "t", "priority": -1},
        "created_by": {"type": "t", "created_by": "mallory"},
        "scheduled_at": {"type": "t", "scheduled_at": "tomorrow"},
    }
    for field, body in cases.items():
        r = client.post("/jobs", role="operator", json=body)
        assert r.status_code == 422, (field, r.json)
        assert field in r.json["errors"]["json"], (field, r.json)
        assert r.json["message"].startswith(f"invalid json.{field}"), r.json["message"]
    assert store.stats()["hot"] == 0


def test_list_hot_jobs_filters_sorts_and_pages(client, store):
    enqueue(store, 3, queue="a", tags="vip,eu")
    enqueue(store, 2, queue="b")
    store.fetch(WORKER, 1, queues=["b"])
    r = client.get("/jobs?queue=a&page_size=2&sort=id&order=asc", role="reader")
    assert r.status_code == 200
    assert [j["queue"] for j in r.json] == ["a", "a"]
    assert r.json[0]["id"] < r.json[1]["id"]
    assert pagination(r) == {
        "total": 3,
        "total_pages": 2,
        "first_page": 1,
        "last_page": 2,
        "page": 1,
        "next_page": 2,
    }
    assert len(client.get("/jobs?status=fetched", role="reader").json) == 1
    assert len(client.get("/jobs?tag=vip", role="reader").json) == 3
    assert client.get("/jobs?status=dead", role="reader").json["errors"]["query"].keys() == {"status"}
    assert client.get("/jobs?page_size=1001", role="reader").status_code == 422


def test_get_any_job_says_where_it_lives(client, store):
    hot = enqueue(store, 1)[0]
    dead = to_dlq(store, 1, queue="d")[0]
    done = to_archive(store, 1, queue="e")[0]
    for job_id, location, status in (
        (hot, "hot", "pending"),
        (dead, "dlq", "dead"),
        (done, "archive", "succeeded"),
    ):
        r = client.get(f"/jobs/{job_id}", role="reader")
        assert r.status_code == 200
        assert (r.json["location"], r.json["status"]) == (location, status)
    missing = client.get("/jobs/nope", role="reader")
    assert missing.status_code == 404
    assert set(missing.json) == {"code", "status", "message", "errors"} and "nope" in missing.json["message"]


def test_edit_pending_job_then_409_once_a_worker_holds_it(client, store):
    job_id = enqueue(store, 1)[0]
    r = client.patch(f"/jobs/{job_id}", role="operator", json={"payload": {"v": 2}, "priority": 50})
    assert r.status_code == 200
    assert (json.loads(r.json["payload"]), r.json["priority"]) == ({"v": 2}, 50)
    assert r.json["last_modified_by"] == "operator"
    store.fetch(WORKER, 1)
    r = client.patch(f"/jobs/{job_id}", role="operator", json={"priority": 1})
    assert r.status_code == 409 and "pending" in r.json["message"]
    assert store.get_job(job_id)["priority"] == 50


def test_edit_with_invalid_json_answers_422_and_changes_nothing(client, store):
    job_id = enqueue(store, 1)[0]
    r = client.patch(f"/jobs/{job_id}", role="operator", json={"payload": '{"a": 1'})
    assert r.status_code == 422 and "payload" in r.json["errors"]["json"]
    assert store.get_job(job_id)["payload"] == "{}"
    assert client.patch(f"/jobs/{job_id}", role="operator", json={}).status_code == 422
    assert client.patch("/jobs/missing", role="operator", json={"priority": 1}).status_code == 404


def test_cancel_moves_waiting_jobs_to_the_dlq_and_skips_running_ones(client, store):
    waiting = enqueue(store, 2, queue="c")
    running = enqueue(store, 1, queue="r")[0]
    store.fetch(WORKER, 1, queues=["r"])
    store.mark_processing(WORKER, [running])
    forged = client.post("/jobs/cancel", role="operator", json={"ids": waiting, "plan_id": "plan-7"})
    assert forged.status_code == 422 and "plan_id" in forged.json["errors"]["json"]
    r = client.post("/jobs/cancel", role="operator", json={"ids": [*waiting, running, "ghost"]})
    assert r.status_code == 200
    assert sorted(r.json["cancelled"]) == sorted(waiting)
    assert sorted(r.json["skipped"]) == sorted([running, "ghost"])
    assert {store.get_job(i)["failure_reason"] for i in waiting} == {"Cancelled"}
    audit = store.list_audit(action="cancel").items
    assert {(a["actor"], a["plan_id"]) for a in audit} == {("operator", None)}
    assert client.post("/jobs/cancel", role="operator", json={"ids": []}).status_code == 422
    too_many = client.post("/jobs/cancel", role="operator", json={"ids": [f"j{i}" for i in range(1001)]})
    assert too_many.status_code == 422 and "ids" in too_many.json["errors"]["json"]


def test_times_out_of_range_answer_422(client):
    r = client.post("/jobs", role="operator", json={"type": "t", "scheduled_at": "0999-01-01T00:00:00Z"})
    assert r.status_code == 422 and "scheduled_at" in r.json["errors"]["json"]
    assert client.get("/dlq?failed_from=0001-01-01", role="reader").status_code == 422
