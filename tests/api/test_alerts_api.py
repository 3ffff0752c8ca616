"""/api/v1/alerts (docs/alerts.md): admins alone configure receivers and rules, every change is audited,
and a receiver's secret and URL path appear in no response, audit row or log line."""

from __future__ import annotations

import logging

from tests.api.conftest import ApiClient
from tests.support.dbprobe import scalar

SECRET = "whsec-api-7c1d9e3a5b0f2468"
ROTATED = "whsec-rotated-0a1b2c3d4e5f"
URL = "https://hooks.example.com/services/T000/B000/XXXXsecretXXXX"
PATH_TOKEN = "XXXXsecretXXXX"


def receiver_body(**kw):
    return {"name": "ops", "url": URL, "secret": SECRET, **kw}


def assert_clean(*texts):
    for text in texts:
        for secret in (SECRET, ROTATED, PATH_TOKEN):
            assert secret not in text, secret


def test_admin_configures_receivers_and_rules_and_no_secret_is_echoed(client, store, caplog):
    caplog.set_level(logging.DEBUG)
    bodies = []
    r = client.post("/alerts/receivers", json=receiver_body())
    bodies.append(r.get_data(as_text=True))
    assert r.status_code == 201, r.json
    assert r.json["url"] == "https://hooks.example.com/…" and r.json["secret_set"] is True
    assert "secret" not in r.json and r.json["source"] == "api" and r.json["created_by"] == "admin"
    for path in ("/alerts/receivers", "/alerts/receivers/ops"):
        r = client.get(path, role="reader")
        assert r.status_code == 200
        bodies.append(r.get_data(as_text=True))
    r = client.patch("/alerts/receivers/ops", json={"secret": ROTATED, "send_resolved": False})
    assert r.status_code == 200 and r.json["send_resolved"] is False
    bodies.append(r.get_data(as_text=True))
    bad = client.post("/alerts/receivers", json=receiver_body(name="bad", url="ftp://x/" + PATH_TOKEN))
    assert bad.status_code == 422 and "url" in bad.json["errors"]["json"]
    bodies.append(bad.get_data(as_text=True))
    weak = client.post("/alerts/receivers", json=receiver_body(name="weak", secret="short"))
    assert weak.status_code == 422 and "secret" in weak.json["errors"]["json"]
    dup = client.post("/alerts/receivers", json=receiver_body())
    assert dup.status_code == 409
    bodies.append(dup.get_data(as_text=True))

    r = client.post("/alerts/rules", json={"name": "z", "kind": "zombies", "receivers": ["nobody"]})
    assert r.status_code == 422 and "receivers" in r.json["errors"]["json"]
    r = client.post(
        "/alerts/rules", json={"name": "z", "kind": "zombies", "receivers": ["ops"], "window_s": 300}
    )
    assert r.status_code == 201 and r.json["window_s"] == 300 and r.json["group_by"] == ["alertname"]
    r = client.patch("/alerts/rules/z", json={"enabled": False, "for_s": 60})
    assert r.status_code == 200 and (r.json["enabled"], r.json["for_s"]) == (False, 60)
    assert client.delete("/alerts/receivers/ops").status_code == 409, "a rule sends to it"
    test = client.post("/alerts/receivers/ops/test")
    assert test.status_code == 202 and store.get_job(test.json["job_id"]).type == "chokaq.alert.deliver.v1"
    assert SECRET not in (store.get_job(test.json["job_id"]).payload or "")
    assert client.delete("/alerts/rules/z").status_code == 204
    assert client.delete("/alerts/receivers/ops").status_code == 204
    assert client.get("/alerts/receivers/ops").status_code == 404

    audit = client.get("/audit", role="reader", query_string={"page_size": 100})
    actions = [a["action"] for a in audit.json]
    for action in ("alert_receiver_create", "alert_receiver_update", "alert_rule_create", "alert_rule_update",
                   "alert_test", "alert_rule_delete", "alert_receiver_delete"):  # fmt: skip
        assert action in actions
    [update] = [a for a in audit.json if a["action"] == "alert_receiver_update"]
    assert update["details"]["secret_changed"] is True and update["details"]["url_changed"] is False
    bodies.append(audit.get_data(as_text=True))
    assert_clean(*bodies, caplog.text, "".join(r.getMessage() for r in caplog.records))
    rows = scalar(store, "SELECT count(*) FROM audit_log WHERE details LIKE ?", f"%{PATH_TOKEN}%")
    assert rows == 0


def test_only_admins_change_alerts(client, store):
    store.create_alert_receiver(receiver_body(), actor=_actor())
    store.create_alert_rule({"name": "z", "kind": "zombies", "receivers": ["ops"]}, actor=_actor())
    before = scalar(store, "SELECT count(*) FROM audit_log")
    calls = [
        ("POST", "/alerts/receivers", receiver_body(name="other")),
        ("PATCH", "/alerts/receivers/ops", {"send_resolved": False}),
        ("DELETE", "/alerts/receivers/ops", None),
        ("POST", "/alerts/receivers/ops/test", None),
        ("POST", "/alerts/rules", {"name": "y", "kind": "zombies", "receivers": ["ops"]}),
        ("PATCH", "/alerts/rules/z", {"enabled": False}),
        ("DELETE", "/alerts/rules/z", None),
    ]
    for role in ("reader", "operator"):
        for method, path, body in calls:
            r = client.request(method, path, role=role, **({"json": body} if body else {}))
            assert r.status_code == 403, (role, method, path)
            assert_clean(r.get_data(as_text=True))
    assert scalar(store, "SELECT count(*) FROM audit_log") == before
    assert [r.name for r in store.alert_receivers()] == ["ops"] and store.alert_receivers()[0].send_resolved
    assert store.alert_rules()[0].enabled and scalar(store, "SELECT count(*) FROM jobs_hot") == 0
    assert client.get("/alerts/rules", role="reader").status_code == 200
    assert client.get("/alerts", role="reader").json == []


def test_configured_receivers_and_rules_are_read_only(store, settings, bound_app, tokens):
    configured = settings.with_overrides(
        {
            "alert_receivers.filed.url": URL,
            "alert_receivers.filed.secret": SECRET,
            "alert_rules.filed-rule.kind": "queue_lag",
            "alert_rules.filed-rule.receivers": "filed",
            "alert_rules.filed-rule.threshold": 30,
        }
    )
    client = ApiClient(bound_app(configured, store=store), tokens)
    [r] = client.get("/alerts/receivers", role="reader").json
    assert (r["name"], r["source"], r["secret_set"]) == ("filed", "config", True)
    assert_clean(client.get("/alerts/receivers", role="reader").get_data(as_text=True))
    [rule] = client.get("/alerts/rules", role="reader").json
    assert (rule["name"], rule["source"], rule["threshold"]) == ("filed-rule", "config", 30)
    assert client.patch("/alerts/receivers/filed", json={"send_resolved": False}).status_code == 409
    assert client.delete("/alerts/rules/filed-rule").status_code == 409
    assert client.post("/alerts/receivers", json=receiver_body(name="filed")).status_code == 409
    assert client.post("/alerts/receivers/filed/test").status_code == 202


def _actor():
    from chokaq_ops.models import Actor

    return Actor("setup")
