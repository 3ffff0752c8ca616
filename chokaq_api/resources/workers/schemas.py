"""Workers as seen from the hot table."""

from __future__ import annotations

import marshmallow as ma

from chokaq_api import fields


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
        required=True,
        metadata={"description": "Since its newest heartbeat (or claim), by the database clock"},
    )
    oldest_started_at = fields.UtcDateTime(allow_none=True)
    hosted = ma.fields.Boolean(
        required=True, metadata={"description": "Runs inside the API process that answered"}
    )
    concurrency = ma.fields.Integer(
        allow_none=True, metadata={"description": "Handler threads; known for the hosted worker only"}
    )
