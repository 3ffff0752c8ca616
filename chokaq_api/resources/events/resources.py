"""Server-Sent Events from the durable events table.

Every API process reads the same table, so a client sees the same stream whichever process serves it,
and reconnecting with `Last-Event-ID` resumes exactly where it stopped. A stream polls the table and
holds no database connection between polls. Each open stream occupies one server thread, so their number
is capped (Api.SseMaxStreams, and Api.SseMaxStreamsPerToken for one token) and each ends after
Api.SseMaxDuration; EventSource clients reconnect on their own. A stream also ends when its client
disconnects (noticed within a poll interval) or its token is revoked (within Api.SseTokenRecheck).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

from flask import Response, g, request
from flask.views import MethodView
from flask_smorest import abort

from chokaq_api.auth import bearer_token
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
# waitress's callable that tells whether the client has gone (chokaq_api.server turns it on).
DISCONNECTED = "waitress.client_disconnected"
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


class Guard:
    """Why an open stream must end early: its client went away (waitress reports it when the server reads
    ahead, see chokaq_api.server), or its token was revoked (re-read every Api.SseTokenRecheck)."""

    def __init__(self, store: Store, token: str, cfg: ApiSettings, disconnected: Any = None) -> None:
        self.store = store
        self.token = token
        self.recheck = cfg.sse_token_recheck
        self.disconnected = disconnected
        self.checked = time.monotonic()

    def reason(self) -> str | None:
        if self.disconnected is not None and self.disconnected():
            return "disconnected"
        now = time.monotonic()
        if now - self.checked >= self.recheck:
            self.checked = now
            try:
                if self.store.verify_token(self.token) is None:
                    return "revoked"
            except errors.ChokaqError:
                pass  # the database blinked: the stream says so below and the next check decides
        return None


def stream(store: Store, after: int, cfg: ApiSettings, guard: Guard | None = None) -> Iterator[str]:
    """Events after `after` as SSE messages, with keep-alive comments, until cfg.sse_max_duration, the
    client disconnects or the token is revoked."""
    yield f"retry: {RECONNECT_MS}\n\n"
    started = quiet_since = time.monotonic()
    while True:
        why = guard.reason() if guard is not None else None
        if why == "revoked":
            yield ": the token was revoked; the stream ends\n\n"
            return
        if why is not None:
            return
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
            "429": "TOO_MANY_REQUESTS",
            "503": "SERVICE_UNAVAILABLE",
        }
    )
    def get(self, args: dict[str, Any]) -> Any:
        """Live events: rescue sweeps, DLQ arrivals, resurrects, purges, cancels, queue changes"""
        c = ctx()
        after = start_after(args, c.store)
        name = g.principal["name"]
        release = take_slot(c, name)
        guard = Guard(c.store, bearer_token() or "", c.settings.api, request.environ.get(DISCONNECTED))
        response = Response(
            stream(c.store, after, c.settings.api, guard),
            mimetype="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        response.call_on_close(release)
        return response


def take_slot(c: Any, name: str) -> Any:
    """One of the Api.SseMaxStreams slots, at most Api.SseMaxStreamsPerToken of them per token: 429 when
    this token holds its share, 503 when every slot is taken. Returns the function that gives it back."""
    cfg = c.settings.api
    with c.stream_lock:
        if c.stream_holders.get(name, 0) >= cfg.sse_max_streams_per_token:
            abort(
                429,
                message=f"token {name!r} holds {c.stream_holders[name]} open event stream(s) "
                f"(Api.SseMaxStreamsPerToken={cfg.sse_max_streams_per_token}); close one first",
                headers={"Retry-After": "5"},
            )
        if not c.streams.acquire(blocking=False):
            abort(
                503,
                message=f"too many open event streams (Api.SseMaxStreams={cfg.sse_max_streams})",
                headers={"Retry-After": "5"},
            )
        c.stream_holders[name] = c.stream_holders.get(name, 0) + 1
    released = False

    def release() -> None:
        nonlocal released
        with c.stream_lock:
            if released:
                return
            released = True
            c.stream_holders[name] -= 1
            if not c.stream_holders[name]:
                del c.stream_holders[name]
        c.streams.release()

    return release
