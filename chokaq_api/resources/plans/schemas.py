"""Bulk-decision plans: requests and responses."""

from __future__ import annotations

from typing import Any

import marshmallow as ma

from chokaq_api import fields
from chokaq_api.extensions import Schema
from chokaq_api.resources.dlq.schemas import DlqFilterSchema, all_flag, require_narrow
from chokaq_ops import validation
from chokaq_ops.filters import hot_filter
from chokaq_ops.storage.admin_ops import MAX_SPREAD_S
from chokaq_ops.storage.plan_ops import ACTIONS, MAX_PLAN_JOBS, PLAN_CHUNK

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

    @ma.validates_schema
    def selection(self, data: dict[str, Any], **kwargs: Any) -> None:
        if ("ids" in data) == ("filter" in data):
            raise ma.ValidationError("give either ids or filter", "ids")
        if data.get("edits") and data.get("action") != "resurrect":
            raise ma.ValidationError("only resurrect plans take edits", "edits")

    @ma.post_load
    def to_call(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        flt = data.get("filter")
        if flt is not None:
            schema = HotFilterSchema() if data["action"] == "cancel" else DlqFilterSchema()
            try:
                flt = schema.load(flt)
            except ma.ValidationError as exc:
                raise ma.ValidationError({"filter": exc.messages}) from None
        require_narrow(flt, data["all"], "ids" in data)
        return {
            "action": data["action"],
            "ids": data.get("ids"),
            "flt": flt,
            "edits": data.get("edits") or None,
            "max_jobs": data.get("max_jobs"),
            "chunk_size": data["chunk_size"],
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


class PlanListQuery(Schema):
    state = fields.choice(STATES)
    action = fields.choice(ACTIONS)


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


class ExecutedSchema(PlanSchema):
    executed = ma.fields.List(ma.fields.Nested(ChunkSchema), required=True)


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
