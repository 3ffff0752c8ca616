"""`GET /api/v1`: an open index of the API, so the base URL a newcomer is given answers with where to go
next. It names paths and the role each needs; it reads no data and holds no secret."""

from __future__ import annotations

from typing import Any

from flask import current_app
from flask.views import MethodView

from chokaq_api.extensions import Blueprint
from chokaq_api.resources.index.schemas import IndexSchema
from chokaq_api.routes import PREFIX, rule_for
from chokaq_ops import __version__

URL = ""
CONSOLE_ENDPOINT = "deck.index"  # The Deck's page (chokaq_api/deck), when this server serves it
blp = Blueprint("index", __name__, description="Where everything is.")

# (name, path below /api/v1, what it is); the role comes from the route table (routes.ROUTES). Only the
# routes this app has are listed.
RESOURCES = (
    ("jobs", "/jobs", "enqueue, list, show, edit and cancel jobs"),
    ("dlq", "/dlq", "dead jobs: list, summary, preview, edit, resurrect, purge"),
    ("archive", "/archive", "succeeded jobs; purge by age"),
    ("queues", "/queues", "per-queue depth, lag, counters; pause, resume, limits"),
    ("stats", "/stats", "totals, throughput and failure rate"),
    ("plans", "/plans", "bulk decisions: frozen job sets, previewed, executed in chunks"),
    ("audit", "/audit", "who changed what, and when"),
    ("events", "/events", "live events (server-sent events)"),
    ("rescue", "/rescue", "run the zombie-rescue sweep now (POST)"),
    ("metrics", "/metrics", "Prometheus metrics"),
    ("workers", "/workers", "the workers and their heartbeats"),
    ("whoami", "/whoami", "the calling token's name and role"),
)


def _link(path: str, description: str, method: str = "GET") -> dict[str, str]:
    rule = rule_for(method, PREFIX + path)
    role = "open" if rule is None or rule.role is None else rule.role
    return {"href": PREFIX + path, "description": description, "auth": role}


@blp.route("", strict_slashes=False)  # `/api/v1/`, as a base URL is often written, answers too
class Index(MethodView):
    @blp.response(200, IndexSchema)
    def get(self) -> Any:
        """Where everything is: the docs, health probes, console and resources (open, no data)"""
        rules = {rule.rule: rule.endpoint for rule in current_app.url_map.iter_rules()}
        console = next((rule for rule, endpoint in rules.items() if endpoint == CONSOLE_ENDPOINT), None)
        return {
            "name": "chokaq",
            "version": __version__,
            "description": "The operator API of chokaq, a job queue on a relational database.",
            "auth": "Authorization: Bearer <token> on every route not marked open; make a token with "
            "`chokaq token create NAME --role reader|operator|admin`",
            "docs": {"openapi": _link("/openapi.json", "the OpenAPI 3 description of every route")},
            "health": {
                "summary": _link("/health", "readiness, same answer as /health/ready"),
                "live": _link("/health/live", "liveness: the process answers"),
                "ready": _link("/health/ready", "readiness: storage, schema, worker, queue lag"),
            },
            "console": None
            if console is None
            else {
                "href": console,
                "description": "The Deck, the web console (it asks for a token for its calls)",
                "auth": "open",
            },
            "resources": {
                name: _link(path, text, "POST" if name == "rescue" else "GET")
                for name, path, text in RESOURCES
                if PREFIX + path in rules
            },
        }
