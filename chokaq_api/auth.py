"""Bearer tokens and the central route -> role table.

Every route of the app must have an entry in `ROUTES`; a route without one is refused at run time (500,
logged) and fails the table-driven security test, so a new endpoint cannot ship unguarded by accident.
The actor written to audit rows is always the token's name (`actor()`), never a request field.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flask import Flask, abort, current_app, g, request
from flask_smorest import abort as smorest_abort

from chokaq_api.bodies import refuse_deep_json
from chokaq_api.extensions import ctx, query_fields
from chokaq_ops import errors
from chokaq_ops.models import Actor

log = logging.getLogger("chokaq.api.auth")

PREFIX = "/api/v1"
ROLES = ("reader", "operator", "admin")
_RANK = {role: i for i, role in enumerate(ROLES)}


@dataclass(frozen=True)
class Rule:
    """Who may call a route. `role` None: open. `open_setting`: an Api setting that opens the route.
    `admin_fields`: body fields that raise the requirement to admin (queue limits in PATCH /queues)."""

    role: str | None
    open_setting: str | None = None
    admin_fields: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.role is None:
            return "open (no token)"
        text = f"`{self.role}` or higher"
        if self.admin_fields:
            text += f"; `admin` when the body sets {', '.join(self.admin_fields)}"
        if self.open_setting:
            text += " (open when Api.MetricsOpen is true)"
        return text


OPEN = Rule(None)
READER = Rule("reader")
OPERATOR = Rule("operator")
ADMIN = Rule("admin")

# (method, rule without the /api/v1 prefix) -> Rule. HEAD follows GET; OPTIONS is answered by Flask.
ROUTES: Mapping[tuple[str, str], Rule] = {
    ("GET", ""): OPEN,  # the index: paths and roles, no data
    ("GET", "/openapi.json"): OPEN,
    ("GET", "/health"): OPEN,
    ("GET", "/health/live"): OPEN,
    ("GET", "/health/ready"): OPEN,
    ("GET", "/metrics"): Rule("reader", open_setting="metrics_open"),
    ("GET", "/jobs"): READER,
    ("POST", "/jobs"): OPERATOR,
    ("POST", "/jobs/cancel"): OPERATOR,
    ("GET", "/jobs/<job_id>"): READER,
    ("PATCH", "/jobs/<job_id>"): OPERATOR,
    ("GET", "/jobs/<job_id>/failures"): READER,
    ("POST", "/jobs/locate"): READER,  # a read with an id list too long for a query string
    ("GET", "/failures"): READER,
    ("GET", "/dlq"): READER,
    ("GET", "/dlq/summary"): READER,
    ("POST", "/dlq/preview"): READER,  # reads only: a dry run of a bulk operation
    ("POST", "/dlq/resurrect"): OPERATOR,
    ("POST", "/dlq/purge"): ADMIN,
    ("GET", "/dlq/<job_id>"): READER,
    ("PATCH", "/dlq/<job_id>"): OPERATOR,
    ("POST", "/dlq/<job_id>/resurrect"): OPERATOR,
    ("GET", "/archive"): READER,
    ("GET", "/archive/<job_id>"): READER,
    ("POST", "/archive/purge"): ADMIN,
    ("GET", "/queues"): READER,
    ("GET", "/queues/<name>"): READER,
    ("PATCH", "/queues/<name>"): Rule(
        "operator", admin_fields=("active", "zombie_timeout_seconds", "max_workers")
    ),
    ("GET", "/stats"): READER,
    # Operator, not admin: a sweep applies the configured timeouts, exactly what the scheduled sweep does
    # a minute later; changing those timeouts is the admin part (PATCH /queues/{name}).
    ("POST", "/rescue"): OPERATOR,
    ("GET", "/events"): READER,
    ("GET", "/audit"): READER,
    # Bulk-decision plans (chokaq_api/resources/plans): operator for resurrect and cancel plans; the view
    # raises the requirement to admin for purge plans (the action is in the body or the stored plan).
    ("GET", "/plans"): READER,
    ("POST", "/plans"): OPERATOR,
    ("GET", "/plans/<plan_id>"): READER,
    ("GET", "/plans/<plan_id>/items"): READER,
    ("GET", "/plans/<plan_id>/outcomes"): READER,
    ("POST", "/plans/<plan_id>/execute"): OPERATOR,
    ("POST", "/plans/<plan_id>/discard"): OPERATOR,
    ("POST", "/plans/<plan_id>/approve"): OPERATOR,
    # The Deck's needs: who the token is (to offer only what its role may do) and the workers.
    ("GET", "/whoami"): READER,
    ("GET", "/workers"): READER,
    ("PATCH", "/workers/<worker_id>"): ADMIN,  # live concurrency of a registered worker
    # The circuit breaker per job type (docs/circuits.md): forcing one stops or releases a whole type.
    ("GET", "/circuits"): READER,
    ("GET", "/circuits/<path:type_key>"): READER,
    ("PATCH", "/circuits/<path:type_key>"): ADMIN,
}


# Routes outside the API that carry no data: The Deck's page and assets (chokaq_api/deck), registered by
# the console itself (its prefix is a setting). The console then calls the API with the user's token.
CONSOLE_ROUTES: set[tuple[str, str]] = set()


def open_console_route(method: str, url_rule: str) -> None:
    if url_rule.startswith(PREFIX):
        raise ValueError(f"console route {url_rule} would shadow the API")
    CONSOLE_ROUTES.add((method, url_rule))


def rule_for(method: str, url_rule: str) -> Rule | None:
    if not url_rule.startswith(PREFIX):
        return OPEN if ("GET" if method == "HEAD" else method, url_rule) in CONSOLE_ROUTES else None
    return ROUTES.get(("GET" if method == "HEAD" else method, url_rule[len(PREFIX) :]))


def bearer_token() -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def authenticate() -> dict[str, Any]:
    token = bearer_token()
    if token is None:
        raise errors.Unauthorized("missing token: send `Authorization: Bearer <token>`")
    principal = ctx().store.verify_token(token)
    if principal is None:
        raise errors.Unauthorized("invalid or revoked token")
    return principal


def required_role(rule: Rule) -> str | None:
    if rule.admin_fields:
        refuse_deep_json()  # get_json(silent=True) silences ValueError, not a RecursionError
        body = request.get_json(silent=True)
        if isinstance(body, dict) and any(f in body for f in rule.admin_fields):
            return "admin"
    return rule.role


def authorize() -> None:
    """before_request: resolve the route's rule, check the token and role, reject unknown query fields."""
    if request.url_rule is None or request.method == "OPTIONS":
        return  # routing failed (404/405 follow) or an automatic OPTIONS answer
    rule = rule_for(request.method, request.url_rule.rule)
    if rule is None:
        log.error("route %s %s has no access rule; refusing it", request.method, request.url_rule.rule)
        abort(500, description="this route has no access rule")
    is_open = rule.role is None or (
        rule.open_setting is not None and getattr(ctx().settings.api, rule.open_setting)
    )
    if not is_open:
        principal = authenticate()
        needed = required_role(rule)
        if needed is not None and _RANK[principal["role"]] < _RANK[needed]:
            raise errors.Forbidden(
                f"this operation needs the {needed} role; token {principal['name']!r} is {principal['role']}"
            )
        g.principal = principal
    _reject_unknown_query()


def _reject_unknown_query() -> None:
    view = current_app.view_functions[request.endpoint]
    view_class = getattr(view, "view_class", None)
    method = "get" if request.method == "HEAD" else request.method.lower()
    func = getattr(view_class, method, None) if view_class is not None else view
    unknown = sorted(set(request.args) - query_fields(func))
    if unknown:
        smorest_abort(
            422,
            message=f"invalid query.{unknown[0]}: Unknown field.",
            errors={"query": {name: ["Unknown field."] for name in unknown}},
        )


def actor(plan_id: str | None = None) -> Actor:
    """The audit actor: the authenticated token's name, and the plan id of a server-side plan the request
    acts on (views pass one only after loading that plan; a request body never supplies it)."""
    return Actor(name=g.principal["name"], plan_id=plan_id)


def require_plan_below_threshold(jobs: int, action: str) -> None:
    """Api.PlanApprovalMinJobs holds for bulk calls too: a change of that many jobs or more must go through
    a plan a second token approves, or the four-eyes rule would be one endpoint away from moot."""
    least = ctx().settings.api.plan_approval_min_jobs
    if least and jobs >= least:
        raise errors.InvalidState(
            f"this {action} touches {jobs:,} jobs; Api.PlanApprovalMinJobs is {least:,}: create a plan "
            f"(POST /plans with action {action!r}), have a second token approve it "
            "(POST /plans/{id}/approve), then execute it"
        )


def init_app(app: Flask) -> None:
    app.before_request(authorize)


def access_doc(method: str, url_rule: str) -> dict[str, Any]:
    """OpenAPI fragments for one operation: security, 401/403 responses and the role, from ROUTES."""
    rule = rule_for(method, url_rule)
    if rule is None:
        return {}
    if rule.role is None:
        return {"security": []}
    return {
        "x-required-role": rule.role,
        "note": f"Role: {rule.describe()}.",
        "responses": {"401": "UNAUTHORIZED", "403": "FORBIDDEN"},
    }
