"""Four-eyes approval of plans: with Api.PlanApprovalMinJobs set, the API runs a large plan only after a
token other than its creator approved it; the approval is audited and announced on the event stream."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chokaq_ops import connect, errors
from chokaq_ops.models import Actor, FailureReason
from tests.support.clients import served_api
from tests.support.dbprobe import sql
from tests.support.seeds import seed_dlq, table_counts


@pytest.fixture
def api4(store, db_url) -> Iterator[tuple[str, dict[str, str]]]:
    """A served API that asks for a second person's approval of plans of 100 jobs or more."""
    with served_api(store, db_url, **{"api.plan_approval_min_jobs": 100}) as url:
        tokens = {
            name: store.create_token(name, role, actor=Actor("setup"))
            for name, role in (
                ("alice", "operator"),
                ("bob", "operator"),
                ("rita", "reader"),
                ("ada", "admin"),
            )
        }
        yield url, tokens


def test_a_large_plan_runs_only_after_a_second_person_approves(api4, store) -> None:
    url, tokens = api4
    seed_dlq(store, 150, reason=FailureReason.Zombie)
    alice, bob, rita = (connect(url, tokens[n]) for n in ("alice", "bob", "rita"))
    plan = alice.plan_resurrect(reason="Zombie")
    assert plan.approved_by is None

    with pytest.raises(errors.InvalidState) as refused:
        plan.execute(progress=False)
    assert "second person must approve" in str(refused.value) and "'alice'" in str(refused.value)
    assert table_counts(store)["dlq"] == 150 and plan.refresh().state == "ready"

    with pytest.raises(errors.ChokaqError, match=r"alice created plan .*a second person must approve"):
        plan.approve()  # the creator cannot approve their own plan (409)
    with pytest.raises(errors.Forbidden):
        rita.plan(plan.id).approve()  # a reader cannot approve
    assert plan.refresh().approved_by is None

    approved = bob.plan(plan.id).approve()
    assert approved.approved_by == "bob" and approved.approved_at is not None
    assert "approved by bob" in repr(approved)
    assert connect(url, tokens["ada"]).plan(plan.id).approve().approved_by == "bob", "the first stands"

    plan.execute(progress=False)  # the creator may run it once approved
    assert (plan.state, plan.done) == ("done", 150) and table_counts(store)["dlq"] == 0

    audit = sql(
        store, "SELECT actor, count FROM audit_log WHERE action = 'plan_approve' AND plan_id = ?", plan.id
    )
    assert audit == [("bob", 150)]
    kinds = [k for (k,) in sql(store, "SELECT kind FROM events ORDER BY id")]
    assert "plan_approved" in kinds


def test_small_plans_and_purges_follow_their_own_rules(api4, store) -> None:
    url, tokens = api4
    small = seed_dlq(store, 99, queue="small")
    big = seed_dlq(store, 120, queue="big")
    alice, bob, ada = (connect(url, tokens[n]) for n in ("alice", "bob", "ada"))
    plan = alice.plan_resurrect(small)
    plan.execute(progress=False)  # under the threshold: no approval needed
    assert plan.state == "done" and plan.approved_by is None

    purge = ada.plan_purge(big)
    with pytest.raises(errors.Forbidden):
        bob.plan(purge.id).approve()  # approving a purge takes an admin, like running one
    with pytest.raises(errors.InvalidState):
        ada.plan(purge.id).execute(progress=False)
    assert table_counts(store)["dlq"] == 120


def test_approval_rules_in_storage(client, store) -> None:
    ids = seed_dlq(store, 3)
    plan = client.plan_resurrect(ids)  # created by "alice" (the DbClient's actor)
    with pytest.raises(errors.Conflict) as own:
        store.approve_plan(plan.id, actor=Actor("alice"))
    assert own.value.field == "actor"
    assert store.get_plan(plan.id)["approved_by"] is None
    assert not sql(store, "SELECT 1 FROM audit_log WHERE action = 'plan_approve'")
    assert store.approve_plan(plan.id, actor=Actor("bob"))["approved_by"] == "bob"
    plan.execute(progress=False)
    with pytest.raises(errors.InvalidState):
        store.approve_plan(plan.id, actor=Actor("carol"))  # done: nothing to approve
    with pytest.raises(errors.JobNotFound):
        store.approve_plan("plan-nope", actor=Actor("bob"))
