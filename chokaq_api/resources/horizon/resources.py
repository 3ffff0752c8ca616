"""What holds back vacuum in the queue's database, and ending that session (docs/endurance.md)."""

from __future__ import annotations

from typing import Any

from flask.views import MethodView

from chokaq_api.auth import actor
from chokaq_api.extensions import Blueprint, ctx, store
from chokaq_api.resources.horizon.schemas import EndedSchema, EndSessionSchema, HorizonSchema

URL = "/horizon"
blp = Blueprint("horizon", __name__, description="The snapshot horizon: who holds back vacuum.")


@blp.route("")
class Horizon(MethodView):
    @blp.response(200, HorizonSchema)
    def get(self) -> Any:
        """The oldest snapshot's session (pid, application, user, client, state, age, query head),
        replication slots and prepared transactions holding the horizon; on SQLite the write-ahead log"""
        return store().horizon().to_dict() | {
            "degraded_after_seconds": ctx().settings.health.horizon_degraded
        }


@blp.route("/cancel")
class EndSession(MethodView):
    @blp.arguments(EndSessionSchema)
    @blp.response(200, EndedSchema)
    def post(self, body: dict[str, Any]) -> Any:
        """End the session `pid`: cancel its statement, then, if it still holds a snapshot after two
        seconds (idle in a transaction), terminate it. Admin only; each signal is audited. 404 when `pid`
        is no client session of this database (SQLite has none)"""
        return store().end_session(body["pid"], actor=actor(), reason=body["reason"])
