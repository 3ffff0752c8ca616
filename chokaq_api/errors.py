"""One error shape for every failure: `{code, status, message, errors}`.

chokaq_ops errors map to HTTP codes in one table; HTTP exceptions (404 routes, 405, 413, webargs 422)
and unexpected exceptions (500) are reshaped by the same function, so a client parses one format.
"""

from __future__ import annotations

import http
import logging
from typing import Any

import marshmallow as ma
from flask import Flask, request
from werkzeug.exceptions import HTTPException

from chokaq_ops import errors

log = logging.getLogger("chokaq.api")

# Most specific first: the first matching class decides the status.
STATUS_OF: tuple[tuple[type[errors.ChokaqError], int], ...] = (
    (errors.ValidationError, 422),
    (errors.ConfigError, 500),
    (errors.JobNotFound, 404),
    (errors.InvalidState, 409),
    (errors.Conflict, 409),
    (errors.Unauthorized, 401),
    (errors.Forbidden, 403),
    (errors.SchemaOutdated, 503),
    (errors.TransientStorageError, 503),
    (errors.StorageError, 500),
    (errors.ChokaqError, 500),
)


class ErrorSchema(ma.Schema):
    """The body of every error response."""

    code = ma.fields.Integer(required=True, metadata={"description": "HTTP status code", "example": 422})
    status = ma.fields.String(required=True, metadata={"description": "HTTP status name"})
    message = ma.fields.String(required=True, metadata={"description": "What went wrong, for a human"})
    errors = ma.fields.Dict(
        required=True,
        metadata={
            "description": "Field errors by location then field, e.g. "
            '{"json": {"payload": ["is not valid JSON ..."]}}; empty when no field is at fault'
        },
    )
    detail = ma.fields.Dict(
        metadata={
            "description": "What a script needs to act on some errors: a busy plan's lease "
            "{holder, seconds_left} (409, field lease); a label's two selections {bound, asked} (409, "
            "field label)"
        }
    )


def body(code: int, message: str | None = None, field_errors: dict[str, Any] | None = None) -> dict[str, Any]:
    status = http.HTTPStatus(code)
    return {
        "code": code,
        "status": status.phrase,
        "message": message or status.description or status.phrase,
        "errors": field_errors or {},
    }


def _location(field: str) -> str:
    if field in (request.view_args or {}):
        return "path"
    return "query" if request.method in ("GET", "HEAD", "DELETE") else "json"


def _describe(messages: dict[str, Any]) -> str:
    """`json.filter.reason: Must be one of ...` for the first field error, so curl users see it at once."""
    path: list[str] = []
    node: Any = messages
    while isinstance(node, dict) and node:
        key = next(iter(node))
        path.append(str(key))
        node = node[key]
    text = node[0] if isinstance(node, list) and node else node
    more = _count(messages) - 1
    suffix = f" (and {more} more)" if more > 0 else ""
    return f"invalid {'.'.join(path)}: {text}{suffix}" if path else "invalid input"


def _count(node: Any) -> int:
    if isinstance(node, dict):
        return sum(_count(v) for v in node.values())
    return 1


def from_http_exception(error: HTTPException) -> tuple[dict[str, Any], int, dict[str, str]]:
    code = error.code or 500
    data = getattr(error, "data", None) or {}
    field_errors = data.get("errors") or data.get("messages") or {}
    message = data.get("message")
    if not message and field_errors:
        message = _describe(field_errors)
    if not message:
        message = error.description if code < 500 else None
    headers = dict(data.get("headers") or {})
    if code == 405 and hasattr(error, "valid_methods") and error.valid_methods:
        headers["Allow"] = ", ".join(sorted(error.valid_methods))
    return body(code, message, field_errors), code, headers


def from_chokaq_error(error: errors.ChokaqError) -> tuple[dict[str, Any], int, dict[str, str]]:
    code = next(c for cls, c in STATUS_OF if isinstance(error, cls))
    headers: dict[str, str] = {}
    if code == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="chokaq"'
    if code == 503:
        headers["Retry-After"] = "5"
    if code >= 500 and not isinstance(error, errors.SchemaOutdated):
        # The database's own message may name tables or hosts: it goes to the log, not to the client.
        log.error("%s %s failed: %s", request.method, request.path, error, exc_info=error)
        message = "the database failed; see the server log" if code == 500 else "the database is busy; retry"
        return body(code, message), code, headers
    field_errors = {_location(error.field): {error.field: [str(error)]}} if error.field else {}
    out = body(code, str(error), field_errors)
    if isinstance(error, errors.PlanBusy):
        out["detail"] = {"holder": error.holder, "seconds_left": error.seconds_left}
    elif isinstance(error, errors.LabelMismatch):
        out["detail"] = {"bound": error.bound, "asked": error.asked}
    return out, code, headers


def init_app(app: Flask) -> None:
    app.register_error_handler(errors.ChokaqError, from_chokaq_error)
