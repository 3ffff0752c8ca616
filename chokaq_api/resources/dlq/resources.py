"""The dead-letter queue: list, summarise, inspect, edit, resurrect and purge dead jobs."""

from __future__ import annotations

from typing import Any

from flask.views import MethodView

from chokaq_api.auth import actor, require_plan_below_threshold
from chokaq_api.extensions import Blueprint, ctx, store
from chokaq_api.resources.dlq.schemas import (
    BulkResurrectSchema,
    BulkSchema,
    DeadJobSchema,
    DlqListQuery,
    EditDeadSchema,
    PreviewResultSchema,
    PreviewSchema,
    PurgedSchema,
    ResurrectedSchema,
    ResurrectOneSchema,
    SummaryQuery,
    SummarySchema,
)
from chokaq_api.resources.jobs.schemas import JobSchema
from chokaq_ops import errors, records

URL = "/dlq"
blp = Blueprint("dlq", __name__, description="Dead jobs: find, judge, fix, resurrect or purge them.")


def dead_job(job_id: str) -> records.DeadJob:
    job = store().get_job(job_id)
    if not isinstance(job, records.DeadJob):
        raise errors.JobNotFound(f"job {job_id} is in {job.location}, not in the dead-letter queue")
    return job


def bulk_size(body: dict[str, Any]) -> int:
    """How many jobs a bulk call would touch: its ids, or what its filter matches now (capped by max_jobs)."""
    if body["ids"] is not None:
        n = len(body["ids"])
    else:
        n = store().preview_dlq(flt=body["flt"], sample=0)["matched"]
    return min(n, body["max_jobs"]) if body["max_jobs"] else n


@blp.route("")
class Dlq(MethodView):
    @blp.arguments(DlqListQuery, location="query")
    @blp.response(200, DeadJobSchema(many=True))
    @blp.paginate()
    def get(self, args: dict[str, Any], pagination_parameters: Any) -> Any:
        """List dead jobs (newest failure first by default)"""
        page = store().list_dlq(
            **args, page=pagination_parameters.page, page_size=pagination_parameters.page_size
        )
        pagination_parameters.item_count = page.total
        return page.items


@blp.route("/summary")
class Summary(MethodView):
    @blp.arguments(SummaryQuery, location="query")
    @blp.response(200, SummarySchema)
    def get(self, args: dict[str, Any]) -> Any:
        """Counts by reason, queue and type, and the top error groups (fingerprints)"""
        return store().dlq_summary(**args)


@blp.route("/preview")
class Preview(MethodView):
    @blp.arguments(PreviewSchema)
    @blp.response(200, PreviewResultSchema)
    def post(self, body: dict[str, Any]) -> Any:
        """What a bulk resurrect or purge of `ids` or `filter` would touch; changes nothing"""
        return store().preview_dlq(**body, max_job_age=ctx().settings.retry.max_job_age)


@blp.route("/resurrect")
class ResurrectMany(MethodView):
    @blp.arguments(BulkResurrectSchema)
    @blp.response(200, ResurrectedSchema)
    def post(self, body: dict[str, Any]) -> Any:
        """Resurrect dead jobs by `ids` or `filter`, in transactions of at most 1000 jobs; `spread` / `rate`
        spread their due times so still-failing jobs do not retry in one synchronized wave"""
        require_plan_below_threshold(bulk_size(body), "resurrect")
        result = store().resurrect_many(actor=actor(), **body)
        return {"resurrected": result.count, "batches": result.batches}


@blp.route("/purge")
class Purge(MethodView):
    @blp.arguments(BulkSchema)
    @blp.response(200, PurgedSchema)
    def post(self, body: dict[str, Any]) -> Any:
        """Delete dead jobs by `ids` or `filter` for good, in transactions of Storage.CleanupBatchSize"""
        require_plan_below_threshold(bulk_size(body), "purge")
        result = store().purge_dlq(actor=actor(), **body)
        return {"purged": result.count, "batches": result.batches}


@blp.route("/<job_id>")
class DeadJob(MethodView):
    @blp.response(200, DeadJobSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    def get(self, job_id: str) -> Any:
        """One dead job with its error details and heartbeat evidence"""
        return dead_job(job_id)

    @blp.arguments(EditDeadSchema)
    @blp.response(200, DeadJobSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    @blp.alt_response(409, response="CONFLICT", description="The job is not in the DLQ.")
    def patch(self, body: dict[str, Any], job_id: str) -> Any:
        """Edit a dead job's payload (valid JSON only) or tags in place"""
        return store().edit_dlq(job_id, actor=actor(), **body)


@blp.route("/<job_id>/resurrect")
class Resurrect(MethodView):
    @blp.arguments(ResurrectOneSchema, required=False)
    @blp.response(200, JobSchema, description="The job, back in hot as pending.")
    @blp.alt_response(404, response="NOT_FOUND")
    @blp.alt_response(409, response="CONFLICT", description="The job is not in the DLQ.")
    def post(self, body: dict[str, Any], job_id: str) -> Any:
        """Move a dead job back to the queue, optionally with a new payload, tags or priority"""
        return store().resurrect(job_id, actor=actor(), **body)
