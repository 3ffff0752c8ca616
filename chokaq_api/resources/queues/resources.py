"""Queues: state, counts and lag; pause/resume and limits."""

from __future__ import annotations

from typing import Any

from flask.views import MethodView

from chokaq_api.auth import actor
from chokaq_api.extensions import Blueprint, ctx, store
from chokaq_api.resources.queues.schemas import QueuePatchSchema, QueueSchema

URL = "/queues"
blp = Blueprint("queues", __name__, description="Queue control: pause, resume, limits; counts and lag.")


def change(name: str, body: dict[str, Any]) -> dict[str, Any]:
    store().update_queue(name, actor=actor(), min_zombie_timeout=ctx().settings.min_zombie_timeout(), **body)
    return store().queue_stats(name)[0]


@blp.route("")
class Queues(MethodView):
    @blp.response(200, QueueSchema(many=True))
    def get(self) -> Any:
        """Every queue with its control state, counts, lag and totals"""
        return store().queue_stats()


@blp.route("/<name>")
class QueueByName(MethodView):
    @blp.response(200, QueueSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    def get(self, name: str) -> Any:
        """One queue"""
        return store().queue_stats(name)[0]

    @blp.arguments(QueuePatchSchema)
    @blp.response(200, QueueSchema)
    @blp.alt_response(404, response="NOT_FOUND", description="No such queue (PATCH never creates one).")
    def patch(self, body: dict[str, Any], name: str) -> Any:
        """Pause or resume a queue (operator); change active, zombie timeout or max workers (admin)"""
        return change(name, body)
