"""Liveness, readiness (open, for probes) and Prometheus metrics."""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify, request
from flask.views import MethodView

from chokaq_api.auth import authenticate
from chokaq_api.errors import body
from chokaq_api.extensions import Blueprint, ctx
from chokaq_api.resources.health.checks import DEGRADED, UNHEALTHY, readiness
from chokaq_api.resources.health.schemas import LiveSchema, NotReadySchema, ReadySchema
from chokaq_ops import errors
from chokaq_ops.engine.metrics import CONTENT_TYPE

URL = ""
blp = Blueprint("health", __name__, description="Probes and metrics.")


@blp.route("/health/live")
class Live(MethodView):
    @blp.response(200, LiveSchema)
    def get(self) -> Any:
        """Liveness: the process answers (no database access)"""
        return {"status": "ok"}


def may_see_detail() -> bool:
    """The checks' detail (worker ids, queue names, error text) is for a `reader` token; probes without
    one get the status and the names of failing checks. A token that is sent must be valid (401), unless
    the database is down, which is exactly when the probe must still answer."""
    if not request.headers.get("Authorization"):
        return False
    try:
        authenticate()
    except errors.StorageError:
        return False
    return True


@blp.route("/health", endpoint="Health")
@blp.route("/health/ready")
class Ready(MethodView):
    @blp.response(200, ReadySchema, description="Ready (status ok or degraded).")
    @blp.alt_response(503, schema=NotReadySchema, description="Not ready; `checks` says why.")
    def get(self) -> Any:
        """Readiness: storage reachable, schema current, hosted worker alive, queue lag under thresholds.

        Open for probes (status only); a reader token also sees each check's detail."""
        checks = readiness(ctx())
        detailed = may_see_detail()
        failing = {
            name: [c["detail"] if detailed else c["status"]]
            for name, c in checks.items()
            if c["status"] == UNHEALTHY
        }
        if failing:
            payload = body(503, f"not ready: {', '.join(failing)}", {"checks": failing})
            if detailed:
                payload["checks"] = checks
            return jsonify(NotReadySchema().dump(payload)), 503
        degraded = any(c["status"] == DEGRADED for c in checks.values())
        return {"status": DEGRADED if degraded else "ok"} | ({"checks": checks} if detailed else {})


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
