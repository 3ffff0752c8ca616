"""The job types workers declared: requests and responses."""

from __future__ import annotations

import marshmallow as ma

from chokaq_api import fields


class JobTypeSchema(ma.Schema):
    class Meta:
        ordered = True

    type = ma.fields.String(required=True)
    idempotent = ma.fields.Boolean(
        required=True, metadata={"description": "Declared @job(idempotent=True): safe to run again"}
    )
    updated_at = fields.UtcDateTime(required=True, metadata={"description": "When a worker last declared it"})
