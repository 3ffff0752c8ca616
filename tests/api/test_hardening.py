"""Hardening of the API: forged plan ids, empty filters, the approval threshold on bulk calls, strict
headers, dates and nesting, generic conflicts, the queue cap and PATCH of unknown queues."""

from __future__ import annotations

import json

import pytest

from chokaq_ops import errors
from chokaq_ops.models import Actor
from tests.api.conftest import ApiClient, enqueue, to_dlq
from tests.support.dbprobe import scalar


def changes_audited(store) -> list[str]:
    """Audit actions apart from the fixture's token creation."""
    return [r["action"] for r in store.list_audit().items if r["action"] != "token_create"]


@pytest.mark.parametrize("path", ["/dlq/resurrect", "/dlq/purge", "/jobs/cancel"])
def test_a_client_plan_id_is_refused_and_changes_nothing(client, store, path):
    ids = enqueue(store) if path == "/jobs/cancel" else to_dlq(store)
    r = client.post(path, role="admin", json={"ids": ids, "plan_id": "plan-20990101-000000-deadbeef"})
    assert r.status_code == 422 and r.json["errors"] == {"json": {"plan_id": ["Unknown field."]}}
    assert store.get_job(ids[0])["location"] == ("hot" if path == "/jobs/cancel" else "dlq")
    assert not changes_audited(store)


def test_plan_ids_on_audit_rows_name_real_plans_only(client, store):
    ids = to_dlq(store, 2)
    store.resurrect_many(actor=Actor("lib", plan_id="forged-plan"), ids=ids[:1])  # a library caller
    plan = client.post("/plans", role="operator", json={"action": "resurrect", "ids": ids[1:]}).json
    client.post(f"/plans/{plan['id']}/execute", role="operator")
    plans = {r["plan_id"] for r in store.list_audit().items}
    assert plans == {None, plan["id"]}


@pytest.mark.parametrize("path", ["/dlq/resurrect", "/dlq/purge"])
def test_an_empty_bulk_filter_needs_all_true(client, store, path):
    to_dlq(store, 2)
    for body in ({"filter": {}}, {"filter": {}, "all": False}):
        r = client.post(path, role="admin", json=body)
        assert r.status_code == 422 and "all: true" in r.json["errors"]["json"]["filter"][0]
    assert store.count_dlq() == 2
    bad = client.post(path, role="admin", json={"ids": ["a"], "all": True})
    assert bad.status_code == 422 and "all" in bad.json["errors"]["json"]
    r = client.post(path, role="admin", json={"filter": {}, "all": True})
    assert r.status_code == 200 and store.count_dlq() == 0


@pytest.mark.parametrize("action", ["resurrect", "purge", "cancel"])
def test_an_empty_plan_filter_needs_all_true(client, store, action):
    enqueue(store, 2) if action == "cancel" else to_dlq(store, 2)
    r = client.post("/plans", role="admin", json={"action": action, "filter": {}})
    assert r.status_code == 422 and "filter" in r.json["errors"]["json"]
    assert store.list_plans()[1] == 0 and not changes_audited(store)
    r = client.post("/plans", role="admin", json={"action": action, "filter": {}, "all": True})
    assert r.status_code == 201 and r.json["total"] == 2


def test_bulk_calls_honour_the_plan_approval_threshold(store, settings, tokens, bound_app):
    client = ApiClient(
        bound_app(settings.with_overrides({"api.plan_approval_min_jobs": 3}), store=store), tokens
    )
    dead = to_dlq(store, 3, queue="big")
    waiting = enqueue(store, 3, queue="w")
    calls = [
        ("/dlq/resurrect", {"ids": dead}),
        ("/dlq/resurrect", {"filter": {"queue": "big"}}),
        ("/dlq/purge", {"filter": {"queue": "big"}}),
        ("/dlq/purge", {"ids": dead}),
        ("/jobs/cancel", {"ids": waiting}),
    ]
    for path, body in calls:
        r = client.post(path, role="admin", json=body)
        assert r.status_code == 409 and "PlanApprovalMinJobs" in r.json["message"], (path, r.json)
    assert store.count_dlq() == 3 and not changes_audited(store)
    # Below the threshold (max_jobs caps the count) a bulk call runs as before.
    r = client.post("/dlq/resurrect", role="admin", json={"filter": {"queue": "big"}, "max_jobs": 2})
    assert r.status_code == 200 and r.json["resurrected"] == 2


@pytest.mark.parametrize("value", ["²", "٣", "1" * 5000, str(2**63), "-1", "1.5", " 12 3"])
def test_a_bad_last_event_id_is_a_422(client, value):
    r = client.get("/events", role="reader", headers={"Last-Event-ID": value}, buffered=True)
    assert r.status_code == 422 and "Last-Event-ID" in r.json["errors"]["headers"]


def test_the_largest_last_event_id_is_accepted(client):
    r = client.get("/events", role="reader", headers={"Last-Event-ID": str(2**63 - 1)}, buffered=True)
    assert r.status_code == 200


@pytest.mark.parametrize("field", ["failed_from", "failed_to", "created_from", "created_to"])
@pytest.mark.parametrize("value", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "0001-01-01"])
def test_dates_out_of_range_are_a_422_naming_the_field(client, field, value):
    r = client.get(f"/dlq?{field}={value.replace('+', '%2B')}", role="reader")
    assert r.status_code == 422 and list(r.json["errors"]["query"]) == [field]
    r = client.post("/dlq/preview", role="reader", json={"filter": {field: value}})
    assert r.status_code == 422 and field in r.json["errors"]["json"]["filter"]


@pytest.mark.parametrize("body", [b"[" * 100_000, b'{"ids": ' + b"[" * 70 + b"]" * 70 + b"}"])
def test_deeply_nested_json_is_a_400_in_the_error_shape(client, store, body):
    for path, role in (("/jobs", "operator"), ("/queues/default", "admin"), ("/dlq/preview", "reader")):
        method = "PATCH" if path.startswith("/queues") else "POST"
        r = client.request(method, path, role=role, data=body, content_type="application/json")
        assert r.status_code == 400 and set(r.json) == {"code", "status", "message", "errors"}
        assert "nested deeper" in r.json["message"]
    shallow = json.dumps({"type": "t", "payload": {"a": [[[[1]]]]}})
    assert (
        client.post("/jobs", role="operator", data=shallow, content_type="application/json").status_code
        == 201
    )


def test_a_database_conflict_is_reported_without_the_databases_text(store):
    store.create_token("dup", "reader", actor=Actor("t"))
    with pytest.raises(errors.Conflict) as caught:
        store.run("create_token", name="dup", role="reader", token_hash="x", actor="t")
    text = str(caught.value).lower()
    assert "duplicate" in text and "api_tokens" not in text and "unique" not in text and "pk_" not in text


def test_queues_are_capped_for_new_names_and_existing_ones_keep_working(store, settings, tokens, bound_app):
    client = ApiClient(bound_app(settings.with_overrides({"api.max_queues": 3}), store=store), tokens)
    for q in ("a", "b"):  # with "default": three queues
        assert client.post("/jobs", role="operator", json={"type": "t", "queue": q}).status_code == 201
    r = client.post("/jobs", role="operator", json={"type": "t", "queue": "c"})
    assert r.status_code == 422 and r.json["errors"] == {"json": {"queue": [r.json["message"]]}}
    assert "Api.MaxQueues" in r.json["message"]
    assert scalar(store, "SELECT count(*) FROM queues") == 3 and store.stats()["hot"] == 2
    assert client.post("/jobs", role="operator", json={"type": "t", "queue": "a"}).status_code == 201


def test_patch_of_an_unknown_queue_is_a_404_and_creates_nothing(client, store):
    r = client.patch("/queues/typo-queue", role="operator", json={"paused": True})
    assert r.status_code == 404 and set(r.json) == {"code", "status", "message", "errors"}
    assert scalar(store, "SELECT count(*) FROM queues WHERE name = 'typo-queue'") == 0
    assert not changes_audited(store)
    assert client.patch("/queues/default", role="operator", json={"paused": True}).status_code == 200
