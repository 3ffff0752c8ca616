"""The audit log."""

from __future__ import annotations

from typing import Any

import marshmallow as ma

from chokaq_api import fields
from chokaq_api.extensions import Schema
from chokaq_ops import validation


class AuditQuery(Schema):
    actor = ma.fields.String(
        validate=ma.validate.Length(1, validation.MAX_ACTOR), metadata={"description": "Token name"}
    )
    action = ma.fields.String(
        validate=ma.validate.Length(1, 50),
        metadata={"description": "enqueue, edit, edit_dlq, resurrect, cancel, purge_dlq, purge_archive, ..."},
    )
    job_id = ma.fields.String(validate=ma.validate.Length(1, validation.MAX_ID))
    plan_id = ma.fields.String(validate=ma.validate.Length(1, validation.MAX_ID))
    since = fields.UtcDateTime(metadata={"description": "Entries at or after this time"})

    @ma.post_load
    def to_call(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return data


class AuditSchema(ma.Schema):
    class Meta:
        ordered = True

    id = ma.fields.Integer(required=True)
    at = fields.UtcDateTime(required=True)
    actor = ma.fields.String(required=True, metadata={"description": "The token name that acted"})
    action = ma.fields.String(required=True)
    job_id = ma.fields.String(allow_none=True)
    plan_id = ma.fields.String(allow_none=True)
    count = ma.fields.Integer(
        required=True, metadata={"description": "Rows one entry stands for (archive purges)"}
    )
    details = fields.JsonText(
        allow_none=True,
        metadata={"description": "JSON: before/after payload of edits, the filter of bulk runs"},
    )
