"""Bulk-decision plans: requests and responses."""

from __future__ import annotations

import json
from typing import Any

import marshmallow as ma

from chokaq_api import fields
from chokaq_api.extensions import Schema
from chokaq_api.resources.dlq.schemas import DlqFilterSchema, all_flag, renew_flag, require_narrow
from chokaq_ops import validation
from chokaq_ops.filters import hot_filter, selection_spec
from chokaq_ops.storage.admin_ops import MAX_SPREAD_S
from chokaq_ops.storage.plan_ops import ACTIONS, LEASE_TTL_S, MAX_PLAN_JOBS, MAX_RATE, PLAN_CHUNK, PLAN_EVENTS

MAX_PLAN_IDS = 100_000
STATES = ("ready", "running", "done", "discarded")


class HotFilterSchema(Schema):
    """Pending or fetched hot jobs to cancel; every given field narrows the match (AND)."""

    status = fields.hot_status()
    queue = ma.fields.String(validate=ma.validate.Length(1, validation.MAX_QUEUE))
    type = ma.fields.String(validate=ma.validate.Length(1, validation.MAX_TYPE))
    tag = ma.fields.String(validate=ma.validate.Length(1, validation.MAX_TAGS))
    search = ma.fields.String(validate=ma.validate.Length(1, validation.MAX_SEARCH))

    @ma.post_load
    def to_filter(self, data: dict[str, Any], **kwargs: Any) -> Any:
        return hot_filter(data)


class EditSchema(Schema):
    payload = fields.Payload(metadata={"description": "Replacement payload; must be valid JSON."})
    tags = ma.fields.String(validate=ma.validate.Length(0, validation.MAX_TAGS))
    priority = ma.fields.Integer(
        validate=ma.validate.Range(validation.MIN_PRIORITY, validation.MAX_PRIORITY),
        metadata={"description": "Priority after resurrection (default 10)"},
    )


class CreatePlanSchema(Schema):
    """`ids` or `filter`, not both. The filter is a DLQ filter for resurrect and purge, a hot-job filter
    (status, queue, type, tag, search) for cancel."""

    action = fields.choice(ACTIONS, required=True)
    ids = ma.fields.List(
        ma.fields.String(validate=ma.validate.Length(1, validation.MAX_ID)),
        validate=ma.validate.Length(1, MAX_PLAN_IDS),
        metadata={"description": f"At most {MAX_PLAN_IDS} ids per plan; use a filter for more."},
    )
    filter = ma.fields.Dict(
        metadata={"description": "A DLQ filter (resurrect, purge) or hot-job filter (cancel)"}
    )
    max_jobs = ma.fields.Integer(
        validate=ma.validate.Range(1, MAX_PLAN_JOBS), metadata={"description": "Freeze at most N jobs"}
    )
    chunk_size = ma.fields.Integer(
        load_default=PLAN_CHUNK,
        validate=ma.validate.Range(1, PLAN_CHUNK),
        metadata={"description": "Jobs per transaction (default and maximum 1000)"},
    )
    edits = ma.fields.Dict(
        keys=ma.fields.String(validate=ma.validate.Length(1, validation.MAX_ID)),
        values=ma.fields.Nested(EditSchema),
        metadata={"description": "Resurrect plans: {job id: {payload?, tags?, priority?}}"},
    )
    all = all_flag()
    label = ma.fields.String(
        validate=ma.validate.Length(1, 200),
        metadata={
            "description": "Name the plan. While a plan with this label and action is unfinished, a "
            "request with the label resumes it (200, `resumed: true`) instead of freezing a new one, "
            "provided it asks for the same selection (else 409 naming both, field label); with the label "
            "alone (no ids or filter) it resumes it or answers 422"
        },
    )
    spec = ma.fields.Dict(
        keys=ma.fields.String(validate=ma.validate.Length(1, 50)),
        values=ma.fields.String(validate=ma.validate.Length(0, 2000)),
        validate=ma.validate.Length(max=30),
        metadata={
            "description": "The selection as the caller wrote it (the clients send it: `{queue: billing, "
            "failed_from: 24h}`), what a label is bound to; default: the filter fields as sent"
        },
    )
    new = ma.fields.Boolean(
        load_default=False,
        metadata={"description": "With a label: discard its unfinished plan (audited) and freeze a new one"},
    )
    renew = renew_flag()
    rate = ma.fields.Float(
        validate=ma.validate.Range(min=0, min_inclusive=False, max=MAX_RATE),
        metadata={"description": "The plan's pace in jobs per second, kept by every process working it"},
    )

    @ma.validates_schema
    def selection(self, data: dict[str, Any], **kwargs: Any) -> None:
        if "ids" in data and "filter" in data:
            raise ma.ValidationError("give either ids or filter", "ids")
        if "ids" not in data and "filter" not in data and "label" not in data:
            raise ma.ValidationError("give either ids or filter (or a label to resume its plan)", "ids")
        if data.get("edits") and data.get("action") != "resurrect":
            raise ma.ValidationError("only resurrect plans take edits", "edits")
        if data.get("new") and "label" not in data:
            raise ma.ValidationError("new goes with a label", "new")

    @ma.post_load
    def to_call(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        raw = data.get("filter")
        flt = raw
        if flt is not None:
            schema = HotFilterSchema() if data["action"] == "cancel" else DlqFilterSchema()
            try:
                flt = schema.load(flt)
            except ma.ValidationError as exc:
                raise ma.ValidationError({"filter": exc.messages}) from None
        if "ids" in data or flt is not None:
            require_narrow(flt, data["all"], "ids" in data)
        spec = data.get("spec")
        if spec is None and ("ids" in data or raw is not None):
            spec = selection_spec(ids=data.get("ids"), filters=raw, max_jobs=data.get("max_jobs"))
        return {
            "action": data["action"],
            "ids": data.get("ids"),
            "flt": flt,
            "edits": data.get("edits") or None,
            "max_jobs": data.get("max_jobs"),
            "chunk_size": data["chunk_size"],
            "label": data.get("label"),
            "spec": spec,
            "new": data["new"],
            "renew": data["renew"],
            "rate": data.get("rate"),
        }


class ExecuteSchema(Schema):
    max_chunks = ma.fields.Integer(
        validate=ma.validate.Range(1, MAX_PLAN_JOBS),
        metadata={"description": "Run at most this many chunks in this request (default: until done)"},
    )
    max_seconds = ma.fields.Float(
        load_default=30.0,
        validate=ma.validate.Range(min=0.1, max=600),
        metadata={"description": "Start no new chunk after this long; call again to continue (default 30)"},
    )
    spread = ma.fields.Float(
        load_default=0.0,
        validate=ma.validate.Range(0, MAX_SPREAD_S),
        metadata={"description": "Resurrect plans: each chunk's due times jittered over this many seconds"},
    )
    holder = ma.fields.String(
        validate=ma.validate.Length(1, 200),
        metadata={
            "description": "The run holding the plan's lease (POST /plans/{id}/lease); renewed by each chunk"
        },
    )


class LeaseSchema(Schema):
    holder = ma.fields.String(required=True, validate=ma.validate.Length(1, 200))
    ttl = ma.fields.Float(
        load_default=LEASE_TTL_S,
        validate=ma.validate.Range(1, 3600),
        metadata={
            "description": "Seconds the lease lasts unless renewed (a chunk run by the holder renews it)"
        },
    )
    take_from = ma.fields.String(
        validate=ma.validate.Length(1, 200),
        metadata={
            "description": "A holder the caller knows is dead (its process is gone): take its lease now"
        },
    )


class ReleaseSchema(Schema):
    holder = ma.fields.String(required=True, validate=ma.validate.Length(1, 200))


class ReleasedSchema(ma.Schema):
    released = ma.fields.Boolean(required=True, metadata={"description": "False: the holder held no lease"})


class PaceSchema(Schema):
    rate = ma.fields.Float(
        required=True,
        allow_none=True,
        validate=ma.validate.Range(min=0, min_inclusive=False, max=MAX_RATE),
        metadata={"description": "Jobs per second for every process working the plan; null: unpaced"},
    )


class NoteSchema(Schema):
    event = fields.choice(PLAN_EVENTS, required=True)
    details = ma.fields.Dict(
        load_default=dict,
        validate=lambda d: len(json.dumps(d, default=str)) <= 4000,
        metadata={
            "description": "What the run reports (a halt's reason, an interrupt's signal), as an object"
        },
    )


class NotedSchema(ma.Schema):
    plan_id = ma.fields.String(required=True)
    event = ma.fields.String(required=True)


class OrphanSchema(ma.Schema):
    class Meta:
        ordered = True

    plan_id = ma.fields.String(required=True)
    actor = ma.fields.String(required=True)
    state = ma.fields.String(required=True, metadata={"enum": ["freezing", "reclaiming"]})
    started_at = fields.UtcDateTime(required=True)
    beat_at = fields.UtcDateTime(required=True)
    items = ma.fields.Integer(required=True, metadata={"description": "plan_items rows it holds"})
    abandoned = ma.fields.Boolean(
        required=True, metadata={"description": "Silent past the grace: reclaimable"}
    )


class PlanListQuery(Schema):
    state = fields.choice(STATES)
    action = fields.choice(ACTIONS)
    label = ma.fields.String(validate=ma.validate.Length(1, 200))


class ChunkSchema(ma.Schema):
    chunk = ma.fields.Integer(required=True)
    claimed = ma.fields.Integer(required=True, metadata={"description": "Items of the chunk"})
    done = ma.fields.Integer(required=True, metadata={"description": "Jobs acted on"})
    skipped = ma.fields.Integer(
        required=True, metadata={"description": "Jobs no longer where the plan found them"}
    )


class PlanSchema(ma.Schema):
    class Meta:
        ordered = True

    id = ma.fields.String(required=True)
    action = ma.fields.String(required=True)
    actor = ma.fields.String(required=True, metadata={"description": "Who created the plan"})
    state = ma.fields.String(
        required=True, metadata={"enum": list(STATES), "description": "ready means a dry run: nothing moved"}
    )
    created_at = fields.UtcDateTime(required=True)
    updated_at = fields.UtcDateTime(required=True)
    finished_at = fields.UtcDateTime(allow_none=True)
    chunk_size = ma.fields.Integer(required=True)
    total = ma.fields.Integer(required=True, metadata={"description": "Jobs frozen in the plan"})
    chunks = ma.fields.Integer(required=True)
    chunks_done = ma.fields.Integer(required=True)
    done = ma.fields.Integer(required=True)
    skipped = ma.fields.Integer(required=True)
    remaining = ma.fields.Integer(required=True)
    by_reason = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.Integer())
    by_status = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.Integer())
    by_queue = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.Integer())
    by_type = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.Integer())
    sample = ma.fields.List(ma.fields.Dict(), metadata={"description": "Up to 10 jobs as frozen"})
    filter = ma.fields.Dict(allow_none=True)
    max_jobs = ma.fields.Integer(allow_none=True)
    edited = ma.fields.Integer(metadata={"description": "Jobs with a replacement payload, tags or priority"})
    approved_by = ma.fields.String(
        allow_none=True,
        metadata={"description": "Four-eyes: the token that approved the plan (not its creator)"},
    )
    approved_at = fields.UtcDateTime(allow_none=True)
    label = ma.fields.String(allow_none=True)
    spec = ma.fields.Dict(allow_none=True, metadata={"description": "The selection the label is bound to"})
    renew = ma.fields.Boolean(metadata={"description": "Resurrect plans: the jobs' retry budget is renewed"})
    rate = ma.fields.Float(allow_none=True, metadata={"description": "The plan's pace, jobs per second"})
    lease_holder = ma.fields.String(allow_none=True, metadata={"description": "The run working the plan"})
    lease_until = fields.UtcDateTime(allow_none=True)


class OpenedSchema(PlanSchema):
    resumed = ma.fields.Boolean(
        required=True, metadata={"description": "True: the label's unfinished plan, resumed (nothing frozen)"}
    )


class ExecutedSchema(PlanSchema):
    executed = ma.fields.List(ma.fields.Nested(ChunkSchema), required=True)
    wait_s = ma.fields.Float(
        allow_none=True,
        metadata={"description": "The plan's pace let no chunk start yet: ask again after this many seconds"},
    )


class PlanItemSchema(ma.Schema):
    class Meta:
        ordered = True

    id = ma.fields.String(required=True, metadata={"description": "The job's id"})
    chunk = ma.fields.Integer(required=True)
    ord = ma.fields.Integer(required=True)
    done_at = fields.UtcDateTime(allow_none=True)
    outcome = ma.fields.String(allow_none=True, metadata={"enum": ["done", "skipped", None]})
    payload = ma.fields.String(allow_none=True)
    tags = ma.fields.String(allow_none=True)
    priority = ma.fields.Integer(allow_none=True)


class OutcomesQuery(Schema):
    from_chunk = ma.fields.Integer(
        validate=ma.validate.Range(min=0), metadata={"description": "First chunk to report (default 0)"}
    )
    to_chunk = ma.fields.Integer(
        validate=ma.validate.Range(min=0), metadata={"description": "Last chunk to report (default the last)"}
    )


class OutcomesSchema(ma.Schema):
    class Meta:
        ordered = True

    plan_id = ma.fields.String(required=True)
    from_chunk = ma.fields.Integer(required=True)
    to_chunk = ma.fields.Integer(required=True)
    acted = ma.fields.Integer(
        required=True, metadata={"description": "Jobs the plan resurrected in these chunks"}
    )
    waiting = ma.fields.Integer(required=True, metadata={"description": "Pending, not tried since"})
    retrying = ma.fields.Integer(required=True, metadata={"description": "Pending after a failed attempt"})
    running = ma.fields.Integer(required=True, metadata={"description": "Fetched or processing"})
    succeeded = ma.fields.Integer(required=True, metadata={"description": "In the archive"})
    failed = ma.fields.Integer(required=True, metadata={"description": "Back in the dead-letter queue"})
    gone = ma.fields.Integer(required=True, metadata={"description": "In no table (purged since)"})
    failed_by_reason = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.Integer(), required=True)
    settled = ma.fields.Integer(required=True, metadata={"description": "succeeded + failed"})
    failure_rate = ma.fields.Float(
        required=True, allow_none=True, metadata={"description": "failed / settled; null before any settled"}
    )
