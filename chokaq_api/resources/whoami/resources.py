"""Who the bearer token is: its name and role, so a client (The Deck) can offer only what it may do."""

from __future__ import annotations

from typing import Any

from flask import g
from flask.views import MethodView

from chokaq_api.extensions import Blueprint
from chokaq_api.resources.whoami.schemas import WhoAmISchema

URL = "/whoami"
blp = Blueprint("whoami", __name__, description="The calling token.")

# schedule_run: pause, resume and trigger schedules; schedule_edit: create, change and delete them.
ABILITIES = {
    "reader": ("read",),
    "operator": (
        "read", "enqueue", "edit", "resurrect", "cancel", "pause", "rescue", "plan", "schedule_run",
    ),
    "admin": (
        "read", "enqueue", "edit", "resurrect", "cancel", "pause", "rescue", "plan", "purge", "queue_limits",
        "end_sessions", "schedule_run", "schedule_edit",
    ),
}  # fmt: skip


@blp.route("")
class WhoAmI(MethodView):
    @blp.response(200, WhoAmISchema)
    def get(self) -> Any:
        """The token's name and role (any valid token)"""
        principal = g.principal
        return {
            "name": principal["name"],
            "role": principal["role"],
            "can": list(ABILITIES[principal["role"]]),
        }
