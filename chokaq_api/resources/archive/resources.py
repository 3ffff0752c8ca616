"""The archive: succeeded jobs, listed, fetched and purged by age."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from flask.views import MethodView

from chokaq_api.auth import actor
from chokaq_api.extensions import Blueprint, store
from chokaq_api.resources.archive.schemas import ArchiveListQuery, ArchivePurgedSchema, ArchivePurgeSchema
from chokaq_api.resources.jobs.schemas import JobSchema
from chokaq_ops import errors

URL = "/archive"
blp = Blueprint("archive", __name__, description="Succeeded jobs.")


def purge(older_than: datetime | timedelta) -> dict[str, Any]:
    """Purge archive rows finished before a timestamp, or before now (database clock) minus an age."""
    now = store().now()
    cutoff = now - older_than if isinstance(older_than, timedelta) else older_than
    if cutoff > now:
        raise errors.ValidationError("older_than is in the future", field="older_than")
    result = store().purge_archive(cutoff, actor=actor())
    return {"purged": result.count, "batches": result.batches, "cutoff": cutoff}


@blp.route("")
class Archive(MethodView):
    @blp.arguments(ArchiveListQuery, location="query")
    @blp.response(200, JobSchema(many=True))
    @blp.paginate()
    def get(self, args: dict[str, Any], pagination_parameters: Any) -> Any:
        """List succeeded jobs (newest first by default)"""
        page = store().list_archive(
            **args, page=pagination_parameters.page, page_size=pagination_parameters.page_size
        )
        pagination_parameters.item_count = page.total
        return page.items


@blp.route("/purge")
class Purge(MethodView):
    @blp.arguments(ArchivePurgeSchema)
    @blp.response(200, ArchivePurgedSchema)
    def post(self, body: dict[str, Any]) -> Any:
        """Delete archived jobs finished before `older_than`, in transactions of Storage.CleanupBatchSize"""
        return purge(body["older_than"])


@blp.route("/<job_id>")
class ArchivedJob(MethodView):
    @blp.response(200, JobSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    def get(self, job_id: str) -> Any:
        """One succeeded job"""
        job = store().get_job(job_id)
        if job["location"] != "archive":
            raise errors.JobNotFound(f"job {job_id} is in {job['location']}, not in the archive")
        return job
