"""The audit log and the Server-Sent Events stream through the Flask test client."""

from __future__ import annotations

import json
import threading
import time

from tests.api.conftest import ApiClient, events_settled, pagination, to_dlq


def test_audit_filters_by_actor_action_job_plan_and_time(client, store):
    ids = to_dlq(store, 2)
    client.patch(f"/dlq/{ids[0]}", role="operator", json={"tags": "seen"})
    plan = client.post("/plans", role="admin", json={"action": "resurrect", "ids": ids}).json["id"]
    client.post(f"/plans/{plan}/execute", role="admin")
    r = client.get("/audit", role="reader")
    assert r.status_code == 200 and pagination(r)["total"] >= 3
    assert [a["id"] for a in r.json] == sorted((a["id"] for a in r.json), reverse=True)
    mine = client.get("/audit?actor=operator", role="reader").json
    assert [(a["action"], a["job_id"]) for a in mine] == [("edit_dlq", ids[0])]
    assert mine[0]["details"]["after"]["tags"] == "seen"
    planned = client.get(f"/audit?plan_id={plan}&action=resurrect", role="reader").json
    assert sorted(a["job_id"] for a in planned) == sorted(ids) and {a["actor"] for a in planned} == {"admin"}
    assert len(client.get(f"/audit?job_id={ids[0]}&action=resurrect", role="reader").json) == 1
    assert client.get("/audit?since=2999-01-01T00:00:00Z", role="reader").json == []
    assert client.get("/audit?page_size=1", role="reader").headers["X-Pagination"]
    assert client.get("/audit?who=me", role="reader").status_code == 422


def _events(body: bytes) -> list[dict]:
    out = []
    for block in body.decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
        if "data" in fields:
            out.append(
                {"id": int(fields["id"]), "event": fields["event"], "data": json.loads(fields["data"])}
            )
    return out


def test_events_replay_from_an_id_and_resume_from_last_event_id(client, store):
    to_dlq(store, 2, queue="mail")
    client.post("/dlq/purge", role="admin", json={"filter": {"queue": "mail"}})
    events_settled(store, 3)
    r = client.get("/events?after=0", role="reader", buffered=True)  # buffered: read, then closed
    assert r.status_code == 200 and r.mimetype == "text/event-stream"
    body = r.get_data()
    assert body.startswith(b"retry: ")
    events = _events(body)
    assert [e["event"] for e in events] == ["dlq", "dlq", "purge"]
    assert events[0]["data"]["data"]["reason"] == "Fatal" and events[0]["data"]["at"].endswith("Z")
    assert events[2]["data"]["data"]["actor"] == "admin"
    resumed = _events(
        client.get(
            "/events", role="reader", headers={"Last-Event-ID": str(events[0]["id"])}, buffered=True
        ).get_data()
    )
    assert [e["id"] for e in resumed] == [e["id"] for e in events[1:]]
    header_wins = client.get(
        "/events?after=0", role="reader", headers={"Last-Event-ID": str(events[1]["id"])}, buffered=True
    )
    assert [e["event"] for e in _events(header_wins.get_data())] == ["purge"]
    bad = client.get("/events", role="reader", headers={"Last-Event-ID": "abc"})
    assert bad.status_code == 422 and "Last-Event-ID" in bad.json["errors"]["headers"]


def test_a_new_stream_starts_at_now_sends_live_events_and_keep_alives(store, settings, tokens, bound_app):
    client = ApiClient(bound_app(settings.with_overrides({"api.sse_max_duration": 10}), store=store), tokens)
    to_dlq(store, 1, queue="old")
    events_settled(store, 1)
    r = client.get("/events", role="reader", buffered=False)
    chunks = iter(r.response)
    assert next(chunks).startswith(b"retry:")
    first = next(chunks)
    assert first == b": keep-alive\n\n"  # nothing new yet: the old DLQ arrival is not replayed
    threading.Timer(
        0.1, lambda: store.add_event("rescue", "ZombieRescue: recovered 0 abandoned, archived 1 zombies")
    ).start()
    started = time.monotonic()
    for chunk in chunks:
        if b"event: rescue" in chunk:
            break
    else:
        raise AssertionError("the rescue event never arrived")
    # Within a poll interval; on PostgreSQL up to 5 s while another writing transaction runs on the server.
    assert time.monotonic() - started < 7.0
    r.close()


def test_open_streams_are_capped_and_released(store, settings, tokens, bound_app):
    app = bound_app(settings.with_overrides({"api.sse_max_streams": 1}), store=store)
    client = ApiClient(app, tokens)
    first = client.get("/events", role="reader", buffered=False)
    assert first.status_code == 200
    busy = client.get("/events", role="reader", buffered=False)
    assert busy.status_code == 503 and busy.headers["Retry-After"] == "5"
    assert "SseMaxStreams" in busy.json["message"]
    first.close()
    again = client.get("/events", role="reader", buffered=False)
    assert again.status_code == 200
    again.close()
