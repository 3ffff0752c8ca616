"""Server-Sent Events from the durable events table.

Every API process reads the same table, so a client sees the same stream whichever process serves it,
and reconnecting with `Last-Event-ID` resumes exactly where it stopped. A stream polls the table and
holds no database connection between polls. Each open stream occupies one server thread, so their number
is capped (Api.SseMaxStreams) and each ends after Api.SseMaxDuration; EventSource clients reconnect on
their own.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

from flask import Response, request
from flask.views import MethodView
from flask_smorest import abort

from chokaq_api.extensions import Blueprint, ctx
from chokaq_api.fields import UtcDateTime
from chokaq_api.resources.events.schemas import EventsQuery
from chokaq_ops import errors
from chokaq_ops.models import FailureReason
from chokaq_ops.settings import ApiSettings
from chokaq_ops.storage import Store

URL = "/events"
blp = Blueprint("events", __name__, description="Live events (Server-Sent Events).")
log = logging.getLogger("chokaq.api.events")

BATCH = 200
RECONNECT_MS = 3000
_time = UtcDateTime()


def message(row: dict[str, Any]) -> str:
    data = row.get("data")
    if isinstance(data, str):
        with contextlib.suppress(ValueError):
            data = json.loads(data)
    if isinstance(data, dict) and isinstance(data.get("reason"), int):
        data["reason"] = FailureReason(data["reason"]).name  # the API speaks reason names
    body = {
        "id": int(row["id"]),
        "at": _time._serialize(row["at"], None, None),
        "kind": row["kind"],
        "message": row["message"],
        "data": data,
    }
    return f"id: {body['id']}\nevent: {row['kind']}\ndata: {json.dumps(body, separators=(',', ':'))}\n\n"


def stream(store: Store, after: int, cfg: ApiSettings) -> Iterator[str]:
    """Events after `after` as SSE messages, with keep-alive comments, until cfg.sse_max_duration."""
    yield f"retry: {RECONNECT_MS}\n\n"
    started = quiet_since = time.monotonic()
    while True:
        try:
            rows = store.events_after(after, limit=BATCH)
        except errors.ChokaqError as exc:  # the database blinked: say so and keep the stream open
            log.warning("event stream cannot read events: %s", exc)
            rows = []
            yield ": storage unavailable, retrying\n\n"
        for row in rows:
            after = int(row["id"])
            yield message(row)
        now = time.monotonic()
        if rows:
            quiet_since = now
            if len(rows) == BATCH:
                continue  # a backlog: drain it before sleeping
        if now - started >= cfg.sse_max_duration:
            return
        if now - quiet_since >= cfg.sse_keepalive:
            yield ": keep-alive\n\n"
            quiet_since = now
        time.sleep(max(0.0, min(cfg.sse_poll_interval, cfg.sse_max_duration - (now - started))))


MAX_EVENT_ID = 2**63 - 1
MAX_EVENT_ID_DIGITS = len(str(MAX_EVENT_ID))


def bad_event_id() -> None:
    abort(
        422,
        message=f"invalid headers.Last-Event-ID: Must be an event id (digits, at most {MAX_EVENT_ID}).",
        errors={"headers": {"Last-Event-ID": [f"Must be an event id between 0 and {MAX_EVENT_ID}."]}},
    )


def start_after(args: dict[str, Any], store: Store) -> int:
    header = request.headers.get("Last-Event-ID", "").strip()
    if header:  # a reconnecting EventSource: resume exactly after the last event it saw
        # ASCII digits only (str.isdigit accepts '²' and other scripts' digits, which int() refuses) and
        # no more than a BIGINT holds: the id is bound as a 64-bit integer.
        if not (len(header) <= MAX_EVENT_ID_DIGITS and header.isascii() and header.isdigit()):
            bad_event_id()
        after = int(header)
        if after > MAX_EVENT_ID:
            bad_event_id()
        return after
    if "after" in args:
        return args["after"]
    return store.last_event_id()


@blp.route("")
class Events(MethodView):
    @blp.arguments(EventsQuery, location="query")
    @blp.doc(
        responses={
            "200": {
                "description": "text/event-stream: `id: <event id>`, `event: <kind>`, `data: <Event JSON>` "
                "(schema `Event`); comment lines (`: keep-alive`) while idle.",
                "content": {
                    "text/event-stream": {
                        "schema": {
                            "type": "object",
                            "description": "One message of the stream.",
                            "properties": {
                                "id": {"type": "string", "description": "The event id (resume after it)"},
                                "event": {"type": "string", "description": "The event kind"},
                                "data": {"type": "string", "description": "JSON of the Event schema"},
                                "retry": {"type": "integer", "description": "Reconnect delay (ms)"},
                            },
                        }
                    }
                },
            },
            "503": "SERVICE_UNAVAILABLE",
        }
    )
    def get(self, args: dict[str, Any]) -> Any:
        """Live events: rescue sweeps, DLQ arrivals, resurrects, purges, cancels, queue changes"""
        c = ctx()
        after = start_after(args, c.store)
        if not c.streams.acquire(blocking=False):
            abort(
                503,
                message=f"too many open event streams (Api.SseMaxStreams={c.settings.api.sse_max_streams})",
                headers={"Retry-After": "5"},
            )
        response = Response(
            stream(c.store, after, c.settings.api),
            mimetype="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        response.call_on_close(c.streams.release)
        return response
