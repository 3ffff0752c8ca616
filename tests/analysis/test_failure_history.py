"""Failure history: a job's failed attempts survive its resurrect and its success, through the real worker,
both clients (DbClient and HttpClient over a served app), the API routes, and retention."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from chokaq_ops import errors
from chokaq_ops.engine.handlers import Registry
from chokaq_ops.models import Actor, FailureFilter, FailureReason, NewJob
from chokaq_ops.storage import Dead, Retry
from tests.api.conftest import ApiClient
from tests.engine.worker_support import enqueue, fast_settings, hosted, settled
from tests.support.dbprobe import age
from tests.support.seeds import seed_dlq


def _flaky_registry(state: dict[str, bool]) -> Registry:
    reg = Registry()

    @reg.job("billing.charge.v1", max_attempts=2)
    def charge(payload, ctx):
        if state["fail"]:
            raise RuntimeError(f"upstream 503 for request {ctx.attempt}")

    return reg


def test_resurrected_job_that_succeeds_keeps_its_failures(any_client, store, db_url, bound_app) -> None:
    state = {"fail": True}
    job_id = enqueue(store, "billing.charge.v1", queue="billing")
    with hosted(store, fast_settings(store), _flaky_registry(state)):
        dead = settled(store, job_id, "dlq")
        state["fail"] = False
        assert any_client.resurrect([job_id])["resurrected"] == 1
        done = settled(store, job_id, "archive")

    # The DLQ row is gone; the archive row says two failures preceded the success.
    assert done["failure_count"] == 2
    # The resurrect's audit row names the failure it came back from.
    [revived] = store.list_audit(job_id=job_id, action="resurrect").items
    details = json.loads(revived["details"]) if isinstance(revived["details"], str) else revived["details"]
    assert (details["failure_reason"], details["fingerprint"]) == ("MaxRetriesExceeded", dead["fingerprint"])

    history = any_client.failure_history([job_id])
    assert list(history["job_id"]) == [job_id, job_id]
    assert list(history["attempt"]) == [1, 2]
    assert list(history["outcome"]) == ["retry", "dead"]
    assert list(history["failure_reason"]) == ["Transient", "MaxRetriesExceeded"]
    # The retried attempt is fingerprinted as its dead-lettering was: one group for the job's failures.
    assert list(history["fingerprint"]) == [dead["fingerprint"], dead["fingerprint"]]
    assert history["error_line"].iloc[0] == "RuntimeError: upstream 503 for request 1"
    # The dead row names its cause, not only the verdict.
    assert history["error_line"].iloc[1] == (
        "MaxRetriesExceeded: attempt 2 of 2 failed: RuntimeError: upstream 503 for request 2"
    )
    assert "upstream 503 for request 2" in history["error_details"].iloc[1]
    assert str(history["failed_at"].dtype) == "datetime64[us, UTC]"

    # The same rows by filter: the dead one only, by reason list and by exclusion.
    only_dead = any_client.failure_history(reason="MaxRetriesExceeded,Fatal", queue="billing")
    assert list(only_dead["attempt"]) == [2]
    assert list(any_client.failure_history(reason="!Transient")["outcome"]) == ["dead"]
    assert any_client.failure_history(queue="!billing").empty

    # Over the API: the job's own route.
    app = bound_app(fast_settings(store), store=store)
    api = ApiClient(app, {"reader": store.create_token("reader-t", "reader", actor=Actor("setup"))})
    got = api.get(f"/jobs/{job_id}/failures", role="reader")
    assert got.status_code == 200
    assert [(r["attempt"], r["failure_reason"], r["fingerprint"]) for r in got.get_json()] == [
        (1, "Transient", dead["fingerprint"]),
        (2, "MaxRetriesExceeded", dead["fingerprint"]),
    ]
    assert api.get(f"/jobs/{job_id}", role="reader").get_json()["failure_count"] == 2


def test_failure_routes_refuse_bad_input_and_unknown_jobs(store, bound_app) -> None:
    app = bound_app(fast_settings(store), store=store)
    api = ApiClient(app, {"reader": store.create_token("reader-t", "reader", actor=Actor("setup"))})
    assert api.get("/jobs/nope/failures", role="reader").status_code == 404
    bad = api.get("/failures?reason=Nonsense", role="reader")
    assert bad.status_code == 422 and "reason" in bad.get_data(as_text=True)
    naive = api.get("/failures?failed_from=2026-01-01T00:00:00", role="reader")
    assert naive.status_code == 422 and "failed_from" in naive.get_data(as_text=True)
    assert api.get("/failures?failed_from=24h", role="reader").get_json() == []


def test_every_dead_lettering_and_retry_is_recorded_in_its_transaction(store) -> None:
    """Store level: reschedule with an error, move_to_dlq, cancel and the zombie sweep each leave rows."""
    [retried] = seed_dlq(
        store, 1, queue="q-dead", reason=FailureReason.Fatal, error=lambda i: "Boom: 1\ntrace"
    )
    job_ids = [r.id for r in store.enqueue([_new("q-retry"), _new("q-cancel"), _new("q-zombie")])]
    store.fetch("w1", 1, ["q-retry"])
    store.mark_processing("w1", [job_ids[0]])
    assert store.reschedule("w1", [Retry(job_ids[0], 0.0, "Timeout: slow\nmore", "fp-retry")]) == [job_ids[0]]
    assert store.cancel_many([job_ids[1]], actor=Actor("ops"))[0] == [job_ids[1]]
    store.fetch("w2", 1, ["q-zombie"])
    store.mark_processing("w2", [job_ids[2]])
    age(store, "jobs_hot", [job_ids[2]], 3600, "heartbeat_at")
    assert [r["id"] for r in store.archive_zombies(60, fingerprint="fp-zombie")] == [job_ids[2]]

    rows = store.failure_history(FailureFilter(), limit=100)
    by_job = {r["job_id"]: r for r in rows}
    assert by_job[retried]["outcome"] == "dead" and by_job[retried]["failure_reason"] == "Fatal"
    assert by_job[retried]["error_line"] == "Boom: 1"
    assert by_job[job_ids[0]]["outcome"] == "retry" and by_job[job_ids[0]]["fingerprint"] == "fp-retry"
    assert by_job[job_ids[0]]["error_line"] == "Timeout: slow" and by_job[job_ids[0]]["attempt"] == 1
    assert by_job[job_ids[1]]["failure_reason"] == "Cancelled"
    zombie = by_job[job_ids[2]]
    assert (zombie["failure_reason"], zombie["fingerprint"], zombie["worker_id"]) == (
        "Zombie",
        "fp-zombie",
        "w2",
    )
    assert zombie["error_line"].startswith("Zombie detected: heartbeat expired")
    # A refused move writes nothing: a Dead for a job this worker does not own leaves no history row.
    assert store.move_to_dlq("w-other", [Dead(job_ids[0], FailureReason.Fatal, "x")]) == []
    assert len(store.failure_history(FailureFilter(), limit=100)) == 4


def test_retention_prunes_old_failures_only(store) -> None:
    seed_dlq(store, 3, queue="q-old")
    age(store, "job_failures", None, 2 * 86400, "failed_at")
    [recent] = seed_dlq(store, 1, queue="q-new")
    done = store.prune(buckets_older_than_s=1e9, events_older_than_s=1e9, failures_older_than_s=86400)
    assert done["failures"] == 3
    assert [r["job_id"] for r in store.failure_history(FailureFilter(), limit=100)] == [recent]


def test_failure_history_refuses_naive_times_and_mixed_selection(any_client) -> None:
    with pytest.raises(errors.ValidationError, match="timezone"):
        any_client.failure_history(failed_from=pd.Timestamp("2026-01-01"))
    with pytest.raises(errors.ValidationError, match="not both"):
        any_client.failure_history(["a"], ids=["b"])


def _new(queue: str) -> NewJob:
    return NewJob(type="t.v1", queue=queue)


def test_plan_outcomes_per_job_and_locate(any_client, store) -> None:
    ids = seed_dlq(store, 3, queue="loc", reason=FailureReason.Zombie)
    plan = any_client.plan_resurrect(ids)
    plan.execute(progress=False)
    store.cancel_many([ids[1]], actor=Actor("ops"))  # died again after the plan moved it
    where = plan.outcomes(per_job=True)
    assert list(where.columns) == ["id", "location", "status", "failure_reason", "finished_at", "chunk"]
    assert list(where["id"]) == ids
    assert list(where["location"]) == ["hot", "dlq", "hot"]
    assert list(where["status"]) == ["pending", "dead", "pending"]
    assert where["failure_reason"].tolist()[1] == "Cancelled" and pd.isna(where["failure_reason"].iloc[0])
    assert where["finished_at"].notna().tolist() == [False, True, False]
    assert plan.outcomes()["failed"] == 1, "the counts agree with the rows"

    located = any_client.locate([ids[2], "no-such-job"])
    assert list(zip(located["id"], located["location"], strict=True)) == [
        (ids[2], "hot"),
        ("no-such-job", "gone"),
    ]


def test_tab_completion_lists_the_lazy_names() -> None:
    import chokaq_ops

    assert {"connect", "Store", "job", "JobContext", "DlqFilter"} <= set(dir(chokaq_ops))
