"""Alerts that reach a person (docs/alerts.md), on both databases, with a real HTTP receiver: one alert for
10,000 zombies, signed requests, repeats and resolves, retries then the DLQ of a failing receiver while the
rule loop goes on, inhibition and grouping, and no secret in any log line."""

from __future__ import annotations

import json
import logging

import pytest
from worker_support import fast_settings, hosted, settled, wait_for

from chokaq_ops.alert_jobs import TYPE
from chokaq_ops.alert_payloads import verify
from chokaq_ops.engine.alerting import Alerter
from chokaq_ops.engine.handlers import Registry
from chokaq_ops.engine.rescue import Rescuer
from chokaq_ops.fingerprint import fingerprint_text
from chokaq_ops.models import Actor, FailureReason, HotFilter, NewJob
from chokaq_ops.storage import Dead
from tests.support.dbprobe import age, sql
from tests.support.webhook import SECRET_PATH, signature_ok, webhook

SECRET = "whsec-test-3f9c2a7b1e5d8f06"
ADMIN = Actor("admin")


@pytest.fixture
def hook():
    with webhook() as h:
        yield h


def alert_settings(store, **over):
    values = {
        "alerts__group_wait": 0,
        "alerts__group_interval": 60,
        "alerts__repeat_interval": 3600,
        "alerts__delivery_max_attempts": 3,
        "retry__base_delay": 0.05,
        "retry__jitter_max_delay": 0,
    }
    return fast_settings(store, **{**values, **over})


def receiver(store, hook, name="ops", **kw):
    return store.create_alert_receiver({"name": name, "url": hook.url, "secret": SECRET, **kw}, actor=ADMIN)


def rule(store, name, kind, **kw):
    return store.create_alert_rule({"name": name, "kind": kind, "receivers": ["ops"], **kw}, actor=ADMIN)


def deliveries(store):
    return list(store.list_hot(HotFilter(type=TYPE), page_size=1000).items)


def deliver_all(store, settings, hook, n, where="archive"):
    """Run a real worker (its Host registers the delivery handler) until `n` deliveries were made."""
    ids = [j.id for j in deliveries(store)]
    with hosted(store, settings, Registry()):
        for i in ids:
            settled(store, i, where, timeout=20)
    assert len(hook.requests) >= n
    return ids


def dead_jobs(store, n, error="ValueError: card declined", queue="pay"):
    ids = [r.id for r in store.enqueue([NewJob(type="pay.v1", queue=queue) for _ in range(n)])]
    store.fetch("w1", n, queues=[queue])
    store.mark_processing("w1", ids)
    store.move_to_dlq(
        "w1", [Dead(i, FailureReason.MaxRetriesExceeded, error, fingerprint_text(error).id) for i in ids]
    )
    return ids


def test_ten_thousand_zombies_in_one_sweep_send_exactly_one_signed_alert(store, hook):
    settings = alert_settings(store)
    receiver(store, hook)
    rule(store, "zombies", "zombies")
    n = 10_000
    ids = [r.id for r in store.enqueue([NewJob(type="long.v1", queue="reports") for _ in range(n)])]
    claimed = 0
    while claimed < n:
        batch = store.fetch("dead-worker", 1000, queues=["reports"])
        store.mark_processing("dead-worker", [c.id for c in batch])
        claimed += len(batch)
    age(store, "jobs_hot", None, 3600, "heartbeat_at", "updated_at")
    assert Rescuer(store, settings).sweep().archived == n

    alerter = Alerter(store, settings)
    assert alerter.evaluate() == 1
    assert alerter.evaluate() == 0, "nothing new: no second notification before the repeat interval"
    assert len(deliveries(store)) == 1
    deliver_all(store, settings, hook, 1)
    [got] = hook.requests
    assert got.path == SECRET_PATH
    assert signature_ok(SECRET, got)
    assert verify(SECRET, got.headers["X-Chokaq-Timestamp"], got.body, got.headers["X-Chokaq-Signature"])
    assert not verify(
        "another-secret-of-16", got.headers["X-Chokaq-Timestamp"], got.body, got.headers["X-Chokaq-Signature"]
    )
    assert got.headers["X-Chokaq-Delivery"]
    note = got.json
    assert (note["version"], note["status"], note["receiver"]) == ("4", "firing", "ops")
    [alert] = note["alerts"]
    assert alert["labels"] == {"alertname": "zombies", "severity": "warning"}
    assert alert["annotations"]["summary"].startswith("10,000 zombies moved to the DLQ")
    assert ids[0] not in got.body.decode()  # one alert about them, not a list of them


def test_repeat_then_resolve_and_the_resolved_message(store, hook):
    settings = alert_settings(store, alerts__repeat_interval=600)
    receiver(store, hook)
    rule(store, "declines", "dlq_growth", threshold=3, window_s=300)
    dead_jobs(store, 2)
    alerter = Alerter(store, settings)
    assert alerter.evaluate() == 0, "below the threshold"
    dead_jobs(store, 1)
    assert alerter.evaluate() == 1
    assert alerter.evaluate() == 0
    # The repeat interval passes (the group's last message moved 11 minutes into the past).
    sql(store, "UPDATE alert_groups SET last_sent_at = created_at")
    age_groups(store, 660)
    assert alerter.evaluate() == 1, "repeated once the repeat interval passed"
    # The condition clears: the dead-letterings leave the window. The resolve waits for group_interval.
    age(store, "job_failures", None, 400, "failed_at")
    assert alerter.evaluate() == 0, "resolved, but the group spoke less than group_interval ago"
    assert [s["status"] for s in store.alert_states()] == ["resolved"]
    age_groups(store, 120)
    assert alerter.evaluate() == 1
    assert store.alert_states() == [] and store.alert_groups() == []
    deliver_all(store, settings, hook, 3)
    statuses = [
        r.json["status"] for r in sorted(hook.requests, key=lambda r: int(r.headers["X-Chokaq-Timestamp"]))
    ]
    assert sorted(statuses) == ["firing", "firing", "resolved"]
    [resolved] = [r.json for r in hook.requests if r.json["status"] == "resolved"]
    [a] = resolved["alerts"]
    assert a["status"] == "resolved" and a["endsAt"] != "0001-01-01T00:00:00Z"
    assert a["labels"]["fingerprint"] == fingerprint_text("ValueError: card declined").id
    assert all(signature_ok(SECRET, r) for r in hook.requests)


def age_groups(store, seconds):
    from tests.support.dbprobe import ago_expr

    sql(store, f"UPDATE alert_groups SET last_sent_at = {ago_expr(store)}", seconds)


def test_a_failing_receiver_is_retried_then_dead_lettered_and_the_rule_loop_goes_on(store, hook, caplog):
    settings = alert_settings(store)
    receiver(store, hook)
    rule(store, "circuits", "circuit_open")
    rule(store, "dead", "dlq_growth", threshold=1)
    hook.answer(500)
    store.set_circuit("pay.v1", "open", actor=ADMIN)
    alerter = Alerter(store, settings)
    caplog.set_level(logging.DEBUG)
    assert alerter.evaluate() == 1
    [job] = deliveries(store)
    with hosted(store, settings, Registry()):
        # The loop runs on while the delivery fails: a second circuit opens, a second message is decided.
        store.set_circuit("mail.v1", "open", actor=ADMIN)
        wait_for(lambda: len(hook.requests) >= 1, 10, "a first attempt")
        age_groups(store, 120)  # group_interval passed: the changed group is notified again
        assert alerter.evaluate() == 1
        dead = settled(store, job.id, "dlq", timeout=20)
    assert dead["failure_reason"] == "MaxRetriesExceeded" and dead["attempt_count"] == 3
    tried = [r for r in hook.requests if r.headers["X-Chokaq-Delivery"] == job.id]
    assert len(tried) == 3, "three attempts (Alerts.DeliveryMaxAttempts), each signed anew"
    assert all(signature_ok(SECRET, r) for r in tried)
    assert "HTTP 500" in dead["error_details"]
    # A dead delivery does not page through the receiver that failed it (its queue is left out).
    assert alerter.evaluate() == 0
    assert {s["labels"].get("type") for s in store.alert_states()} == {"pay.v1", "mail.v1"}
    text = caplog.text + "".join(r.getMessage() for r in caplog.records)
    for secret in (SECRET, SECRET_PATH, hook.url):
        assert secret not in text and secret not in (dead["error_details"] or "")


def test_a_client_error_is_fatal_at_once(store, hook):
    settings = alert_settings(store)
    receiver(store, hook)
    rule(store, "circuits", "circuit_open")
    hook.answer(403)
    store.set_circuit("pay.v1", "open", actor=ADMIN)
    Alerter(store, settings).evaluate()
    [job] = deliveries(store)
    with hosted(store, settings, Registry()):
        dead = settled(store, job.id, "dlq", timeout=20)
    assert dead["failure_reason"] == "Fatal" and len(hook.requests) == 1
    assert "HTTP 403" in dead["error_details"] and hook.url not in dead["error_details"]


def test_grouping_by_label_and_inhibition(store, hook):
    settings = alert_settings(store)
    receiver(store, hook)
    rule(store, "by-fp", "dlq_growth", threshold=1)  # group_by alertname: one message for every fingerprint
    rule(store, "per-fp", "dlq_growth", threshold=1, group_by=["fingerprint"])  # one message per fingerprint
    for error in ("KeyError: a", "TimeoutError: b", "OSError: c"):
        dead_jobs(store, 1, error)
    assert Alerter(store, settings).evaluate() == 1 + 3
    notes = list(deliveries(store))
    sizes = sorted(len(json.loads(j.payload)["notification"]["alerts"]) for j in notes)
    assert sizes == [1, 1, 1, 3]

    # Inhibition: while the zombies rule fires, the reason rule's alerts are muted (equal: none).
    sql(store, "DELETE FROM alert_rules")
    sql(store, "DELETE FROM jobs_hot")
    rule(store, "zombies", "zombies")
    rule(store, "reasons", "dlq_growth", by="reason", threshold=1, inhibited_by=["zombies"])
    ids = [r.id for r in store.enqueue([NewJob(type="z.v1", queue="z")])]
    store.fetch("w9", 1, queues=["z"])
    store.mark_processing("w9", ids)
    age(store, "jobs_hot", ids, 3600, "heartbeat_at", "updated_at")
    Rescuer(store, settings).sweep()
    alerter = Alerter(store, settings)
    alerter.evaluate()
    sent = [json.loads(j.payload)["notification"] for j in deliveries(store)]
    assert [n["commonLabels"]["alertname"] for n in sent] == ["zombies"], "the reasons alert is inhibited"
    assert {s["rule"]: s["status"] for s in store.alert_states()} == {
        "zombies": "firing",
        "reasons": "firing",
    }


def test_without_rules_the_loop_writes_nothing(store):
    """A `chokaq serve` nobody configured alerts for takes no lease and writes no row every interval."""
    from tests.support.dbprobe import scalar

    assert Alerter(store, alert_settings(store)).run() == 0
    assert scalar(store, "SELECT count(*) FROM leases") == 0
