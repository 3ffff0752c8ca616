"""Liveness, readiness (open, for probes) and Prometheus metrics."""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify
from flask.views import MethodView

from chokaq_api.errors import body
from chokaq_api.extensions import Blueprint, ctx
from chokaq_api.resources.health.checks import DEGRADED, UNHEALTHY, readiness
from chokaq_api.resources.health.schemas import LiveSchema, NotReadySchema, ReadySchema
from chokaq_ops.engine.metrics import CONTENT_TYPE

URL = ""
blp = Blueprint("health", __name__, description="Probes and metrics.")


@blp.route("/health/live")
class Live(MethodView):
    @blp.response(200, LiveSchema)
    def get(self) -> Any:
        """Liveness: the process answers (no database access)"""
        return {"status": "ok"}


@blp.route("/health", endpoint="Health")
@blp.route("/health/ready")
class Ready(MethodView):
    @blp.response(200, ReadySchema, description="Ready (status ok or degraded).")
    @blp.alt_response(503, schema=NotReadySchema, description="Not ready; `checks` says why.")
    def get(self) -> Any:
        """Readiness: storage reachable, schema current, hosted worker alive, queue lag under thresholds"""
        checks = readiness(ctx())
        failing = {name: [c["detail"]] for name, c in checks.items() if c["status"] == UNHEALTHY}
        if failing:
            payload = body(503, f"not ready: {', '.join(failing)}", {"checks": failing}) | {"checks": checks}
            return jsonify(NotReadySchema().dump(payload)), 503
        degraded = any(c["status"] == DEGRADED for c in checks.values())
        return {"status": DEGRADED if degraded else "ok", "checks": checks}


@blp.route("/metrics")
class Metrics(MethodView):
    @blp.doc(
        responses={
            "200": {
                "description": "Prometheus text exposition format.",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            }
        }
    )
    def get(self) -> Any:
        """Prometheus metrics: job counters of a hosted worker, queue depth, lag and DLQ size"""
        return Response(ctx().metrics.render(), content_type=CONTENT_TYPE)
