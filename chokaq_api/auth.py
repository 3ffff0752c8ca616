"""Bearer tokens: who is calling, and whether the route's rule (chokaq_api/routes.py) lets them.

A route without an entry in `routes.ROUTES` is refused at run time (500, logged). The actor written to
audit rows is always the token's name (`actor()`), never a request field.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from flask import Flask, abort, current_app, g, request
from flask_smorest import abort as smorest_abort

from chokaq_api.bodies import refuse_deep_json
from chokaq_api.extensions import ctx, query_fields
from chokaq_api.routes import ROLES, Rule, rule_for
from chokaq_ops import errors
from chokaq_ops.models import Actor

log = logging.getLogger("chokaq.api.auth")

_RANK = {role: i for i, role in enumerate(ROLES)}


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
    enforce(request.url_rule.rule, authenticate)


def enforce(url_rule: str, who: Callable[[], dict[str, Any]]) -> None:
    """Apply the access table to this request as route `url_rule` (the API's own rule: /api/v1/...), the
    caller named by `who()` (bearer tokens here; the application's own sign-in where the API is mounted
    in another app, chokaq_api/flask_ext/mount.py)."""
    rule = rule_for(request.method, url_rule)
    if rule is None:
        log.error("route %s %s has no access rule; refusing it", request.method, url_rule)
        abort(500, description="this route has no access rule")
    is_open = rule.role is None or (
        rule.open_setting is not None and getattr(ctx().settings.api, rule.open_setting)
    )
    if not is_open:
        principal = who()
        needed = required_role(rule)
        if needed is not None and _RANK[principal["role"]] < _RANK[needed]:
            raise errors.Forbidden(
                f"this operation needs the {needed} role; token {principal['name']!r} is {principal['role']}"
            )
        g.principal = principal
    _reject_unknown_query()


def _reject_unknown_query() -> None:
    view: Any = current_app.view_functions[str(request.endpoint)]  # routed: authorize() checked
    view_class = getattr(view, "view_class", None)
    method = "get" if request.method == "HEAD" else request.method.lower()
    func: Any = getattr(view_class, method, None) if view_class is not None else view
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
