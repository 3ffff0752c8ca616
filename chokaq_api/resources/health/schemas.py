"""Liveness, readiness and their per-check detail."""

from __future__ import annotations

import marshmallow as ma

STATES = ["ok", "degraded", "unhealthy", "skipped"]


class CheckSchema(ma.Schema):
    status = ma.fields.String(required=True, metadata={"enum": STATES})
    detail = ma.fields.String(required=True)
    data = ma.fields.Dict(metadata={"description": "Measurements behind the verdict"})


class LiveSchema(ma.Schema):
    status = ma.fields.String(required=True, metadata={"enum": ["ok"]})


class ReadySchema(ma.Schema):
    status = ma.fields.String(required=True, metadata={"enum": ["ok", "degraded"]})
    checks = ma.fields.Dict(
        keys=ma.fields.String(),
        values=ma.fields.Nested(CheckSchema),
        metadata={"description": "Per-check detail: only for a reader token"},
    )


class NotReadySchema(ma.Schema):
    """The error shape, plus every check's detail for a reader token."""

    code = ma.fields.Integer(required=True)
    status = ma.fields.String(required=True)
    message = ma.fields.String(required=True)
    errors = ma.fields.Dict(
        required=True,
        metadata={
            "description": '{"checks": {name: [detail]}} of failing checks '
            "(the detail for a reader token, else the status)"
        },
    )
    checks = ma.fields.Dict(
        keys=ma.fields.String(),
        values=ma.fields.Nested(CheckSchema),
        metadata={"description": "Per-check detail: only for a reader token"},
    )
