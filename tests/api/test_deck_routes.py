"""The Deck's server side: where it is served, its security headers, its settings, and the two API routes
it needs (GET /whoami, GET /workers). The browser behaviour is tested in tests/deck."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chokaq_api import deck
from chokaq_ops import errors
from chokaq_ops.settings import Settings
from tests.api.conftest import WORKER, enqueue

STATIC = Path(deck.__file__).parent / "static"


def test_root_redirects_to_the_console_and_the_page_has_a_strict_policy(client):
    raw = client.raw
    assert raw.get("/").status_code == 302 and raw.get("/").headers["Location"] == "/deck/"
    assert raw.get("/deck").headers["Location"] == "/deck/"
    page = raw.get("/deck/")
    assert page.status_code == 200 and page.mimetype == "text/html"
    csp = page.headers["Content-Security-Policy"]
    directives = dict(d.split(" ", 1) for d in csp.split("; "))
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'" and directives["object-src"] == "'none'"
    assert "unsafe" not in csp and "*" not in csp and "http" not in csp
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    assert page.headers["X-Frame-Options"] == "DENY"
    assert 'data-api="/api/v1"' in page.text and 'data-lag-warning="5"' in page.text
    js = raw.get("/deck/app.js")
    assert js.status_code == 200 and js.mimetype == "text/javascript"
    assert js.headers["Content-Security-Policy"] == csp
    assert raw.get("/deck/panels/dlq.js").status_code == 200
    assert raw.get("/deck/deck.css").mimetype == "text/css"
    # Only the packaged assets exist under the prefix: no directory walk, no other file types.
    for path in ("/deck/../auth.py", "/deck/__init__.py", "/deck/missing.js", "/deck/index.html/x"):
        assert raw.get(path).status_code == 404, path


def test_the_console_needs_no_token_but_the_api_still_does(client):
    assert client.raw.get("/deck/").status_code == 200
    assert client.get("/dlq", role=None).status_code == 401


def test_prefix_and_switch_come_from_the_settings(store, settings, bound_app):
    moved = bound_app(settings.with_overrides({"deck.route_prefix": "/ops/console"}), store=store)
    raw = moved.test_client()
    assert raw.get("/").headers["Location"] == "/ops/console/"
    assert raw.get("/ops/console/").status_code == 200
    assert raw.get("/deck/").status_code == 404
    off = bound_app(settings.with_overrides({"deck.enabled": False}), store=store).test_client()
    assert off.get("/").status_code == 404 and off.get("/deck/").status_code == 404


@pytest.mark.parametrize("prefix", ["deck", "/", "/api", "/api/v1/deck", "/de ck", "/deck/", "/<x>"])
def test_bad_route_prefix_is_refused_at_start(prefix):
    with pytest.raises(errors.ConfigError) as caught:
        Settings().with_overrides({"deck.route_prefix": prefix})
    assert caught.value.field == "Deck.RoutePrefix"


def test_lag_thresholds_are_ordered():
    with pytest.raises(errors.ConfigError, match=r"Deck\.QueueLagCriticalThreshold"):
        Settings().with_overrides({"deck.queue_lag_warning_threshold": "20s"})
    ok = Settings().with_overrides(
        {"Deck.QueueLagWarningThreshold": "2s", "Deck.QueueLagCriticalThreshold": "4s"}
    )
    assert (ok.deck.queue_lag_warning_threshold, ok.deck.queue_lag_critical_threshold) == (2.0, 4.0)


def test_whoami_names_the_token_and_what_its_role_may_do(client):
    for role in ("reader", "operator", "admin"):
        me = client.get("/whoami", role=role)
        assert me.status_code == 200
        assert (me.json["name"], me.json["role"]) == (role, role)
    assert client.get("/whoami", role="reader").json["can"] == ["read"]
    operator = set(client.get("/whoami", role="operator").json["can"])
    assert {"edit", "resurrect", "cancel", "pause", "plan"} <= operator and "purge" not in operator
    assert {"purge", "queue_limits"} <= set(client.get("/whoami", role="admin").json["can"])
    assert client.get("/whoami", role=None).status_code == 401
    assert client.get("/whoami", token="nope").status_code == 401


def test_workers_are_the_ids_holding_claimed_jobs(client, store):
    assert client.get("/workers", role="reader").json == []
    ids = enqueue(store, 3, queue="mail")
    enqueue(store, 1, queue="sms")
    store.fetch(WORKER, 2, queues=["mail"])
    store.mark_processing(WORKER, ids[:1])
    store.fetch("other-worker", 1, queues=["sms"])
    workers = {w["worker_id"]: w for w in client.get("/workers", role="reader").json}
    assert set(workers) == {WORKER, "other-worker"}
    mine = workers[WORKER]
    assert (mine["processing"], mine["fetched"], mine["queues"]) == (1, 1, ["mail"])
    assert mine["last_heartbeat_at"] is not None and mine["silent_seconds"] >= 0
    assert (mine["hosted"], mine["concurrency"]) == (False, None)
    assert workers["other-worker"]["queues"] == ["sms"] and workers["other-worker"]["processing"] == 0
    assert client.get("/workers", role=None).status_code == 401


def test_console_assets_never_build_html_from_strings():
    """Data reaches the page only as text: no innerHTML & co., no eval, no inline script or style."""
    forbidden = re.compile(
        r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\(\"style"
    )
    scripts = sorted(STATIC.rglob("*.js"))
    assert len(scripts) >= 10
    for path in scripts:
        text = path.read_text()
        assert not forbidden.search(text), f"{path.name}: {forbidden.search(text).group(0)}"
    page = (STATIC / "index.html").read_text()
    assert re.findall(r"<script[^>]*>", page) == ['<script type="module" src="app.js">']
    assert (
        "style=" not in page
        and "<style" not in page
        and " on" not in re.sub(r"\s+", " ", page).replace(" only", "")
    )
