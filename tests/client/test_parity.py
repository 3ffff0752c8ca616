"""Python parity, over the database and over the API alike: the job types workers declared and the safe
retries they allow, a plan's items with the `id` column every frame has, summaries with the same types,
an idempotent discard, and a labelled resurrect that is the CLI's run (label bound to its selection,
audited lifecycle) from Python."""

from __future__ import annotations

from datetime import datetime

import pytest

from chokaq_ops import errors
from chokaq_ops.engine.handlers import Registry
from chokaq_ops.models import FailureReason
from tests.engine.worker_support import fast_settings, hosted
from tests.support.seeds import seed_dlq


def _declare(store) -> None:
    reg = Registry()
    reg.job("thumb.v1", idempotent=True)(lambda payload, ctx: None)
    reg.job("charge.v1")(lambda payload, ctx: None)
    with hosted(store, fast_settings(store, worker__queues=["nothing-here"]), reg):
        pass  # a starting worker records its registry's declarations


def test_job_types_and_safe_retries_come_from_the_servers_registry(any_client, store) -> None:
    safe = seed_dlq(store, 2, queue="p", type="thumb.v1", reason=FailureReason.Zombie)
    seed_dlq(store, 3, queue="p", type="charge.v1", reason=FailureReason.Zombie)
    assert any_client.job_types().empty
    assert any_client.retryable(queue="p").empty, "no worker declared anything: nothing is safe"
    _declare(store)
    types = any_client.job_types()
    assert list(types.columns) == ["type", "idempotent", "updated_at"]
    assert dict(zip(types["type"], types["idempotent"], strict=True)) == {
        "charge.v1": False,
        "thumb.v1": True,
        "chokaq.alert.deliver.v1": False,  # every worker runs the alerts' deliveries (docs/alerts.md)
    }
    assert str(types["updated_at"].dtype) == "datetime64[us, UTC]" or "UTC" in str(types["updated_at"].dtype)
    dead = any_client.load_dlq(queue="p")
    assert sorted(any_client.retryable(dead)["id"]) == sorted(safe), "of a frame: its safe rows"
    assert sorted(any_client.retryable(queue="p")["id"]) == sorted(safe), "by filter: loaded narrowed"
    assert any_client.resurrect(queue="p", safe_only=True)["resurrected"] == 2
    assert {store.get_job(i)["location"] for i in safe} == {"hot"}
    assert any_client.load_dlq(queue="p")["type"].astype(str).unique().tolist() == ["charge.v1"]


def test_plan_items_say_id_summaries_have_one_type_discard_twice(any_client, store) -> None:
    ids = seed_dlq(store, 3, queue="items", reason=FailureReason.Zombie)
    plan = any_client.plan_resurrect(ids)
    items = plan.items()
    assert list(items.columns[:2]) == ["id", "chunk"] and sorted(items["id"]) == sorted(ids)
    joined = items.merge(any_client.load_dlq(queue="items"), on="id")
    assert len(joined) == 3, "items join any other frame on id"
    summary = any_client.summary(queue="items")
    times = [summary["by_reason"][0]["first_failed_at"], summary["top_errors"][0]["last_seen"]]
    assert all(isinstance(t, datetime) and t.tzinfo is not None for t in times), times
    first = plan.discard()
    again = any_client.plan(plan.id).discard()
    assert first.state == again.state == "discarded"
    with pytest.raises(errors.InvalidState):
        any_client.plan(plan.id).execute()


def test_a_labelled_resurrect_from_python_is_the_clis_run(any_client, store) -> None:
    seed_dlq(store, 4, queue="lab", reason=FailureReason.Zombie)
    seed_dlq(store, 3, queue="lab-2", reason=FailureReason.Zombie)
    events: list[dict] = []
    final = any_client.run_plan("resurrect", queue="lab", label="py-1", chunk_size=2, on_event=events.append)
    assert [e["event"] for e in events] == ["plan", "chunk", "chunk", "finished"]
    assert (final["resurrected"], final["exit_code"], final["reason"]) == (4, 0, "done")
    plan = any_client.plan(final["plan_id"])
    assert plan.label == "py-1" and plan.spec == {"queue": "lab"}
    actions = set(any_client.audit(plan_id=plan.id)["action"])
    assert {"plan_create", "plan_lease", "plan_start", "plan_finish", "plan_release"} <= actions

    # A canary nobody runs halts the labelled run: raised, and audited, as the CLI's halt is.
    with pytest.raises(errors.PlanHalted) as halted:
        any_client.resurrect(queue="lab-2", label="py-2", chunk_size=1, canary=1, watch=0.3, poll=0.05)
    bound = halted.value.plan.id
    assert "plan_halt" in set(any_client.audit(plan_id=bound)["action"])
    with pytest.raises(errors.LabelMismatch) as refused:
        any_client.resurrect(queue="lab", label="py-2")
    assert "queue=lab-2" in str(refused.value) and "queue=lab}" in str(refused.value)
    resumed = any_client.resurrect(queue="lab-2", label="py-2")
    assert (resumed["plan_id"], resumed["resurrected"], resumed["remaining"]) == (bound, 3, 0)
    assert list(any_client.plans(label="py-2")["id"]) == [bound]


def test_a_plain_plan_execute_audits_its_halt_and_interrupt(any_client, store, monkeypatch) -> None:
    """A notebook's `plan.execute()` writes plan_halt / plan_interrupt as the CLI's runs do."""
    seed_dlq(store, 3, queue="nb", reason=FailureReason.Zombie)
    plan = any_client.plan_resurrect(queue="nb", chunk_size=1)
    with pytest.raises(errors.PlanHalted):
        plan.execute(progress=False, canary=1, watch=0.2, poll=0.05)
    [halt] = any_client.audit(plan_id=plan.id, action="plan_halt")["details"]
    assert "none was picked up by a worker" in halt["reason"]

    def interrupted(*_args, **_kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(type(any_client), "_plan_chunk", interrupted)
    with pytest.raises(KeyboardInterrupt):
        any_client.plan(plan.id).execute(progress=False, interrupted=lambda: "SIGTERM")
    [note] = any_client.audit(plan_id=plan.id, action="plan_interrupt")["details"]
    assert note["signal"] == "SIGTERM"


def test_an_unfinished_canary_says_whether_its_jobs_run_or_wait() -> None:
    from chokaq_ops.analysis.plans import unfinished_canary

    running = {"acted": 10, "running": 4, "waiting": 6, "retrying": 0}
    assert "4 are still running" in unfinished_canary(running, 30) and "watch longer" in unfinished_canary(
        running, 30
    )
    idle = {"acted": 10, "running": 0, "waiting": 10, "retrying": 0}
    assert "none was picked up by a worker" in unfinished_canary(idle, 30)
