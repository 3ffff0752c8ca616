"""`GET /api/v1`, the index a newcomer lands on, and `GET /api/v1/health`."""

from __future__ import annotations

from chokaq_api.resources.index.resources import RESOURCES


def test_the_base_url_answers_with_where_everything_is(client, tokens):
    r = client.raw.get("/api/v1")  # no token: the base URL printed by `chokaq serve` must answer
    assert r.status_code == 200
    index = r.json
    slash = client.raw.get("/api/v1/")  # as a base URL is often written
    assert slash.status_code == 200 and slash.json == index
    assert index["docs"]["openapi"] == {
        "href": "/api/v1/openapi.json",
        "description": "the OpenAPI 3 description of every route",
        "auth": "open",
    }
    assert {k: v["href"] for k, v in index["health"].items()} == {
        "summary": "/api/v1/health",
        "live": "/api/v1/health/live",
        "ready": "/api/v1/health/ready",
    }
    assert {"jobs", "dlq", "archive", "queues", "stats", "plans", "audit", "events"} <= set(
        index["resources"]
    )
    # Every advertised path answers, and says the role it needs truthfully.
    for link in [*index["docs"].values(), *index["health"].values(), *index["resources"].values()]:
        if link["href"].endswith("/rescue"):
            continue  # a POST that runs a sweep
        open_answer = client.raw.get(link["href"])
        if link["auth"] == "open":
            assert open_answer.status_code == 200, link
        else:
            assert open_answer.status_code == 401, link
            with_token = client.raw.get(
                link["href"], headers={"Authorization": f"Bearer {tokens[link['auth']]}"}
            )
            assert with_token.status_code == 200, link
    # No secret and no data: nothing of the tokens, the database URL or a job.
    text = r.get_data(as_text=True)
    assert all(token not in text for token in tokens.values())
    assert "sqlite" not in text and "postgresql" not in text


def test_the_index_lists_the_console_only_when_this_server_has_one(settings, store, bound_app):
    served = bound_app(settings, store=store).test_client().get("/api/v1").json["console"]
    assert served["href"] == "/deck/" and served["auth"] == "open"
    moved = settings.with_overrides({"deck.route_prefix": "/console"})
    assert bound_app(moved, store=store).test_client().get("/api/v1").json["console"]["href"] == "/console/"
    off = settings.with_overrides({"deck.enabled": False})
    assert bound_app(off, store=store).test_client().get("/api/v1").json["console"] is None


def test_the_index_lists_only_the_routes_this_server_has(client):
    resources = client.raw.get("/api/v1").json["resources"]
    rules = {rule.rule for rule in client.app.url_map.iter_rules()}
    assert resources and all(link["href"] in rules for link in resources.values())
    assert {name for name, path, _text in RESOURCES if "/api/v1" + path in rules} == set(resources)


def test_health_is_the_readiness_answer(client):
    summary = client.raw.get("/api/v1/health")
    ready = client.raw.get("/api/v1/health/ready")
    assert summary.status_code == ready.status_code == 200
    assert summary.json == ready.json == {"status": "ok"}  # without a token: the status only
    summary, ready = client.get("/health", role="reader"), client.get("/health/ready", role="reader")
    assert summary.json["status"] == ready.json["status"] == "ok"
    assert (
        set(summary.json["checks"])
        == set(ready.json["checks"])
        == {"storage", "schema", "worker", "queue_lag", "horizon"}
    )
