"""What a plan run relies on, on both databases: a label bound to its frozen selection, one lease holder at
a time, a pace kept by the plan (shared by every executor), freezes whose process died reclaimed (no
orphan rows), an idempotent discard, and previews that count exactly what a capped run would touch and
warn about kept retry budgets."""

from __future__ import annotations

import json

import pytest

from chokaq_ops import errors
from chokaq_ops.models import Actor, DlqFilter, FailureReason
from chokaq_ops.storage.plan_ops import PlanNotFound
from tests.support.dbprobe import age, hot_copy, row_locked, scalar, sql
from tests.support.seeds import seed_dlq

CRON = Actor("cron")


def _open(store, label, queue, *, new=False, **kw):
    spec = {"queue": queue, "reason": "Zombie"}
    flt = DlqFilter(queue=queue, reason=FailureReason.Zombie)
    return store.open_plan("resurrect", actor=CRON, label=label, spec=spec, new=new, flt=flt, **kw)


def test_a_label_is_bound_to_its_frozen_selection(store) -> None:
    seed_dlq(store, 3, queue="media", reason=FailureReason.Zombie)
    seed_dlq(store, 2, queue="billing", reason=FailureReason.Zombie)
    plan, resumed = _open(store, "L1", "media")
    assert (resumed, plan["total"], plan["label"], plan["spec"]) == (
        False,
        3,
        "L1",
        {"queue": "media", "reason": "Zombie"},
    )

    again, resumed = _open(store, "L1", "media")
    assert (again["id"], resumed) == (plan["id"], True), "the same selection resumes the label's plan"

    with pytest.raises(errors.LabelMismatch) as refused:
        _open(store, "L1", "billing")
    message = str(refused.value)
    assert "queue=media" in message and "queue=billing" in message and plan["id"] in message
    assert refused.value.bound == {"queue": "media", "reason": "Zombie"}
    assert refused.value.asked == {"queue": "billing", "reason": "Zombie"}
    assert store.list_plans(label="L1")[1] == 1, "a refused run froze nothing"

    alone, resumed = store.open_plan("resurrect", actor=CRON, label="L1", spec=None)
    assert (alone["id"], resumed) == (plan["id"], True), "the label alone resumes it"

    fresh, resumed = _open(store, "L1", "billing", new=True)
    assert not resumed and fresh["id"] != plan["id"] and fresh["total"] == 2
    assert store.get_plan(plan["id"])["state"] == "discarded"
    actions = [a["action"] for a in store.list_audit(plan_id=plan["id"]).items]
    assert actions.count("plan_resume") == 2 and "plan_discard" in actions

    with pytest.raises(errors.ValidationError, match="no unfinished resurrect plan is labelled"):
        store.open_plan("resurrect", actor=CRON, label="nobody", spec=None)


def test_one_run_holds_a_plan_and_a_dead_holder_can_be_taken_over(store) -> None:
    seed_dlq(store, 4, queue="lease", reason=FailureReason.Zombie)
    plan = store.create_plan("resurrect", actor=CRON, flt=DlqFilter(queue="lease"), chunk_size=2)
    held = store.lease_plan(plan["id"], holder="a@h:1:x", actor=CRON, ttl=60)
    assert held["lease_holder"] == "a@h:1:x" and held["lease_until"] is not None
    with pytest.raises(errors.PlanBusy) as busy:
        store.lease_plan(plan["id"], holder="b@h:2:y", actor=CRON)
    assert busy.value.holder == "a@h:1:x" and 0 < busy.value.seconds_left <= 60
    with pytest.raises(errors.PlanBusy):  # a chunk asked for by anyone else waits for the holder
        store.execute_plan_chunk(plan["id"], actor=CRON, holder="b@h:2:y")
    _, chunk = store.execute_plan_chunk(plan["id"], actor=CRON, holder="a@h:1:x")
    assert chunk is not None and chunk["done"] == 2

    taken = store.lease_plan(plan["id"], holder="b@h:2:y", actor=CRON, take_from="a@h:1:x")
    assert taken["lease_holder"] == "b@h:2:y"
    assert store.release_plan(plan["id"], holder="a@h:1:x", actor=CRON) is False, "not its lease any more"
    assert store.release_plan(plan["id"], holder="b@h:2:y", actor=CRON) is True
    assert store.get_plan(plan["id"])["lease_holder"] is None
    actions = [a["action"] for a in store.list_audit(plan_id=plan["id"]).items]
    assert actions.count("plan_lease") == 2 and actions.count("plan_release") == 1


def test_the_pace_is_the_plans_and_every_executor_keeps_it(store) -> None:
    seed_dlq(store, 6, queue="paced", reason=FailureReason.Zombie)
    plan = store.create_plan("resurrect", actor=CRON, flt=DlqFilter(queue="paced"), chunk_size=2, rate=0.5)
    assert plan["rate"] == 0.5
    _, first = store.execute_plan_chunk(plan["id"], actor=CRON)
    assert first is not None and first["done"] == 2
    # Any executor, with or without a lease, is told to wait: 2 jobs at 0.5/s put the next chunk 4 s out.
    for executor in ("one", "another"):
        _, waiting = store.execute_plan_chunk(plan["id"], actor=Actor(executor))
        assert waiting is not None and 3.0 < waiting["wait"] <= 4.0, waiting
    assert store.get_plan(plan["id"])["done"] == 2, "a waiting executor ran nothing"
    faster = store.pace_plan(plan["id"], 1000.0, actor=CRON)
    assert faster["rate"] == 1000.0
    details = store.list_audit(plan_id=plan["id"], action="plan_pace").items[0]["details"]
    assert json.loads(details) == {"before": 0.5, "after": 1000.0}
    sql(store, "UPDATE plans SET not_before = NULL WHERE id = ?", plan["id"])
    _, chunk = store.execute_plan_chunk(plan["id"], actor=CRON)
    assert chunk is not None and chunk["done"] == 2


def test_abandoned_freezes_are_reclaimed_and_cannot_be_sealed(store) -> None:
    ids = seed_dlq(store, 5, queue="orphan", reason=FailureReason.Zombie)
    # A freeze that died after writing its items (its process was SIGKILLed): items, no plan.
    store.freezes.begin("plan-dead", "cron")
    store.db.run(
        "plan_add_items",
        plan_id="plan-dead",
        chunk_size=1000,
        items=[
            {"ord": n, "id": i, "payload": None, "tags": None, "priority": None} for n, i in enumerate(ids)
        ],
    )
    [freeze] = store.list_orphans()
    assert (freeze["plan_id"], freeze["items"], freeze["abandoned"]) == ("plan-dead", 5, False)
    assert store.reclaim_orphans() == [], "a freeze beaten within the grace is alive"
    age(store, "plan_freezes", None, 3600, "beat_at")
    assert [f["abandoned"] for f in store.list_orphans()] == [True]
    assert store.reclaim_orphans() == [{"plan_id": "plan-dead", "actor": "cron", "items": 5}]
    assert scalar(store, "SELECT count(*) FROM plan_items") == 0 and store.list_orphans() == []
    [audit] = store.list_audit(action="plan_reclaim").items
    assert (audit["plan_id"], audit["count"], audit["actor"]) == ("plan-dead", 5, "chokaq:reclaim")
    with pytest.raises(errors.InvalidState, match="reclaimed"):
        store.freezes.beat("plan-dead")  # the late freezer stops at its next batch
    with pytest.raises(PlanNotFound):
        store.get_plan("plan-dead")
    # A plan made afterwards reclaims any other dead freeze on its way.
    store.freezes.begin("plan-dead-2", "cron")
    age(store, "plan_freezes", None, 3600, "beat_at")
    store.create_plan("purge", actor=CRON, ids=ids[:1])
    assert store.list_orphans() == []


def test_discard_is_idempotent(store) -> None:
    seed_dlq(store, 2, queue="disc", reason=FailureReason.Zombie)
    plan = store.create_plan("resurrect", actor=CRON, flt=DlqFilter(queue="disc"))
    first = store.discard_plan(plan["id"], actor=CRON)
    again = store.discard_plan(plan["id"], actor=CRON)
    assert first["state"] == again["state"] == "discarded"
    assert len(store.list_audit(plan_id=plan["id"], action="plan_discard").items) == 1
    done = store.create_plan("purge", actor=CRON, flt=DlqFilter(queue="disc"))
    while store.execute_plan_chunk(done["id"], actor=CRON)[1] is not None:
        pass
    with pytest.raises(errors.InvalidState, match="done"):
        store.discard_plan(done["id"], actor=CRON)


def test_a_capped_preview_counts_exactly_the_capped_jobs_and_warns_of_kept_budgets(store) -> None:
    old = seed_dlq(store, 6, queue="cap", reason=FailureReason.Zombie)
    seed_dlq(store, 4, queue="cap", reason=FailureReason.Timeout)
    age(store, "jobs_dlq", old[:3], 3 * 86_400, "created_at")
    got = store.preview_dlq(flt=DlqFilter(queue="cap"), max_jobs=5, sample=10)
    assert got["matched"] == 5 and sum(got["by_queue"].values()) == 5 == sum(got["by_reason"].values())
    assert len(got["sample_ids"]) == 5
    assert "warnings" not in got, "no resurrect was asked about"
    kept = store.preview_dlq(flt=DlqFilter(queue="cap"), renew=False, max_job_age=86_400)
    assert (kept["matched"], kept["past_lifetime"], kept["renew"]) == (10, 3, False)
    assert "3 of 10 job(s)" in kept["warnings"][0] and "RetryLifetimeExpired" in kept["warnings"][0]
    renewed = store.preview_dlq(flt=DlqFilter(queue="cap"), renew=True, max_job_age=86_400)
    assert (renewed["past_lifetime"], renewed["warnings"]) == (0, [])
    by_ids = store.preview_dlq(ids=old, max_jobs=2, renew=False, max_job_age=86_400)
    assert by_ids["matched"] == 2 and by_ids["past_lifetime"] == 2 and by_ids["sample_ids"] == old[:2]


def test_a_resurrect_plans_chunk_displaces_a_dead_copy_whose_job_is_back_in_hot(store) -> None:
    """A planned job whose id is in hot again when its chunk runs (a job in two tables): the live hot job
    stays as it is, the DLQ copy is displaced to the audit log, the item is `skipped`, and the chunk's other
    jobs go back to hot with their edits. On PostgreSQL the chunk is claimed and moved in one statement
    (docs/notebooks.md "Chunks"), on SQLite in two."""
    ids = seed_dlq(store, 3, queue="twins", reason=FailureReason.Zombie)
    edits = {ids[1]: {"payload": '{"order": "edited"}'}}
    plan = store.create_plan("resurrect", actor=CRON, ids=ids, edits=edits)
    store.approve_plan(plan["id"], actor=Actor("carol"))
    hot_copy(store, ids[0])
    after, chunk = store.execute_plan_chunk(plan["id"], actor=CRON)
    assert chunk == {"chunk": 0, "claimed": 3, "done": 2, "skipped": 1}
    assert (after["state"], after["done"], after["skipped"]) == ("done", 2, 1)
    outcomes = {i["id"]: i["outcome"] for i in store.plan_items(plan["id"])}
    assert outcomes == {ids[0]: "skipped", ids[1]: "done", ids[2]: "done"}
    assert scalar(store, "SELECT count(*) FROM jobs_dlq WHERE queue = 'twins'") == 0
    assert store.get_job(ids[0])["priority"] == 3  # the live hot copy, untouched
    assert store.get_job(ids[1])["payload"] == '{"order": "edited"}'
    displaced = sql(store, "SELECT job_id FROM audit_log WHERE action = 'displace'")
    resurrected = sql(store, "SELECT job_id, plan_id FROM audit_log WHERE action = 'resurrect'")
    assert [r[0] for r in displaced] == [ids[0]]
    assert sorted(resurrected) == sorted((i, plan["id"]) for i in ids[1:])


@pytest.mark.postgres_only
def test_a_purge_plans_chunk_skips_a_job_another_session_holds(store) -> None:
    """A purge plan's chunk does not wait for a dead job another session holds locked: it purges the
    others, and that item is `skipped` (the job stays in the DLQ, untouched by the plan from then on)."""
    ids = seed_dlq(store, 3, queue="held", reason=FailureReason.Zombie)
    plan = store.create_plan("purge", actor=CRON, flt=DlqFilter(queue="held"))
    store.approve_plan(plan["id"], actor=Actor("carol"))
    with row_locked(store, "SELECT id FROM jobs_dlq WHERE id = ? FOR UPDATE", ids[2]):
        after, chunk = store.execute_plan_chunk(plan["id"], actor=CRON)
    assert chunk == {"chunk": 0, "claimed": 3, "done": 2, "skipped": 1}
    assert (after["state"], after["done"], after["skipped"]) == ("done", 2, 1)
    assert [r[0] for r in sql(store, "SELECT id FROM jobs_dlq WHERE queue = 'held'")] == [ids[2]]
    purged = sql(store, "SELECT job_id FROM audit_log WHERE action = 'purge_dlq' AND plan_id = ?", plan["id"])
    assert sorted(r[0] for r in purged) == sorted(ids[:2])
