"""The snapshot horizon report and the request that ends its holder's session."""

from __future__ import annotations

from typing import Any

import marshmallow as ma

from chokaq_api.extensions import Schema


class HolderSchema(ma.Schema):
    pid = ma.fields.Integer(allow_none=True)
    application = ma.fields.String(allow_none=True)
    user = ma.fields.String(allow_none=True)
    client = ma.fields.String(allow_none=True, metadata={"description": "Client address"})
    state = ma.fields.String(allow_none=True, metadata={"description": "active, idle in transaction, ..."})
    transaction_age_seconds = ma.fields.Float(allow_none=True)
    xid_age = ma.fields.Integer(allow_none=True, metadata={"description": "Transactions since its snapshot"})
    query = ma.fields.String(allow_none=True, metadata={"description": "The first 200 characters"})
    backend_type = ma.fields.String(allow_none=True)


class HorizonSchema(ma.Schema):
    held_seconds = ma.fields.Float(
        required=True, metadata={"description": "Age of the oldest snapshot or prepared transaction"}
    )
    oldest_snapshot = ma.fields.Nested(HolderSchema, allow_none=True)
    replication_slots = ma.fields.List(ma.fields.Dict(), required=True)
    prepared_transactions = ma.fields.List(ma.fields.Dict(), required=True)
    wal = ma.fields.Dict(
        allow_none=True,
        metadata={"description": "SQLite: size_bytes, limit_bytes, pinned_seconds of the write-ahead log"},
    )
    degraded_after_seconds = ma.fields.Float(
        required=True, metadata={"description": "Health.HorizonDegraded"}
    )


class EndSessionSchema(Schema):
    """Confirmed by typing the pid twice: a session is not ended by a stray click."""

    pid = ma.fields.Integer(required=True, validate=ma.validate.Range(1, 2**31 - 1))
    confirm = ma.fields.Integer(required=True, metadata={"description": "The same pid again"})
    reason = ma.fields.String(
        load_default=None,
        validate=ma.validate.Length(max=200),
        metadata={"description": "Kept in the audit row"},
    )

    @ma.validates_schema
    def confirmed(self, data: dict[str, Any], **kwargs: Any) -> None:
        if data.get("confirm") != data.get("pid"):
            raise ma.ValidationError("type the session's pid again to confirm", field_name="confirm")


class EndedSchema(ma.Schema):
    pid = ma.fields.Integer(required=True)
    signals = ma.fields.List(
        ma.fields.String(), required=True, metadata={"description": "cancel, then terminate when needed"}
    )
    released = ma.fields.Boolean(required=True, metadata={"description": "The session holds no snapshot now"})
