"""Security: a table-driven check over the whole route map, tokens, injection, limits, actor spoofing."""

from __future__ import annotations

import re

from chokaq_api import routes as route_table
from chokaq_ops.models import Actor
from tests.api.conftest import PREFIX, enqueue, to_archive, to_dlq

INJECTIONS = [
    "' OR '1'='1",
    "x'); DELETE FROM jobs_dlq; --",
    "%' OR 1=1 --",
    '" OR ""="',
    "1; DROP TABLE jobs_dlq",
    "\\' UNION SELECT * FROM api_tokens --",
]


def routes(app):
    """Every (method, rule) the app answers, except HEAD and OPTIONS which Flask derives."""
    for rule in app.url_map.iter_rules():
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            yield method, rule.rule


def concrete(rule: str) -> str:
    return re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", "some-id", rule)[len(PREFIX) :]


def test_every_route_has_an_access_rule_and_every_rule_a_route(app):
    served = set(routes(app))
    missing = sorted(r for r in served if route_table.rule_for(*r) is None)
    assert not missing, f"routes without an access rule in chokaq_api.routes.ROUTES: {missing}"
    stale = sorted(k for k in route_table.ROUTES if (k[0], PREFIX + k[1]) not in served)
    assert not stale, f"access rules for routes that do not exist: {stale}"


def test_every_guarded_route_answers_401_without_or_with_a_bad_token(client, app):
    for method, rule in routes(app):
        if route_table.rule_for(method, rule).role is None:
            continue
        path = concrete(rule)
        for token in (None, "chq_not-a-real-token", ""):
            r = client.request(method, path, role=None, token=token, json={})
            assert r.status_code == 401, (method, rule, token, r.status_code)
            assert set(r.json) == {"code", "status", "message", "errors"}
            assert r.headers["WWW-Authenticate"].startswith("Bearer")
        r = client.request(
            method, path, role=None, headers={"Authorization": f"Basic {client.tokens['admin']}"}
        )
        assert r.status_code == 401, (method, rule)


def test_every_mutating_route_answers_403_to_a_weaker_role(client, app):
    checked = 0
    for method, rule in routes(app):
        if method == "GET":
            continue
        needed = route_table.rule_for(method, rule)
        if needed.role is None:
            continue
        weaker = route_table.ROLES[: route_table.ROLES.index(needed.role)]
        path = concrete(rule)
        for role in weaker:
            r = client.request(method, path, role=role, json={"ids": ["x"]})
            assert r.status_code == 403, (method, rule, role, r.status_code, r.json)
            assert needed.role in r.json["message"]
            checked += 1
        for field in needed.admin_fields:  # fields that raise the requirement to admin
            r = client.request(method, path, role="operator", json={field: None})
            assert r.status_code == 403, (method, rule, field)
            checked += 1
    assert checked >= 10


def test_readers_can_read_everything(client, app):
    for method, rule in routes(app):
        needs_role = route_table.rule_for(method, rule).role is not None
        if method == "GET" and needs_role and rule != PREFIX + "/events":
            r = client.request(method, concrete(rule), role="reader")
            assert r.status_code not in (401, 403), (rule, r.status_code)


def test_revoked_tokens_stop_working_at_once(client, store):
    token = store.create_token("temp", "admin", actor=Actor("test"))
    assert client.get("/stats", token=token).status_code == 200
    assert store.revoke_token("temp", actor=Actor("test"))
    r = client.get("/stats", token=token)
    assert r.status_code == 401 and "revoked" in r.json["message"]


def test_the_actor_is_the_token_name_never_a_request_field(client, store):
    job_id = to_dlq(store, 1)[0]
    for body in ({"tags": "x", "actor": "mallory"}, {"tags": "x", "last_modified_by": "mallory"}):
        r = client.patch(f"/dlq/{job_id}", role="operator", json=body)
        assert r.status_code == 422
    client.patch(f"/dlq/{job_id}", role="operator", json={"tags": "x"}, headers={"X-Actor": "mallory"})
    assert {a["actor"] for a in store.list_audit(job_id=job_id).items} == {"operator"}


def test_injection_looking_filters_match_nothing_and_change_nothing(client, store):
    dead = to_dlq(store, 2, queue="mail")
    enqueue(store, 1, queue="mail")
    to_archive(store, 1, queue="done")
    before = store.stats()
    for value in INJECTIONS:
        for path, param in (
            ("/dlq", "queue"),
            ("/dlq", "type"),
            ("/dlq", "search"),
            ("/dlq", "tag"),
            ("/dlq", "fingerprint"),
            ("/jobs", "queue"),
            ("/jobs", "search"),
            ("/archive", "type"),
            ("/archive", "search"),
            ("/audit", "actor"),
            ("/dlq/summary", "queue"),
        ):
            r = client.get(path, role="reader", query_string={param: value})
            assert r.status_code == 200, (path, param, value, r.json)
            rows = r.json if isinstance(r.json, list) else [] if r.json.get("total") == 0 else [r.json]
            assert rows == [], (path, param, value)
        for path in ("/dlq/resurrect", "/dlq/purge"):
            r = client.post(path, role="admin", json={"filter": {"queue": value}})
            assert r.status_code == 200 and r.json[next(iter(r.json))] == 0
        r = client.post("/dlq/purge", role="admin", json={"ids": [value]})
        assert r.json["purged"] == 0
        assert client.get(f"/jobs/{value}", role="reader").status_code in (404, 422)
    after = store.stats()
    assert {k: after[k] for k in ("hot", "archive", "dlq")} == {
        k: before[k] for k in ("hot", "archive", "dlq")
    }
    assert {store.get_job(i)["location"] for i in dead} == {"dlq"}


def test_a_body_over_the_limit_answers_413_in_the_error_shape(client, settings, store):
    limit = settings.api.max_body_bytes
    big = {"type": "t", "payload": "x" * (limit + 10)}
    r = client.post("/jobs", role="operator", json=big)
    assert r.status_code == 413
    assert set(r.json) == {"code", "status", "message", "errors"} and r.json["code"] == 413
    assert store.stats()["hot"] == 0
    assert client.post("/jobs", role=None, json=big).status_code == 401  # no body is read before auth


def test_unknown_routes_and_methods_answer_in_the_error_shape(client):
    r = client.get("/nowhere", role="reader")
    assert r.status_code == 404 and set(r.json) == {"code", "status", "message", "errors"}
    r = client.request("DELETE", "/dlq", role="admin")
    assert r.status_code == 405 and r.json["code"] == 405 and "GET" in r.headers["Allow"]
    r = client.post("/jobs", role="operator", data="{not json", content_type="application/json")
    assert r.status_code == 400 and r.json["code"] == 400
