"""The REST API as a blueprint of another Flask application, behind that application's own sign-in
(docs/flask.md, "The API in your app").

```python
def who():                                   # the app decides who is calling and with which role
    if not current_user.is_authenticated:
        return None                          # -> 401
    return Principal(current_user.email, "admin" if current_user.is_staff else "reader")

app.register_blueprint(chokaq.api_blueprint(who), url_prefix="/ops/queue/api/v1")
```

The routes, bodies, answers and errors are those of `/api/v1` (openapi.yaml), under the app's prefix. The
access table (chokaq_api/routes.py) still decides what each role may do (403 otherwise), and audit rows
name the principal. The bearer tokens of `chokaq token` are not read here: the app's `principal()`
replaces them. What the app adds to the blueprint (`bp.before_request` with its own checks, CSRF
exemptions, rate limits) runs as for any of its blueprints. Not mounted: the index (`GET /api/v1`,
whose links name /api/v1) and the OpenAPI document (served by `chokaq serve`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from flask import Blueprint, current_app, request
from werkzeug.exceptions import HTTPException

from chokaq_api import resources
from chokaq_api.auth import enforce
from chokaq_api.bodies import refuse_deep_json
from chokaq_api.errors import from_chokaq_error, from_http_exception
from chokaq_api.routes import PREFIX, ROLES
from chokaq_ops import errors, validation

MOUNTS = "chokaq.mounts"  # app.extensions key: blueprint name -> the URL prefix it was registered under


class Principal(NamedTuple):
    """Who calls the mounted API: the name audit rows record (1-100 characters) and a role of
    chokaq_api.routes.ROLES (reader, operator, admin)."""

    name: str
    role: str


def api_blueprint(
    principal: Callable[[], Principal | Mapping[str, str] | None], *, name: str = "chokaq_api"
) -> Blueprint:
    """A blueprint carrying every API resource but the index. `principal()` runs in the request (after
    the app's own before_request functions): None answers 401, a Principal (or a mapping with `name` and
    `role`) is checked against the route's role."""
    bp = Blueprint(name, __name__)
    for module in resources.MODULES:
        if module is not resources.index:
            bp.register_blueprint(module.blp, url_prefix=module.URL)

    @bp.record
    def remember(state: Any) -> None:
        state.app.extensions.setdefault(MOUNTS, {})[bp.name] = (state.url_prefix or "").rstrip("/")

    def who() -> dict[str, Any]:
        found = principal()
        if found is None:
            raise errors.Unauthorized("sign in first")
        return checked(found)

    @bp.before_request
    def guard() -> None:
        if request.url_rule is None or request.method == "OPTIONS":
            return
        refuse_deep_json()
        prefix = current_app.extensions[MOUNTS][bp.name]
        enforce(PREFIX + request.url_rule.rule[len(prefix) :], who)

    bp.register_error_handler(errors.ChokaqError, from_chokaq_error)
    bp.register_error_handler(HTTPException, from_http_exception)
    return bp


def checked(found: Principal | Mapping[str, str]) -> dict[str, Any]:
    """The principal as the API's views read it (`g.principal`); a bad one is the app's configuration
    error, not the caller's."""
    name, role = (
        (found.name, found.role) if isinstance(found, Principal) else (found.get("name"), found.get("role"))
    )
    if role not in ROLES:
        raise errors.ConfigError(f"principal() gave role {role!r}; a role is one of {', '.join(ROLES)}")
    if not isinstance(name, str) or not name.strip() or len(name) > validation.MAX_ACTOR:
        raise errors.ConfigError(
            f"principal() gave name {name!r}; a name is 1-{validation.MAX_ACTOR} characters"
        )
    return {"name": name.strip(), "role": role}
