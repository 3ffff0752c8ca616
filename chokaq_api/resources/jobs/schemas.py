"""Job representations (shared by jobs, dlq and archive) and the hot-job requests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import marshmallow as ma

from chokaq_api import fast_dump, fields
from chokaq_api.extensions import Schema
from chokaq_ops import validation
from chokaq_ops.filters import hot_filter
from chokaq_ops.models import FailureReason, NewJob
from chokaq_ops.records import Record
from chokaq_ops.storage.read_ops import HOT_SORTS

STATUSES = ("pending", "fetched", "processing", "succeeded", "dead")
ORDERS = ("asc", "desc")


def _str(**kw: Any) -> ma.fields.String:
    return ma.fields.String(allow_none=True, **kw)


def _time(**kw: Any) -> fields.UtcDateTime:
    return fields.UtcDateTime(allow_none=True, **kw)


class JobSchema(ma.Schema):
    """A job wherever it lives. Every field is present; those that do not apply to the job's `location`
    are null (e.g. `failed_at` of a hot job)."""

    class Meta:
        ordered = True

    id = ma.fields.String(required=True)
    location = ma.fields.String(
        required=True, metadata={"enum": ["hot", "archive", "dlq"], "description": "hot, archive or dlq"}
    )
    status = ma.fields.String(
        required=True,
        metadata={
            "enum": list(STATUSES),
            "description": "pending/fetched/processing in hot; succeeded; dead",
        },
    )
    queue = ma.fields.String(required=True)
    type = ma.fields.String(required=True)
    payload = _str(metadata={"description": "The stored JSON text (it may be invalid JSON)."})
    tags = _str(metadata={"description": "Comma-separated tags."})
    priority = ma.fields.Integer(required=True, metadata={"description": "Higher runs first."})
    attempt_count = ma.fields.Integer(required=True)
    idempotency_key = _str()
    worker_id = _str()
    worker_gone = ma.fields.Boolean(
        allow_none=True,
        metadata={
            "description": "Null unless a worker holds the job. True: a fetched or processing job whose "
            "worker's registry row is older than "
            "Health.WorkerHeartbeatTimeout: the worker died. Its fetched jobs go back to pending at the next "
            "sweep; processing ones reach the DLQ as Zombie only after the zombie timeout."
        },
    )
    heartbeat_at = _time()
    scheduled_at = _time()
    due_at = _time(metadata={"description": "When a hot job becomes eligible to run."})
    created_at = _time()
    started_at = _time()
    finished_at = _time()
    failed_at = _time()
    duration_ms = ma.fields.Float(allow_none=True)
    created_by = _str()
    last_modified_by = _str()
    failure_reason = _str(metadata={"enum": [*(r.name for r in FailureReason), None]})
    error_details = _str(metadata={"description": "The full error with traceback (DLQ)."})
    fingerprint = _str(metadata={"description": "Error group id (DLQ); filter GET /dlq with it."})
    last_error = _str(metadata={"description": "The error of the last failed attempt of a retrying job."})
    failure_count = ma.fields.Integer(
        allow_none=True,
        metadata={
            "description": "Archive: failed attempts before the success (see GET /jobs/{id}/failures)."
        },
    )
    trace_context = _str(
        metadata={
            "description": "The producer's W3C trace context as JSON (traceparent, tracestate), kept through "
            "archive, DLQ and resurrect; null outside a trace or without OpenTelemetry (docs/tracing.md)."
        }
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Pages of jobs are dumped without marshmallow's per-field calls (chokaq_api/fast_dump.py).
        self._fast = fast_dump.compile_dumper(self, "every_field")

    @ma.pre_dump
    def every_field(self, job: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
        values = job.to_dict() if isinstance(job, Record) else job
        return {name: values.get(name) for name in self.fields} | self.derived(job)

    def dump(self, obj: Any, *, many: bool | None = None) -> Any:
        fast = self._fast
        if fast is None:
            return super().dump(obj, many=many)
        if self.many if many is None else many:
            return [fast(self.every_field(job)) for job in obj]
        return fast(self.every_field(obj))

    def derived(self, job: Mapping[str, Any]) -> dict[str, Any]:
        """Fields a view computes from the job (none here)."""
        return {}


class JobListQuery(Schema):
    status = fields.hot_status()
    queue = ma.fields.String(validate=ma.validate.Length(1, validation.MAX_QUEUE))
    type = ma.fields.String(validate=ma.validate.Length(1, validation.MAX_TYPE))
    tag = ma.fields.String(validate=ma.validate.Length(1, validation.MAX_TAGS))
    search = ma.fields.String(
        validate=ma.validate.Length(1, validation.MAX_SEARCH),
        metadata={"description": "Substring of id, type or tags."},
    )
    sort = fields.choice(HOT_SORTS, load_default="created_at")
    order = fields.choice(ORDERS, load_default="desc")

    @ma.post_load
    def to_call(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        sort, order = data.pop("sort"), data.pop("order")
        return {"flt": hot_filter(data), "sort": sort, "descending": order == "desc"}


class EnqueueSchema(Schema):
    type = ma.fields.String(required=True, validate=ma.validate.Length(1, validation.MAX_TYPE))
    payload = fields.Payload(
        load_default="{}",
        metadata={"description": "JSON text as a string, or any JSON value (serialized). Default {}."},
    )
    queue = ma.fields.String(load_default="default", validate=ma.validate.Length(1, validation.MAX_QUEUE))
    priority = ma.fields.Integer(
        load_default=10, validate=ma.validate.Range(validation.MIN_PRIORITY, validation.MAX_PRIORITY)
    )
    tags = ma.fields.String(validate=ma.validate.Length(0, validation.MAX_TAGS))
    idempotency_key = ma.fields.String(validate=ma.validate.Length(1, validation.MAX_KEY))
    delay_seconds = ma.fields.Float(validate=ma.validate.Range(0, 10 * 365 * 86400))
    scheduled_at = fields.UtcDateTime()
    id = ma.fields.String(
        validate=ma.validate.Length(1, validation.MAX_ID),
        metadata={"description": "Optional; a sortable id is generated when absent. A used id answers 409."},
    )

    @ma.validates_schema
    def one_schedule(self, data: dict[str, Any], **kwargs: Any) -> None:
        if "delay_seconds" in data and "scheduled_at" in data:
            raise ma.ValidationError("give delay_seconds or scheduled_at, not both", "delay_seconds")

    @ma.post_load
    def to_job(self, data: dict[str, Any], **kwargs: Any) -> NewJob:
        return NewJob(**data)


class EditJobSchema(Schema):
    payload = fields.Payload(metadata={"description": "New payload: JSON text or any JSON value."})
    tags = ma.fields.String(validate=ma.validate.Length(0, validation.MAX_TAGS))
    priority = ma.fields.Integer(validate=ma.validate.Range(validation.MIN_PRIORITY, validation.MAX_PRIORITY))

    @ma.validates_schema
    def something(self, data: dict[str, Any], **kwargs: Any) -> None:
        if not data:
            raise ma.ValidationError("give payload, tags or priority", "payload")


class CancelSchema(Schema):
    ids = ma.fields.List(
        ma.fields.String(validate=ma.validate.Length(1, validation.MAX_ID)),
        required=True,
        validate=ma.validate.Length(1, validation.MAX_BULK_IDS),
    )


class CancelResultSchema(ma.Schema):
    cancelled = ma.fields.List(ma.fields.String(), required=True, metadata={"description": "Now in the DLQ"})
    skipped = ma.fields.List(
        ma.fields.String(), required=True, metadata={"description": "Processing, or not a hot job"}
    )
