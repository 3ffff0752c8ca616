"""The central route -> role table, and the OpenAPI text each rule gives its operation.

Every route of the app must have an entry in `ROUTES`; a route without one is refused at run time (500,
logged, chokaq_api/auth.py) and fails the table-driven security test, so a new endpoint cannot ship
unguarded by accident. This module imports nothing of the app: auth enforces the table and the
blueprints (chokaq_api/extensions.py) document it, and neither needs the other for that.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PREFIX = "/api/v1"
ROLES = ("reader", "operator", "admin")


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
    ("GET", "/horizon"): READER,
    ("POST", "/horizon/cancel"): ADMIN,  # ends another session of the database
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
    # A run's lease, pace and notes (halt, interrupt, resume): what the CLI and Python clients do through
    # the API (docs/cli-json.md); the view raises purge plans to admin as above.
    ("POST", "/plans/<plan_id>/lease"): OPERATOR,
    ("POST", "/plans/<plan_id>/release"): OPERATOR,
    ("POST", "/plans/<plan_id>/pace"): OPERATOR,
    ("POST", "/plans/<plan_id>/notes"): OPERATOR,
    ("GET", "/plans/orphans"): READER,
    # The job types workers declared (idempotent or not): what safe retries are selected by.
    ("GET", "/job-types"): READER,
    # The Deck's needs: who the token is (to offer only what its role may do) and the workers.
    ("GET", "/whoami"): READER,
    ("GET", "/workers"): READER,
    ("PATCH", "/workers/<worker_id>"): ADMIN,  # live concurrency of a registered worker
    # The circuit breaker per job type (docs/circuits.md): forcing one stops or releases a whole type.
    ("GET", "/circuits"): READER,
    ("GET", "/circuits/<path:type_key>"): READER,
    ("PATCH", "/circuits/<path:type_key>"): ADMIN,
    # Alerts (docs/alerts.md): anyone may see what fires and what is configured (no URL path, no secret);
    # only admins change where alerts go and when.
    ("GET", "/alerts"): READER,
    ("GET", "/alerts/receivers"): READER,
    ("POST", "/alerts/receivers"): ADMIN,
    ("GET", "/alerts/receivers/<name>"): READER,
    ("PATCH", "/alerts/receivers/<name>"): ADMIN,
    ("DELETE", "/alerts/receivers/<name>"): ADMIN,
    ("POST", "/alerts/receivers/<name>/test"): ADMIN,
    ("GET", "/alerts/rules"): READER,
    ("POST", "/alerts/rules"): ADMIN,
    ("GET", "/alerts/rules/<name>"): READER,
    ("PATCH", "/alerts/rules/<name>"): ADMIN,
    ("DELETE", "/alerts/rules/<name>"): ADMIN,
    # Recurring schedules (docs/schedules.md): operators pause, resume and trigger what admins define.
    ("GET", "/schedules"): READER,
    ("POST", "/schedules"): ADMIN,
    ("GET", "/schedules/<name>"): READER,
    ("PATCH", "/schedules/<name>"): ADMIN,
    ("DELETE", "/schedules/<name>"): ADMIN,
    ("POST", "/schedules/<name>/pause"): OPERATOR,
    ("POST", "/schedules/<name>/resume"): OPERATOR,
    ("POST", "/schedules/<name>/trigger"): OPERATOR,
    ("GET", "/schedules/<name>/runs"): READER,
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
