"""Alerts: the alerts in force (reader); receivers and rules (admins change them, audited); a test
notification to a receiver, delivered through the queue like every other (docs/alerts.md)."""

from __future__ import annotations

from typing import Any

from flask.views import MethodView

from chokaq_api.auth import actor
from chokaq_api.extensions import Blueprint, ctx, store
from chokaq_api.resources.alerts.schemas import (
    AlertSchema,
    ReceiverChangeSchema,
    ReceiverCreateSchema,
    ReceiverSchema,
    RuleChangeSchema,
    RuleCreateSchema,
    RuleSchema,
    TestSentSchema,
)
from chokaq_ops.alert_catalog import AlertCatalog

URL = "/alerts"
blp = Blueprint("alerts", __name__, description="Alert rules, receivers and the alerts in force.")


def catalog() -> AlertCatalog:
    return AlertCatalog(ctx().settings, store())


@blp.route("")
class Alerts(MethodView):
    @blp.response(200, AlertSchema(many=True))
    def get(self) -> Any:
        """The alerts the rule loop holds: pending, firing, and resolved ones whose resolve is not sent yet"""
        return store().alert_states()


@blp.route("/receivers")
class Receivers(MethodView):
    @blp.response(200, ReceiverSchema(many=True))
    def get(self) -> Any:
        """Every receiver: the configuration file's (source config) and those made here"""
        return [r.view() for r in catalog().receivers()]

    @blp.arguments(ReceiverCreateSchema)
    @blp.response(201, ReceiverSchema)
    @blp.alt_response(409, response="CONFLICT", description="The name is taken.")
    def post(self, body: dict[str, Any]) -> Any:
        """Create a receiver (admin; audited without its URL or secret)"""
        return catalog().create_receiver(body, actor=actor()).view()


@blp.route("/receivers/<name>")
class ReceiverByName(MethodView):
    @blp.response(200, ReceiverSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    def get(self, name: str) -> Any:
        """One receiver"""
        return catalog().receiver(name).view()

    @blp.arguments(ReceiverChangeSchema)
    @blp.response(200, ReceiverSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    @blp.alt_response(409, response="CONFLICT", description="Defined in the configuration file.")
    def patch(self, body: dict[str, Any], name: str) -> Any:
        """Change a receiver; send `secret` to rotate it (admin; audited)"""
        return catalog().update_receiver(name, body, actor=actor()).view()

    @blp.response(204)
    @blp.alt_response(404, response="NOT_FOUND")
    @blp.alt_response(409, response="CONFLICT", description="A rule sends to it, or it is configured.")
    def delete(self, name: str) -> Any:
        """Delete a receiver no rule sends to (admin; audited)"""
        catalog().delete_receiver(name, actor=actor())
        return ""


@blp.route("/receivers/<name>/test")
class ReceiverTest(MethodView):
    @blp.response(202, TestSentSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    def post(self, name: str) -> Any:
        """Send one test notification through the queue (admin; audited): a delivery job is enqueued"""
        return {"receiver": name, "job_id": catalog().test(name, actor=actor())}


@blp.route("/rules")
class Rules(MethodView):
    @blp.response(200, RuleSchema(many=True))
    def get(self) -> Any:
        """Every rule: the configuration file's (source config) and those made here"""
        return [r.view() for r in catalog().rules()]

    @blp.arguments(RuleCreateSchema)
    @blp.response(201, RuleSchema)
    @blp.alt_response(409, response="CONFLICT", description="The name is taken.")
    def post(self, body: dict[str, Any]) -> Any:
        """Create a rule (admin; audited)"""
        return catalog().create_rule(body, actor=actor()).view()


@blp.route("/rules/<name>")
class RuleByName(MethodView):
    @blp.response(200, RuleSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    def get(self, name: str) -> Any:
        """One rule"""
        return catalog().rule(name).view()

    @blp.arguments(RuleChangeSchema)
    @blp.response(200, RuleSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    @blp.alt_response(409, response="CONFLICT", description="Defined in the configuration file.")
    def patch(self, body: dict[str, Any], name: str) -> Any:
        """Change a rule (admin; audited)"""
        return catalog().update_rule(name, body, actor=actor()).view()

    @blp.response(204)
    @blp.alt_response(404, response="NOT_FOUND")
    @blp.alt_response(409, response="CONFLICT", description="Defined in the configuration file.")
    def delete(self, name: str) -> Any:
        """Delete a rule; its alerts are dropped without a resolved message (admin; audited)"""
        catalog().delete_rule(name, actor=actor())
        return ""
