"""A real `chokaq serve` evaluates its configuration file's alert rules and delivers through its own worker:
a circuit forced open reaches the test's webhook receiver as a signed firing message, and its close as a
resolved one (docs/alerts.md)."""

from __future__ import annotations

import pytest

from tests.support.served import FAST_TOML
from tests.support.webhook import signature_ok, webhook

pytestmark = pytest.mark.slow

SECRET = "whsec-served-5a6b7c8d9e0f"


def test_serve_notifies_a_circuit_opening_and_its_resolve(e2e):
    _, tokens, serve, workdir = e2e
    with webhook() as hook:
        (workdir / "chokaq.toml").write_text(
            FAST_TOML
            + f"""
[Alerts]
EvaluationInterval = "300ms"
GroupWait = 0
GroupInterval = "300ms"
[AlertReceivers.ops]
Url = "{hook.url}"
Secret = "{SECRET}"
[AlertRules.circuits]
Kind = "circuit_open"
Receivers = ["ops"]
Severity = "critical"
"""
        )
        served = serve("alerts")
        admin = tokens["admin"]
        assert (
            served.call("PATCH", "/api/v1/circuits/pay.v1", admin, json={"state": "open"}).status_code == 200
        )
        from tests.support.polling import wait_for

        wait_for(lambda: len(hook.requests) >= 1, 20, "the firing notification")
        assert (
            served.call("PATCH", "/api/v1/circuits/pay.v1", admin, json={"state": "closed"}).status_code
            == 200
        )
        wait_for(lambda: any(r.json["status"] == "resolved" for r in hook.requests), 20, "the resolve")
        firing, resolved = hook.requests[0].json, hook.requests[-1].json
        assert firing["status"] == "firing" and firing["alerts"][0]["labels"] == {
            "alertname": "circuits",
            "severity": "critical",
            "type": "pay.v1",
        }
        assert resolved["alerts"][0]["status"] == "resolved"
        assert all(signature_ok(SECRET, r) for r in hook.requests)
        listed = served.call("GET", "/api/v1/alerts/receivers", admin).json()
        assert listed[0]["source"] == "config" and SECRET not in str(listed)
        log = served.log()
        assert SECRET not in log and hook.url not in log
