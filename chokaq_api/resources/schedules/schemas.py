"""Recurring schedules (docs/schedules.md)."""

from __future__ import annotations

from typing import Any

import marshmallow as ma

from chokaq_api import fields
from chokaq_api.extensions import Schema
from chokaq_ops import validation
from chokaq_ops.schedules import MAX_CATCH_UP, MAX_GRACE_S, MAX_NAME, MAX_TAGS, MISFIRE_POLICIES, SOURCES

OUTCOMES = ("pending", "fetched", "processing", "succeeded", "dead", "gone")
KINDS = ("cron", "manual")


def _outcome(**kw: Any) -> ma.fields.String:
    return ma.fields.String(
        allow_none=True,
        metadata={
            "enum": [*OUTCOMES, None],
            "description": "Where the job is now: pending, fetched or processing (hot), succeeded "
            "(archive), dead (DLQ), gone (purged by retention); null before the first run",
            **kw,
        },
    )


class ScheduleSchema(ma.Schema):
    class Meta:
        ordered = True

    name = ma.fields.String(required=True)
    type = ma.fields.String(required=True, metadata={"description": "The job type each tick enqueues"})
    cron = ma.fields.String(
        required=True,
        metadata={"description": "Five crontab fields, six with seconds first, or @hourly/@daily/..."},
    )
    tz = ma.fields.String(required=True, metadata={"description": "IANA time zone of the expression"})
    payload = ma.fields.String(allow_none=True, metadata={"description": "Each job's payload (JSON text)"})
    queue = ma.fields.String(required=True)
    priority = ma.fields.Integer(required=True)
    tags = ma.fields.String(allow_none=True, metadata={"description": "Each job also gets schedule:<name>"})
    misfire = fields.choice(
        MISFIRE_POLICIES,
        required=True,
        metadata={"description": "Ticks missed while no process ran: skip, once (the newest), catch_up"},
    )
    catch_up_max = ma.fields.Integer(required=True, metadata={"description": "catch_up: the newest N"})
    misfire_grace_seconds = ma.fields.Float(
        allow_none=True,
        metadata={"description": "Later than this a tick is missed; null: Schedules.MisfireGrace"},
    )
    paused = ma.fields.Boolean(required=True)
    source = fields.choice(
        SOURCES, required=True, metadata={"description": "api (created at run time) or code (@job)"}
    )
    next_run_at = fields.UtcDateTime(
        allow_none=True, metadata={"description": "The next tick; null while paused"}
    )
    next_runs = ma.fields.List(
        fields.UtcDateTime(),
        required=True,
        metadata={"description": "The next five ticks (empty while paused)"},
    )
    last_tick_at = fields.UtcDateTime(allow_none=True, metadata={"description": "The newest tick that ran"})
    last_run_at = fields.UtcDateTime(
        allow_none=True, metadata={"description": "When the newest job was made"}
    )
    last_job_id = ma.fields.String(allow_none=True)
    last_outcome = _outcome()
    last_failure_reason = ma.fields.String(allow_none=True, metadata={"description": "Of a dead last job"})
    runs_total = ma.fields.Integer(required=True, metadata={"description": "Jobs enqueued, ever"})
    missed_total = ma.fields.Integer(
        required=True, metadata={"description": "Ticks missed and not run by the misfire policy"}
    )
    created_at = fields.UtcDateTime(required=True)
    created_by = ma.fields.String(allow_none=True)
    updated_at = fields.UtcDateTime(required=True)
    updated_by = ma.fields.String(allow_none=True)


class ScheduleRunSchema(ma.Schema):
    class Meta:
        ordered = True

    schedule = ma.fields.String(required=True)
    tick_at = fields.UtcDateTime(
        required=True, metadata={"description": "The tick (cron), or when the trigger was asked for (manual)"}
    )
    kind = fields.choice(KINDS, required=True)
    late = ma.fields.Boolean(
        required=True, metadata={"description": "Run by the misfire policy after the tick's grace"}
    )
    job_id = ma.fields.String(allow_none=True)
    fired_at = fields.UtcDateTime(required=True)
    fired_by = ma.fields.String(allow_none=True, metadata={"description": "The process (host:pid) or actor"})
    outcome = _outcome()
    failure_reason = ma.fields.String(allow_none=True)


def _definition(*, required: bool) -> dict[str, ma.fields.Field]:
    """The definition fields, required or not (create and PATCH)."""
    return {
        "type": ma.fields.String(required=required, validate=ma.validate.Length(1, validation.MAX_TYPE)),
        "cron": ma.fields.String(
            required=required,
            validate=ma.validate.Length(1, 200),
            metadata={"description": "`*/5 * * * *`; six fields put seconds first; @hourly, @daily ..."},
        ),
        "tz": ma.fields.String(
            validate=ma.validate.Length(1, 64), metadata={"description": "IANA time zone; default UTC"}
        ),
        "payload": fields.Payload(
            allow_none=True,
            metadata={"description": "Each job's payload: any JSON value, or JSON text (must be valid JSON)"},
        ),
        "queue": ma.fields.String(validate=ma.validate.Length(1, validation.MAX_QUEUE)),
        "priority": ma.fields.Integer(
            validate=ma.validate.Range(validation.MIN_PRIORITY, validation.MAX_PRIORITY)
        ),
        "tags": ma.fields.String(allow_none=True, validate=ma.validate.Length(0, MAX_TAGS)),
        "misfire": fields.choice(MISFIRE_POLICIES),
        "catch_up_max": ma.fields.Integer(validate=ma.validate.Range(1, MAX_CATCH_UP)),
        "misfire_grace_seconds": ma.fields.Float(
            allow_none=True, validate=ma.validate.Range(0, MAX_GRACE_S, min_inclusive=False)
        ),
    }


ScheduleCreateSchema = Schema.from_dict(
    {
        "name": ma.fields.String(
            required=True,
            validate=ma.validate.Length(1, MAX_NAME),
            metadata={"description": "Letters, digits and . _ : @ - (a URL path segment)"},
        ),
        **_definition(required=True),
        "paused": ma.fields.Boolean(metadata={"description": "Create it paused (default false)"}),
    },
    name="ScheduleCreate",
)
SchedulePatchSchema = Schema.from_dict(_definition(required=False), name="SchedulePatch")


class ScheduleQuery(Schema):
    type = ma.fields.String(validate=ma.validate.Length(1, validation.MAX_TYPE))
    paused = ma.fields.Boolean()
    source = fields.choice(SOURCES)
