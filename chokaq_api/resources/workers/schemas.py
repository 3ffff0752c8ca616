"""Workers: the registry joined with the hot table."""

from __future__ import annotations

import marshmallow as ma

from chokaq_api import fields
from chokaq_api.extensions import Schema
from chokaq_ops.storage.registry_ops import MAX_CONCURRENCY


class WorkerSchema(ma.Schema):
    class Meta:
        ordered = True

    worker_id = ma.fields.String(required=True)
    fetched = ma.fields.Integer(required=True, metadata={"description": "Claimed jobs not started yet"})
    processing = ma.fields.Integer(required=True, metadata={"description": "Jobs running now"})
    queues = ma.fields.List(
        ma.fields.String(), required=True, metadata={"description": "Of its claimed jobs"}
    )
    last_heartbeat_at = fields.UtcDateTime(allow_none=True, metadata={"description": "Newest job heartbeat"})
    silent_seconds = ma.fields.Float(
        allow_none=True,
        metadata={"description": "Since its newest job heartbeat (or claim), by the database clock"},
    )
    oldest_started_at = fields.UtcDateTime(allow_none=True)
    hosted = ma.fields.Boolean(
        required=True, metadata={"description": "Runs inside the API process that answered"}
    )
    registered = ma.fields.Boolean(required=True, metadata={"description": "Has a registry row"})
    host = ma.fields.String(allow_none=True)
    pid = ma.fields.Integer(allow_none=True)
    serves = ma.fields.List(
        ma.fields.String(), required=True, metadata={"description": "Queues it is configured for; empty: all"}
    )
    concurrency = ma.fields.Integer(allow_none=True, metadata={"description": "Handler slots now"})
    desired_concurrency = ma.fields.Integer(
        allow_none=True, metadata={"description": "An operator's target, applied at its next heartbeat"}
    )
    running = ma.fields.Integer(
        allow_none=True, metadata={"description": "Handlers running at its last beat"}
    )
    prefetched = ma.fields.Integer(allow_none=True)
    started_at = fields.UtcDateTime(allow_none=True)
    last_seen_at = fields.UtcDateTime(allow_none=True, metadata={"description": "Its last registry beat"})
    seen_seconds = ma.fields.Float(allow_none=True, metadata={"description": "Since last_seen_at"})
    alive = ma.fields.Boolean(
        allow_none=True,
        metadata={
            "description": "Seen within Health.WorkerHeartbeatTimeout; false: gone (crashed or killed)"
        },
    )


class WorkerPatchSchema(Schema):
    concurrency = ma.fields.Integer(
        required=True,
        strict=True,
        validate=ma.validate.Range(1, MAX_CONCURRENCY),
        metadata={"description": "Handler slots; takes effect within one heartbeat"},
    )
