"""Totals and rates."""

from __future__ import annotations

import marshmallow as ma

from chokaq_api import fields


class StatsSchema(ma.Schema):
    class Meta:
        ordered = True

    enqueued_total = ma.fields.Integer(required=True)
    succeeded_total = ma.fields.Integer(required=True)
    failed_total = ma.fields.Integer(required=True, metadata={"description": "Jobs now in the DLQ"})
    retried_total = ma.fields.Integer(required=True)
    last_activity_at = fields.UtcDateTime(allow_none=True)
    pending = ma.fields.Integer(required=True)
    fetched = ma.fields.Integer(required=True)
    processing = ma.fields.Integer(required=True)
    hot = ma.fields.Integer(required=True)
    archive = ma.fields.Integer(required=True)
    dlq = ma.fields.Integer(required=True)
    processed_1m = ma.fields.Integer(required=True)
    failed_1m = ma.fields.Integer(required=True)
    processed_5m = ma.fields.Integer(required=True)
    failed_5m = ma.fields.Integer(required=True)
    jobs_per_second_1m = ma.fields.Float(required=True)
    jobs_per_second_5m = ma.fields.Float(required=True)
    failure_rate_1m = ma.fields.Float(
        required=True, metadata={"description": "Percent of outcomes that failed"}
    )
    failure_rate_5m = ma.fields.Float(required=True)
