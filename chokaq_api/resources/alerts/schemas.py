"""Alerts (docs/alerts.md): receivers, rules and the alerts in force. A receiver's URL is shown as its
scheme and host, its secret only as `secret_set`; both are write-only fields."""

from __future__ import annotations

import marshmallow as ma

from chokaq_api import fields
from chokaq_api.extensions import Schema
from chokaq_ops import alert_model

_NAME = ma.validate.Length(1, 100)
_LIST = ma.validate.Length(max=alert_model.MAX_LIST)


def _names(*, required: bool = False) -> ma.fields.List:
    item = ma.fields.String(validate=ma.validate.Length(1, 255))
    return ma.fields.List(item, validate=_LIST, required=required)


class ReceiverSchema(ma.Schema):
    class Meta:
        ordered = True

    name = ma.fields.String(required=True)
    kind = ma.fields.String(required=True, metadata={"enum": list(alert_model.RECEIVER_KINDS)})
    url = ma.fields.String(
        allow_none=True, metadata={"description": "Scheme and host only: the rest may be the secret."}
    )
    secret_set = ma.fields.Boolean(required=True, metadata={"description": "A signing secret is set."})
    send_resolved = ma.fields.Boolean(required=True)
    timeout_s = ma.fields.Float(required=True)
    max_alerts = ma.fields.Integer(required=True, metadata={"description": "0: every alert of a group."})
    source = ma.fields.String(
        required=True, metadata={"enum": ["api", "config"], "description": "config: read-only here"}
    )
    created_at = fields.UtcDateTime(allow_none=True)
    created_by = ma.fields.String(allow_none=True)
    updated_at = fields.UtcDateTime(allow_none=True)
    updated_by = ma.fields.String(allow_none=True)


class ReceiverChangeSchema(Schema):
    kind = ma.fields.String(validate=ma.validate.OneOf(alert_model.RECEIVER_KINDS))
    url = ma.fields.String(
        load_only=True,
        validate=ma.validate.Length(1, alert_model.MAX_URL),
        metadata={"description": "http(s) URL; never shown again"},
    )
    secret = ma.fields.String(
        load_only=True,
        validate=ma.validate.Length(alert_model.MIN_SECRET, alert_model.MAX_SECRET),
        metadata={"description": "HMAC-SHA256 signing secret (required for webhook); never shown again"},
    )
    send_resolved = ma.fields.Boolean()
    timeout_s = ma.fields.Float(validate=ma.validate.Range(0.5, 120))
    max_alerts = ma.fields.Integer(validate=ma.validate.Range(0, 10_000))


class ReceiverCreateSchema(ReceiverChangeSchema):
    name = ma.fields.String(required=True, validate=_NAME)
    url = ma.fields.String(required=True, load_only=True, validate=ma.validate.Length(1, alert_model.MAX_URL))


class RuleSchema(ma.Schema):
    class Meta:
        ordered = True

    name = ma.fields.String(required=True)
    kind = ma.fields.String(required=True, metadata={"enum": list(alert_model.KINDS)})
    receivers = ma.fields.List(ma.fields.String(), required=True)
    severity = ma.fields.String(required=True)
    threshold = ma.fields.Float(allow_none=True)
    window_s = ma.fields.Float(allow_none=True)
    for_s = ma.fields.Float(required=True)
    repeat_interval_s = ma.fields.Float(allow_none=True)
    group_by = ma.fields.List(ma.fields.String(), required=True)
    queues = ma.fields.List(ma.fields.String(), required=True)
    by = ma.fields.String(allow_none=True)
    inhibited_by = ma.fields.List(ma.fields.String(), required=True)
    inhibit_equal = ma.fields.List(ma.fields.String(), required=True)
    enabled = ma.fields.Boolean(required=True)
    source = ma.fields.String(required=True, metadata={"enum": ["api", "config"]})
    created_at = fields.UtcDateTime(allow_none=True)
    created_by = ma.fields.String(allow_none=True)
    updated_at = fields.UtcDateTime(allow_none=True)
    updated_by = ma.fields.String(allow_none=True)


class RuleChangeSchema(Schema):
    kind = ma.fields.String(validate=ma.validate.OneOf(list(alert_model.KINDS)))
    receivers = _names()
    severity = ma.fields.String(validate=ma.validate.OneOf(alert_model.SEVERITIES))
    threshold = ma.fields.Float(allow_none=True, validate=ma.validate.Range(0, 1e12, min_inclusive=False))
    window_s = ma.fields.Float(allow_none=True, validate=ma.validate.Range(1, 30 * 86_400))
    for_s = ma.fields.Float(validate=ma.validate.Range(0, 30 * 86_400))
    repeat_interval_s = ma.fields.Float(allow_none=True, validate=ma.validate.Range(1, 30 * 86_400))
    group_by = _names()
    queues = _names()
    by = ma.fields.String(allow_none=True, validate=ma.validate.OneOf(alert_model.BY))
    inhibited_by = _names()
    inhibit_equal = _names()
    enabled = ma.fields.Boolean()


class RuleCreateSchema(RuleChangeSchema):
    name = ma.fields.String(required=True, validate=_NAME)
    kind = ma.fields.String(required=True, validate=ma.validate.OneOf(list(alert_model.KINDS)))
    receivers = _names(required=True)


class AlertSchema(ma.Schema):
    class Meta:
        ordered = True

    rule = ma.fields.String(required=True)
    status = ma.fields.String(required=True, metadata={"enum": ["pending", "firing", "resolved"]})
    labels = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.String(), required=True)
    annotations = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.String(), required=True)
    value = ma.fields.Float(allow_none=True)
    active_at = fields.UtcDateTime(required=True, metadata={"description": "Condition first seen"})
    firing_at = fields.UtcDateTime(allow_none=True, metadata={"description": "Pending ended: firing"})
    resolved_at = fields.UtcDateTime(allow_none=True)


class TestSentSchema(ma.Schema):
    receiver = ma.fields.String(required=True)
    job_id = ma.fields.String(
        required=True, metadata={"description": "The delivery job: GET /jobs/{id} tells how it went"}
    )
