"""Hot jobs: enqueue, list, any job by id, edit while pending, bulk cancel."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from flask import request
from flask.views import MethodView

from chokaq_api.auth import actor, require_plan_below_threshold
from chokaq_api.extensions import Blueprint, ctx, store
from chokaq_api.resources.failures.schemas import FailureSchema, JobFailureQuery, LocatedSchema, LocateSchema
from chokaq_api.resources.jobs.schemas import (
    CancelResultSchema,
    CancelSchema,
    EditJobSchema,
    EnqueueSchema,
    JobListQuery,
    JobSchema,
)
from chokaq_ops import errors, tracing
from chokaq_ops.models import FailureFilter, NewJob
from chokaq_ops.records import JobRecord

URL = "/jobs"
blp = Blueprint("jobs", __name__, description="Enqueue jobs, find any job by id, edit and cancel hot jobs.")


def submit(job: NewJob) -> tuple[JobRecord, int]:
    """Enqueue one job as the token's name: 201 new, 200 an active duplicate of its idempotency key. With
    OpenTelemetry, the request's W3C `traceparent`/`tracestate` headers are the job's producer context
    when no span is current in this thread (an instrumented app's server span wins: docs/tracing.md)."""
    if tracing.ENABLED and tracing.current_context() is None:
        job = replace(job, trace_context=tracing.from_headers(request.headers))
    result = store().enqueue_audited(job, actor=actor(), max_queues=ctx().settings.api.max_queues)
    if result.status == "conflict":
        raise errors.Conflict(f"a job with id {result.id} exists already", field="id")
    return store().get_job(result.id), 201 if result.created else 200


def with_worker_state(jobs: Sequence[JobRecord]) -> list[dict[str, Any]]:
    """The jobs' JSON views; a hot job held by a worker says whether that worker is gone (one read of the
    small registry table per request)."""
    views = [job.to_dict() for job in jobs]
    held = [v for v in views if v["location"] == "hot" and v["worker_id"]]
    if held:
        gone = store().gone_workers(ctx().settings.health.worker_heartbeat_timeout)
        for v in held:
            v["worker_gone"] = v["worker_id"] in gone
    return views


@blp.route("")
class Jobs(MethodView):
    @blp.arguments(JobListQuery, location="query")
    @blp.response(200, JobSchema(many=True))
    @blp.paginate()
    def get(self, args: dict[str, Any], pagination_parameters: Any) -> Any:
        """List hot jobs (pending, fetched, processing)"""
        page = store().list_hot(
            **args, page=pagination_parameters.page, page_size=pagination_parameters.page_size
        )
        pagination_parameters.item_count = page.total
        return with_worker_state(page.items)

    @blp.arguments(EnqueueSchema)
    @blp.response(201, JobSchema, description="The new job.")
    @blp.alt_response(200, schema=JobSchema, description="An active job already holds the idempotency key.")
    @blp.alt_response(409, response="CONFLICT", description="The id is used by another job.")
    def post(self, job: NewJob) -> Any:
        """Enqueue a job"""
        return submit(job)


@blp.route("/cancel")
class Cancel(MethodView):
    @blp.arguments(CancelSchema)
    @blp.response(200, CancelResultSchema)
    def post(self, body: dict[str, Any]) -> Any:
        """Cancel pending or fetched jobs (they move to the DLQ as Cancelled); running ones are skipped"""
        require_plan_below_threshold(len(body["ids"]), "cancel")
        cancelled, skipped = store().cancel_many(body["ids"], actor=actor())
        return {"cancelled": cancelled, "skipped": skipped}


@blp.route("/<job_id>")
class JobById(MethodView):
    @blp.response(200, JobSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    def get(self, job_id: str) -> Any:
        """Get any job by id: hot, archive or DLQ (see `location`)"""
        return with_worker_state([store().get_job(job_id)])[0]

    @blp.arguments(EditJobSchema)
    @blp.response(200, JobSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    @blp.alt_response(409, response="CONFLICT", description="The job is not pending.")
    def patch(self, body: dict[str, Any], job_id: str) -> Any:
        """Edit a pending job's payload, tags or priority"""
        return store().edit_pending(job_id, actor=actor(), **body)


@blp.route("/<job_id>/failures")
class JobFailures(MethodView):
    @blp.arguments(JobFailureQuery, location="query")
    @blp.response(200, FailureSchema(many=True))
    @blp.alt_response(404, response="NOT_FOUND")
    def get(self, args: dict[str, Any], job_id: str) -> Any:
        """The job's failed attempts, oldest first, wherever the job is now (also after it succeeded)"""
        rows = store().failure_history(
            FailureFilter(ids=(job_id,)), limit=args["limit"], after_seq=args.get("after_seq")
        )
        if not rows and args.get("after_seq") is None:
            store().get_job(job_id)  # 404 for a job that does not exist (rather than an empty history)
        return rows


@blp.route("/locate")
class LocateJobs(MethodView):
    @blp.arguments(LocateSchema)
    @blp.response(200, LocatedSchema(many=True))
    def post(self, body: dict[str, Any]) -> Any:
        """Where jobs are now (hot, archive, dlq or gone), one row per id in the given order; reads only"""
        return store().locate(body["ids"])
