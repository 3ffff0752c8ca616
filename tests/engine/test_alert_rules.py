"""Each alert rule kind finds what it watches (docs/alerts.md), on both databases; the snapshot horizon
names the session that holds it on PostgreSQL and answers None on SQLite."""

from __future__ import annotations

import pytest
from worker_support import fast_settings

from chokaq_ops.alert_model import make_rule
from chokaq_ops.engine.alert_rules import evaluate
from chokaq_ops.models import Actor, NewJob
from chokaq_ops.storage.dialects import from_url
from chokaq_ops.storage.horizon import oldest_snapshot
from tests.support.dbprobe import ago_expr, sql


def kind(name, **kw):
    return make_rule({"name": name, "kind": name, "receivers": ["ops"], **kw})


def labels(found):
    return sorted(
        tuple(sorted((k, v) for k, v in a.labels.items() if k not in ("alertname", "severity")))
        for a in found
    )


def test_queue_lag_and_depth(store):
    settings = fast_settings(store)
    store.enqueue([NewJob(type="t", queue="slow") for _ in range(3)] + [NewJob(type="t", queue="fast")])
    sql(store, f"UPDATE jobs_hot SET due_at = {ago_expr(store)} WHERE queue = 'slow'", 120)
    assert labels(evaluate(kind("queue_lag", threshold=60), store, settings)) == [(("queue", "slow"),)]
    found = evaluate(kind("queue_depth", threshold=2), store, settings)
    assert labels(found) == [(("queue", "slow"),)] and found[0].value == 3
    assert evaluate(kind("queue_depth", threshold=2, queues=["fast"]), store, settings) == []


def test_circuit_open(store):
    settings = fast_settings(store)
    assert evaluate(kind("circuit_open"), store, settings) == []
    store.set_circuit("pay.v1", "open", actor=Actor("admin"))
    [a] = evaluate(kind("circuit_open"), store, settings)
    assert a.labels["type"] == "pay.v1" and "forced" in a.annotations["summary"]


def test_worker_lost(store):
    settings = fast_settings(store)
    for w in ("alive", "gone"):
        store.worker_register(w, host="h", pid=1, queues=None, concurrency=4, running=0, prefetched=0)
    sql(store, f"UPDATE workers SET last_seen_at = {ago_expr(store)} WHERE id = 'gone'", 300)
    [a] = evaluate(kind("worker_lost"), store, settings)
    assert a.labels["worker_id"] == "gone" and a.value >= 300


def test_plan_halted_by_its_canary_until_resumed(store):
    from tests.api.conftest import to_dlq

    settings = fast_settings(store)
    plan = store.create_plan("resurrect", actor=Actor("op"), ids=to_dlq(store, 2))["id"]
    assert evaluate(kind("plan_halted"), store, settings) == []
    reason = f"plan {plan} halted after 1 of 1 chunk(s): canary: 2 of 2 finished jobs failed again"
    store.note_plan(plan, "plan_halt", actor=Actor("op"), details={"reason": reason})
    [a] = evaluate(kind("plan_halted"), store, settings)
    assert a.labels["plan_id"] == plan and "canary" in a.annotations["summary"]
    store.note_plan(plan, "plan_resume", actor=Actor("op"))
    assert evaluate(kind("plan_halted"), store, settings) == []


def test_horizon_held(store, db_url):
    settings = fast_settings(store)
    if store.dialect.name == "sqlite":
        assert oldest_snapshot(store) is None
        assert evaluate(kind("horizon_held", threshold=1), store, settings) == []
        return
    holder = from_url(db_url).connect()  # a session of its own, holding a snapshot open
    try:
        cur = holder.cursor()
        cur.execute("SET application_name = 'nightly-report'")
        cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        cur.execute("SELECT count(*) FROM jobs_hot")
        cur.fetchall()
        cur.execute("SELECT pg_backend_pid()")
        pid = cur.fetchone()[0]
        sql(store, "SELECT pg_sleep(1.1)")
        found = oldest_snapshot(store)
        assert found is not None and found.pid == pid and found.application == "nightly-report"
        assert found.age_s >= 1 and found.state == "idle in transaction"
        [a] = evaluate(kind("horizon_held", threshold=1), store, settings)
        assert "nightly-report" in a.annotations["description"]
        assert evaluate(kind("horizon_held", threshold=3600), store, settings) == []
    finally:
        holder.rollback()
        holder.close()
    assert oldest_snapshot(store) is None or oldest_snapshot(store).pid != pid


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"kind": "nope"}, "kind"),
        ({"kind": "zombies", "receivers": []}, "receivers"),
        ({"kind": "circuit_open", "threshold": 3}, "threshold"),
        ({"kind": "queue_lag", "window_s": 60}, "window_s"),
        ({"kind": "zombies", "by": "reason"}, "by"),
        ({"kind": "zombies", "severity": "loud"}, "severity"),
        ({"kind": "zombies", "inhibited_by": ["r"]}, "inhibited_by"),
        ({"kind": "zombies", "group_by": ["no-dash"]}, "group_by"),
    ],
)
def test_bad_rules_name_the_field(values, field):
    from chokaq_ops import errors

    with pytest.raises(errors.ValidationError) as exc:
        make_rule({"name": "r", "receivers": ["ops"], **values})
    assert exc.value.field == field
