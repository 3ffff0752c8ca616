"""Dead-letter queue requests and responses."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import astuple
from typing import Any

import marshmallow as ma

from chokaq_api import fields
from chokaq_api.extensions import Schema
from chokaq_api.resources.jobs.schemas import ORDERS, JobSchema
from chokaq_ops import errors, validation
from chokaq_ops import filters as grammar
from chokaq_ops.filters import TIME_HELP
from chokaq_ops.models import DlqFilter
from chokaq_ops.records import DeadJob
from chokaq_ops.storage.admin_ops import MAX_SPREAD_S
from chokaq_ops.storage.read_ops import DLQ_SORTS

ALL_DESCRIPTION = (
    "Must be true for an empty filter: a bulk change of every job is never the default of a forgotten field."
)


def all_flag() -> ma.fields.Boolean:
    return ma.fields.Boolean(load_default=False, metadata={"description": ALL_DESCRIPTION})


def require_narrow(flt: Any, everything: bool, ids_given: bool) -> None:
    """An empty filter means every job only with an explicit `all: true` (and `all` goes with a filter)."""
    if everything and ids_given:
        raise ma.ValidationError("all: true goes with a filter, not with ids", "all")
    if flt is not None and not everything and all(v is None for v in astuple(flt)):
        raise ma.ValidationError(
            "the filter sets no field: narrow it, or send all: true to mean every job", "filter"
        )


def _ids() -> ma.fields.List:
    return ma.fields.List(
        ma.fields.String(validate=ma.validate.Length(1, validation.MAX_ID)),
        validate=ma.validate.Length(1, validation.MAX_BULK_IDS),
        metadata={"description": f"At most {validation.MAX_BULK_IDS} ids; use a filter for more."},
    )


_LIST = "Comma-separated values (or a list in a JSON body); a value starting with ! excludes it."


def _time_text(description: str) -> fields.GrammarText:
    return fields.GrammarText(max_len=100, metadata={"description": f"{description}: {TIME_HELP}."})


def to_dlq_filter(data: dict[str, Any]) -> DlqFilter:
    try:
        return grammar.dlq_filter(data)
    except errors.ValidationError as exc:
        raise fields.grammar_error(exc) from None


class DlqFilterSchema(Schema):
    """Every given field narrows the match (AND). The one filter grammar (docs/failures.md): lists, ! to
    exclude, ids, relative times; windows are half-open [from, to); a time without a zone is refused."""

    ids = fields.GrammarText(metadata={"description": "Job ids, comma-separated."})
    queue = fields.GrammarText(metadata={"description": f"Queues. {_LIST}"})
    type = fields.GrammarText(metadata={"description": f"Job types. {_LIST}"})
    reason = fields.GrammarText(metadata={"description": f"Failure reasons by name or number. {_LIST}"})
    fingerprint = fields.GrammarText(metadata={"description": "Error groups, comma-separated."})
    search = ma.fields.String(
        validate=ma.validate.Length(1, validation.MAX_SEARCH),
        metadata={"description": "Substring of id, type, tags or error details."},
    )
    tag = ma.fields.String(validate=ma.validate.Length(1, validation.MAX_TAGS))
    failed_from = _time_text("Failed at or after")
    failed_to = _time_text("Failed before (exclusive)")
    created_from = _time_text("Created at or after")
    created_to = _time_text("Created before (exclusive)")

    @ma.post_load
    def to_filter(self, data: dict[str, Any], **kwargs: Any) -> Any:
        return to_dlq_filter(data)


class DlqListQuery(DlqFilterSchema):
    sort = fields.choice(DLQ_SORTS, load_default="failed_at")
    order = fields.choice(ORDERS, load_default="desc")

    @ma.post_load
    def to_filter(self, data: dict[str, Any], **kwargs: Any) -> Any:
        sort, order = data.pop("sort"), data.pop("order")
        return {"flt": to_dlq_filter(data), "sort": sort, "descending": order == "desc"}


class SummaryQuery(DlqFilterSchema):
    top = ma.fields.Integer(
        load_default=10, validate=ma.validate.Range(1, 100), metadata={"description": "Error groups to show"}
    )

    @ma.post_load
    def to_filter(self, data: dict[str, Any], **kwargs: Any) -> Any:
        top = data.pop("top")
        return {"flt": to_dlq_filter(data), "top": top}


def renew_flag() -> ma.fields.Boolean:
    return ma.fields.Boolean(
        load_default=True,
        metadata={
            "description": "Renew each job's retry budget (default): attempts and the lifetime clock "
            "(Retry.MaxJobAge) restart at the resurrect. false keeps the clock at the job's creation: a job "
            "older than MaxJobAge then dies as RetryLifetimeExpired on its first failure."
        },
    )


class SelectionSchema(Schema):
    """`ids` or `filter`, not both."""

    ids = _ids()
    filter = ma.fields.Nested(DlqFilterSchema)

    @ma.validates_schema
    def ids_or_filter(self, data: dict[str, Any], **kwargs: Any) -> None:
        if ("ids" in data) == ("filter" in data):
            raise ma.ValidationError("give either ids or filter", "ids")


class PreviewSchema(SelectionSchema):
    sample = ma.fields.Integer(load_default=10, validate=ma.validate.Range(0, 100))
    max_jobs = ma.fields.Integer(
        validate=ma.validate.Range(1, 100_000_000),
        metadata={"description": "Preview the operation capped at this many jobs: every count is of them"},
    )
    renew = ma.fields.Boolean(
        metadata={
            "description": "Preview a resurrect that renews (true) or keeps (false) the jobs' retry budget; "
            "with false, `past_lifetime` and `warnings` say how many would die on their first failure"
        }
    )

    @ma.post_load
    def to_call(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {
            "ids": data.get("ids"),
            "flt": data.get("filter"),
            "sample": data["sample"],
            "max_jobs": data.get("max_jobs"),
            "renew": data.get("renew"),
        }


class BulkSchema(SelectionSchema):
    """Audit rows name the token; a plan id is never taken from a request (plans run through
    POST /plans/{id}/execute), so `plan_id` is an unknown field here (422)."""

    max_jobs = ma.fields.Integer(
        validate=ma.validate.Range(1, 100_000_000), metadata={"description": "Stop after this many jobs"}
    )
    all = all_flag()

    @ma.validates_schema
    def narrow_filter(self, data: dict[str, Any], **kwargs: Any) -> None:
        require_narrow(data.get("filter"), data.get("all", False), "ids" in data)

    @ma.post_load
    def to_call(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {"ids": data.get("ids"), "flt": data.get("filter"), "max_jobs": data.get("max_jobs")}


class BulkResurrectSchema(BulkSchema):
    """A bulk resurrect can spread the jobs' due times, so still-failing jobs do not come back as one wave."""

    spread = ma.fields.Float(
        validate=ma.validate.Range(0, MAX_SPREAD_S),
        metadata={
            "description": "Seconds: due times jittered uniformly over this window (default 0: due now)"
        },
    )
    rate = ma.fields.Float(
        validate=ma.validate.Range(min=0, min_inclusive=False),
        metadata={
            "description": "Jobs per second: the window is widened to as long as this rate needs for all of "
            "them (due-time pacing; the call itself returns at once)"
        },
    )

    renew = renew_flag()

    @ma.post_load
    def to_call(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {
            "ids": data.get("ids"),
            "flt": data.get("filter"),
            "max_jobs": data.get("max_jobs"),
            "spread": data.get("spread"),
            "rate": data.get("rate"),
            "renew": data["renew"],
        }


class ResurrectedSchema(ma.Schema):
    resurrected = ma.fields.Integer(required=True, metadata={"description": "Jobs moved back to hot"})
    batches = ma.fields.Integer(
        required=True, metadata={"description": "Committed transactions (≤ 1000 each)"}
    )


class PurgedSchema(ma.Schema):
    purged = ma.fields.Integer(required=True, metadata={"description": "Rows deleted"})
    batches = ma.fields.Integer(required=True, metadata={"description": "Committed transactions"})


class PreviewResultSchema(ma.Schema):
    matched = ma.fields.Integer(required=True)
    sample_ids = ma.fields.List(ma.fields.String(), required=True)
    by_reason = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.Integer(), required=True)
    by_queue = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.Integer(), required=True)
    by_type = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.Integer(), required=True)
    renew = ma.fields.Boolean(metadata={"description": "The renew asked for (absent when not asked)"})
    past_lifetime = ma.fields.Integer(
        metadata={"description": "renew=false: jobs older than Retry.MaxJobAge (die on their first failure)"}
    )
    warnings = ma.fields.List(ma.fields.String(), metadata={"description": "What the operator should know"})


class BreakdownSchema(ma.Schema):
    value = ma.fields.String(required=True)
    count = ma.fields.Integer(required=True)
    first_failed_at = fields.UtcDateTime(allow_none=True)
    last_failed_at = fields.UtcDateTime(allow_none=True)


class ErrorGroupSchema(ma.Schema):
    fingerprint = ma.fields.String(allow_none=True)
    failure_reason = ma.fields.String(required=True)
    exception_type = ma.fields.String(allow_none=True)
    template = ma.fields.String(allow_none=True, metadata={"description": "Normalised error message"})
    frame = ma.fields.String(allow_none=True, metadata={"description": "Top stack frame"})
    count = ma.fields.Integer(required=True)
    first_seen = fields.UtcDateTime(allow_none=True)
    last_seen = fields.UtcDateTime(allow_none=True)
    example_id = ma.fields.String(allow_none=True)
    example_queue = ma.fields.String(allow_none=True)
    example_type = ma.fields.String(allow_none=True)


class SummarySchema(ma.Schema):
    total = ma.fields.Integer(required=True)
    by_reason = ma.fields.List(ma.fields.Nested(BreakdownSchema), required=True)
    by_queue = ma.fields.List(ma.fields.Nested(BreakdownSchema), required=True)
    by_type = ma.fields.List(ma.fields.Nested(BreakdownSchema), required=True)
    top_errors = ma.fields.List(
        ma.fields.Nested(ErrorGroupSchema),
        required=True,
        metadata={"description": "Largest error groups over the newest 5000 matching dead jobs"},
    )


class DeadJobSchema(JobSchema):
    """A dead job with the evidence an operator needs to judge it (for zombies especially)."""

    runtime_seconds = ma.fields.Float(
        dump_only=True,
        allow_none=True,
        metadata={"description": "Handler run time: duration_ms, else failed_at - started_at"},
    )
    heartbeat_age_seconds = ma.fields.Float(
        dump_only=True,
        allow_none=True,
        metadata={"description": "failed_at - heartbeat_at: how long the job was silent"},
    )

    def derived(self, job: Mapping[str, Any]) -> dict[str, Any]:
        return job.evidence() if isinstance(job, DeadJob) else {}


class EditDeadSchema(Schema):
    payload = fields.Payload(metadata={"description": "New payload; must be valid JSON."})
    tags = ma.fields.String(validate=ma.validate.Length(0, validation.MAX_TAGS))

    @ma.validates_schema
    def something(self, data: dict[str, Any], **kwargs: Any) -> None:
        if not data:
            raise ma.ValidationError("give payload or tags", "payload")


class ResurrectOneSchema(Schema):
    renew = renew_flag()
    payload = fields.Payload(metadata={"description": "Replacement payload; must be valid JSON."})
    tags = ma.fields.String(validate=ma.validate.Length(0, validation.MAX_TAGS))
    priority = ma.fields.Integer(
        validate=ma.validate.Range(validation.MIN_PRIORITY, validation.MAX_PRIORITY),
        metadata={"description": "Default 10"},
    )
