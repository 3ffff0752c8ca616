"""The circuit breaker per job type (docs/circuits.md)."""

from __future__ import annotations

import marshmallow as ma

from chokaq_api import fields
from chokaq_api.extensions import Schema
from chokaq_ops.storage.circuit_ops import CIRCUIT_STATES

STATES = ("closed", "open", "half_open")


class CircuitSchema(ma.Schema):
    class Meta:
        ordered = True

    type = ma.fields.String(required=True, metadata={"description": "The job type the circuit guards"})
    state = ma.fields.String(
        required=True,
        validate=ma.validate.OneOf(STATES),
        metadata={"description": "closed: jobs run; open: jobs are deferred; half_open: probes run"},
    )
    forced = ma.fields.Boolean(
        required=True, metadata={"description": "Forced open by an operator: no probes until closed"}
    )
    failures = ma.fields.Integer(required=True, metadata={"description": "Counted failures in the window"})
    last_failure_at = fields.UtcDateTime(allow_none=True)
    opened_at = fields.UtcDateTime(allow_none=True)
    open_until = fields.UtcDateTime(
        allow_none=True, metadata={"description": "End of the break; null if forced"}
    )
    open_for_s = ma.fields.Float(allow_none=True, metadata={"description": "Seconds of the break left"})
    probes = ma.fields.Integer(required=True, metadata={"description": "Half-open probes in flight"})
    successes = ma.fields.Integer(required=True, metadata={"description": "Successful probes so far"})
    transitions = ma.fields.Integer(required=True, metadata={"description": "State changes, ever"})
    failure_threshold = ma.fields.Integer(required=True)
    failure_window_s = ma.fields.Float(required=True)
    break_duration_s = ma.fields.Float(required=True)
    half_open_max_calls = ma.fields.Integer(required=True)
    updated_at = fields.UtcDateTime(required=True)


class CircuitPatchSchema(Schema):
    state = ma.fields.String(
        required=True,
        validate=ma.validate.OneOf(CIRCUIT_STATES),
        metadata={"description": "open: force open until closed; closed: close and clear the count"},
    )
