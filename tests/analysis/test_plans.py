"""Plans: frozen sets, dry runs, chunks of 1000, resumption after a SIGKILL, audit rows with the plan id."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter

import pandas as pd
import pytest

from chokaq_ops import errors
from chokaq_ops.client import DbClient
from chokaq_ops.models import Actor, FailureReason, HotFilter
from tests.support.seeds import plan_audit_ids, seed_dlq, seed_hot, table_counts

KILL_AFTER_FIRST_CHUNK = textwrap.dedent(
    """
    import os, signal, sys
    import chokaq_ops
    client = chokaq_ops.connect(sys.argv[1], actor="nightly-script")
    plan = client.plan(sys.argv[2])
    # Die the hard way once the first chunk has committed: no cleanup, no finally blocks.
    plan.execute(progress=False, on_chunk=lambda chunk: os.kill(os.getpid(), signal.SIGKILL))
    """
)


def run_killed(db_url: str, plan_id: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.run(
        [sys.executable, "-c", KILL_AFTER_FIRST_CHUNK, db_url, plan_id],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_plan_over_2500_jobs_survives_sigkill_and_resumes_without_touching_a_job_twice(
    client: DbClient, store, db_url
) -> None:
    ids = seed_dlq(store, 2500, reason=FailureReason.Zombie)
    plan = client.plan_resurrect(reason="Zombie", queue="billing")
    assert plan.state == "ready" and plan.is_dry_run
    assert (plan.total, plan.chunks, plan.chunk_size) == (2500, 3, 1000)
    assert plan.by_reason == {"Zombie": 2500} and plan.by_queue == {"billing": 2500}
    assert table_counts(store)["dlq"] == 2500, "a plan is a dry run until executed"
    late = seed_dlq(store, 5, reason=FailureReason.Zombie)  # dies after the plan froze its set

    killed = run_killed(db_url, plan.id)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    plan.refresh()
    assert (plan.state, plan.chunks_done, plan.done, plan.remaining) == ("running", 1, 1000, 1500)
    assert table_counts(store) == {"hot": 1000, "archive": 0, "dlq": 1505}

    # Some resurrected jobs die again before the plan resumes: they are back in the DLQ, same ids.
    first_chunk = plan.items().query("outcome == 'done'")["id"].tolist()
    assert len(first_chunk) == 1000
    again = first_chunk[:7]
    cancelled, _ = store.cancel_many(again, actor=Actor("bob"))
    assert sorted(cancelled) == sorted(again)

    chunks: list[dict] = []
    plan.execute(progress=False, on_chunk=chunks.append)
    assert [c["claimed"] for c in chunks] == [1000, 500]
    assert (plan.state, plan.chunks_done, plan.done, plan.skipped, plan.remaining) == ("done", 3, 2500, 0, 0)

    audited = plan_audit_ids(store, plan.id, "resurrect")
    assert len(audited) == 2500
    assert Counter(audited).most_common(1)[0][1] == 1, "a job was touched twice"
    assert set(audited) == set(ids)
    dlq = set(client.load_dlq(heavy=False)["id"])
    assert dlq == set(again) | set(late), "the re-dead jobs and the late arrivals stay in the DLQ"
    assert table_counts(store)["hot"] == 2500 - len(again)
    assert plan.audit()["plan_id"].eq(plan.id).all()
    assert plan.execute(progress=False).done == 2500  # executing a finished plan changes nothing
    assert len(plan_audit_ids(store, plan.id, "resurrect")) == 2500


def test_plan_from_a_frame_with_edits(client: DbClient, store) -> None:
    seed_dlq(store, 6, queue="billing", payload=lambda i: f'{{"order": {i},}}', reason=FailureReason.Fatal)
    seed_dlq(store, 4, queue="mail")
    frame = client.load_dlq(reason="Fatal")
    frame["payload"] = frame["payload"].str.replace(",}", "}", regex=False)  # fix the stray comma
    frame["priority"] = 20
    plan = client.plan_resurrect(frame, edits=["payload", "priority"])
    assert plan.total == 6 and plan.edited == 6 and plan.by_reason == {"Fatal": 6}
    text = repr(plan)
    assert "dry run" in text and "Fatal 6" in text and "plan.execute()" in text
    assert "<table" in plan._repr_html_() and plan.id in plan._repr_html_()
    assert len(plan.sample) == 6 and set(plan.sample["new_priority"]) == {20}
    plan.execute(progress=False)
    for job_id, payload in zip(frame["id"], frame["payload"], strict=True):
        job = store.get_job(job_id)
        assert (job["location"], job["payload"], job["priority"]) == ("hot", payload, 20)
        assert json.loads(job["payload"])
    audit = client.audit(plan_id=plan.id)
    assert len(audit) == 9 and set(audit["action"]) == {
        "plan_create",
        "plan_start",
        "resurrect",
        "plan_finish",
    }
    audit = audit[audit["action"] == "resurrect"]
    assert all(d["after"]["priority"] == 20 for d in audit["details"])
    assert all(d["before"]["payload"].endswith(",}") for d in audit["details"])


def test_edits_are_validated_before_anything_is_frozen(client: DbClient, store) -> None:
    ids = seed_dlq(store, 2)
    with pytest.raises(errors.ValidationError) as bad:
        client.plan_resurrect(ids, edits={ids[0]: {"payload": "{not json"}})
    assert bad.value.field == "payload"
    with pytest.raises(errors.ValidationError) as bad:
        client.plan_resurrect(ids, edits={"someone-else": {"priority": 1}})
    assert bad.value.field == "edits"
    with pytest.raises(errors.ValidationError):
        client.plan_purge(ids, edits={ids[0]: {"priority": 1}})  # type: ignore[call-arg]
    with pytest.raises(errors.ValidationError) as bad:
        client.plan_resurrect()
    assert bad.value.field == "ids"
    assert client.plans().empty


def test_purge_and_cancel_plans(client: DbClient, store) -> None:
    seed_dlq(store, 30, queue="billing", reason=FailureReason.Fatal)
    keep = seed_dlq(store, 5, queue="mail")
    purge = client.plan_purge(reason="Fatal", chunk_size=7)
    assert (purge.total, purge.chunks) == (30, 5)
    purge.execute(progress=False)
    assert purge.done == 30 and set(client.load_dlq()["id"]) == set(keep)
    assert len(plan_audit_ids(store, purge.id, "purge_dlq")) == 30

    pending = seed_hot(store, 12)
    cancel = client.plan_cancel(HotFilter(queue="reports"))
    assert cancel.total == 12 and cancel.by_status == {"pending": 12}
    store.fetch("w-cancel", 2, ["reports"])
    running = [j["id"] for j in client.load_hot().query("status == 'fetched'").to_dict("records")]
    store.mark_processing("w-cancel", running)  # running jobs are skipped, not killed
    cancel.execute(progress=False)
    assert (cancel.done, cancel.skipped) == (10, 2)
    items = cancel.items().set_index("id")
    assert set(items.loc[running, "outcome"]) == {"skipped"}
    assert set(client.load_dlq(reason="Cancelled")["id"]) == set(pending) - set(running)
    plans = client.plans()
    assert list(plans.columns[:4]) == ["id", "action", "actor", "state"]
    assert set(plans["state"]) == {"done"} and isinstance(plans["created_at"].dtype, pd.DatetimeTZDtype)


def test_discarded_plans_never_run(client: DbClient, store) -> None:
    ids = seed_dlq(store, 3)
    plan = client.plan_resurrect(ids)
    plan.discard()
    assert plan.state == "discarded"
    with pytest.raises(errors.InvalidState):
        plan.execute(progress=False)
    assert table_counts(store)["dlq"] == 3
    assert client.audit(action="plan_discard")["plan_id"].tolist() == [plan.id]


def test_direct_database_changes_need_an_actor(store, monkeypatch) -> None:
    monkeypatch.delenv("CHOKAQ_ACTOR", raising=False)
    ids = seed_dlq(store, 1)
    anonymous = DbClient(store)
    assert len(anonymous.load_dlq()) == 1  # reads need no actor
    with pytest.raises(errors.ValidationError) as bad:
        anonymous.resurrect(ids)
    assert bad.value.field == "actor" and "CHOKAQ_ACTOR" in str(bad.value)
    with pytest.raises(errors.ValidationError):
        anonymous.plan_resurrect(ids)
    monkeypatch.setenv("CHOKAQ_ACTOR", "carol")
    assert DbClient(store).resurrect(ids) == {"resurrected": 1, "batches": 1}
    assert store.list_audit(job_id=ids[0]).items[0]["actor"] == "carol"
