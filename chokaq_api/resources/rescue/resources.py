"""Run one zombie-rescue sweep now."""

from __future__ import annotations

from typing import Any

from flask.views import MethodView

from chokaq_api.auth import actor
from chokaq_api.extensions import Blueprint, ctx
from chokaq_api.resources.rescue.schemas import RescueSchema
from chokaq_ops.engine.rescue import sweep_now

URL = "/rescue"
blp = Blueprint("rescue", __name__, description="Run the zombie-rescue sweep now.")


@blp.route("")
class Rescue(MethodView):
    @blp.response(200, RescueSchema)
    def post(self) -> Any:
        """Run one rescue sweep now: abandoned fetched jobs back to pending, zombies to the DLQ"""
        c = ctx()
        return sweep_now(c.store, c.settings, metrics=c.metrics, actor=actor().name)
