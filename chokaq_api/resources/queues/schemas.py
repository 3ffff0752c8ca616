"""Queue control and per-queue statistics."""

from __future__ import annotations

from typing import Any

import marshmallow as ma

from chokaq_api import fields
from chokaq_api.extensions import Schema, ctx
from chokaq_ops import validation


class QueueSchema(ma.Schema):
    class Meta:
        ordered = True

    name = ma.fields.String(required=True)
    paused = ma.fields.Boolean(required=True, metadata={"description": "Workers fetch nothing from it"})
    active = ma.fields.Boolean(required=True, metadata={"description": "false: switched off (admin)"})
    zombie_timeout_seconds = ma.fields.Integer(
        allow_none=True, metadata={"description": "The queue's database override; null: none"}
    )
    effective_zombie_timeout_seconds = ma.fields.Method(
        "effective_zombie_timeout",
        metadata={
            "type": "number",
            "description": "The timeout the sweep uses: the override, else "
            "Queues.<name>.ZombieTimeoutSeconds, else Recovery.ProcessingZombieTimeout",
        },
    )
    max_workers = ma.fields.Integer(
        allow_none=True, metadata={"description": "Cap on fetched + processing jobs across all workers"}
    )
    pending = ma.fields.Integer(required=True)
    fetched = ma.fields.Integer(required=True)
    processing = ma.fields.Integer(required=True)
    due_pending = ma.fields.Integer(required=True, metadata={"description": "Pending jobs that are due"})
    stranded = ma.fields.Integer(
        required=True,
        metadata={
            "description": "Fetched by a worker not seen within Health.WorkerHeartbeatTimeout (it died)"
        },
    )
    max_lag_seconds = ma.fields.Float(
        required=True,
        metadata={"description": "Wait of the oldest due job no live worker runs (pending or stranded)"},
    )
    avg_lag_seconds = ma.fields.Float(required=True)
    enqueued_total = ma.fields.Integer(required=True)
    succeeded_total = ma.fields.Integer(required=True)
    failed_total = ma.fields.Integer(required=True, metadata={"description": "Jobs now in the DLQ"})
    retried_total = ma.fields.Integer(required=True)
    last_activity_at = fields.UtcDateTime(allow_none=True)
    updated_at = fields.UtcDateTime(allow_none=True)

    def effective_zombie_timeout(self, row: dict[str, Any]) -> float:
        if row.get("zombie_timeout_seconds") is not None:
            return float(row["zombie_timeout_seconds"])
        return ctx().settings.zombie_timeout_for(row["name"])


class QueuePatchSchema(Schema):
    """Only the given fields change; null clears an override (zombie_timeout_seconds, max_workers)."""

    paused = ma.fields.Boolean(metadata={"description": "Pause or resume (operator)"})
    active = ma.fields.Boolean(metadata={"description": "Switch the queue on or off (admin)"})
    zombie_timeout_seconds = ma.fields.Integer(
        allow_none=True,
        validate=ma.validate.Range(1, validation.MAX_ZOMBIE_TIMEOUT),
        metadata={"description": "Must exceed 3 x Execution.HeartbeatIntervalMax (admin); null clears"},
    )
    max_workers = ma.fields.Integer(
        allow_none=True,
        validate=ma.validate.Range(1, validation.MAX_MAX_WORKERS),
        metadata={"description": "Cluster-wide cap (admin); null clears"},
    )

    @ma.validates_schema
    def something(self, data: dict[str, Any], **kwargs: Any) -> None:
        if not data:
            raise ma.ValidationError("give paused, active, zombie_timeout_seconds or max_workers", "paused")
