"""Resurrect renews a job's retry budget (docs/failures.md): a job older than Retry.MaxJobAge, resurrected,
gets its attempts and its lifetime afresh, so it fails twice and is retried by the policy; resurrected with
renew=False it keeps its old lifetime, expires as RetryLifetimeExpired on its first failure, and the preview
said so before. A real worker runs the jobs on both databases."""

from __future__ import annotations

from chokaq_ops.client import DbClient
from chokaq_ops.engine.handlers import Registry
from chokaq_ops.models import Actor, FailureReason
from tests.engine.worker_support import enqueue, fast_settings, hosted, settled
from tests.support.dbprobe import age

DAY = 86_400


def _flaky_registry() -> Registry:
    """`flaky.v1` fails on its first two attempts after each resurrect, then succeeds."""
    reg = Registry()

    @reg.job("flaky.v1", max_attempts=3)
    def flaky(payload, ctx):
        if ctx.attempt < 3:
            raise ConnectionError(f"upstream refused attempt {ctx.attempt}")

    return reg


def _dead_and_old(store, settings, reg) -> str:
    """A flaky job whose first run died (Fatal by hand: a bad payload), then made two days old."""
    job_id = enqueue(store, "flaky.v1", payload="not json", queue="renew")
    with hosted(store, settings, reg):
        settled(store, job_id, "dlq")
    age(store, "jobs_dlq", [job_id], 2 * DAY, "created_at")
    return job_id


def test_a_resurrect_renews_the_budget_and_keep_budget_expires_as_before(store) -> None:
    settings = fast_settings(store, retry__max_job_age=DAY, worker__queues=["renew"])
    reg = _flaky_registry()
    client = DbClient(store, actor="ops", settings=settings)

    renewed = _dead_and_old(store, settings, reg)
    store.edit_dlq(renewed, actor=Actor("ops"), payload="{}")
    preview = client.preview([renewed], renew=True)
    assert (preview["past_lifetime"], preview["warnings"]) == (0, [])
    assert client.resurrect([renewed]) == {"resurrected": 1, "batches": 1}  # renew is the default
    hot = store.get_job(renewed)
    assert hot["renewed_at"] is not None and hot["attempt_count"] == 0
    with hosted(store, settings, reg):
        done = settled(store, renewed, "archive")
    # Its first death, then two failures after the resurrect, each retried by the policy, then the success.
    assert done["failure_count"] == 3
    history = client.failure_history([renewed])
    assert list(history["failure_reason"]) == ["Fatal", "Transient", "Transient"]
    assert list(history["attempt"]) == [1, 1, 2], "attempts restarted at the resurrect"

    kept = _dead_and_old(store, settings, reg)
    store.edit_dlq(kept, actor=Actor("ops"), payload="{}")
    warned = client.preview([kept], renew=False)
    assert warned["past_lifetime"] == 1 and "RetryLifetimeExpired" in warned["warnings"][0]
    client.resurrect([kept], renew=False)
    assert store.get_job(kept)["renewed_at"] is None
    with hosted(store, settings, reg):
        dead = settled(store, kept, "dlq")
    assert dead["failure_reason"] == FailureReason.RetryLifetimeExpired.name
    assert dead["attempt_count"] == 1, "expired on its first failure, without a retry"
    assert "CreatedAt=" in dead["error_details"] and "upstream refused attempt 1" in dead["error_details"]
    audit = store.list_audit(job_id=kept, action="resurrect").items[0]["details"]
    assert '"renewed":false' in audit.replace(" ", "")
