"""waitress as `chokaq serve` runs it: limits from Api settings and errors in the API's one JSON shape.

waitress reads each request completely (headers and body) on its I/O thread before a worker thread sees
it, so an unfinished request costs a socket and a buffer, never a thread. What bounds a slow or hostile
client is therefore: how long a silent connection may stay (Api.ChannelTimeout), how many connections are
accepted at once (Api.ConnectionLimit) and how much body is buffered (Api.MaxBodyBytes, checked before
authentication because nothing is authenticated until the request is complete). A request waitress
refuses itself (a body too large, a malformed request line) gets the JSON error shape, like every
response of the app.
"""

from __future__ import annotations

import json
from typing import Any

from waitress import create_server
from waitress.channel import HTTPChannel
from waitress.task import ErrorTask

from chokaq_api.errors import body
from chokaq_ops.settings import Settings

# How often waitress looks for connections past Api.ChannelTimeout (its default is every 30 s).
MAX_CLEANUP_INTERVAL = 5.0


class JsonErrorTask(ErrorTask):
    """waitress's own error responses (400, 413, 431 ...) as `{code, status, message, errors}`."""

    def execute(self) -> None:
        error = self.request.error
        message = f"{error.reason}: {error.body}" if getattr(error, "body", "") else error.reason
        if error.code == 413:
            limit = self.channel.server.adj.max_request_body_size
            message = f"the request body is larger than Api.MaxBodyBytes ({limit:,} bytes)"
        payload = json.dumps(body(error.code, message)).encode()
        self.status = f"{error.code} {error.reason}"
        self.response_headers.extend(
            [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))]
        )
        self.set_close_on_finish()
        self.content_length = len(payload)
        self.write(payload)


class JsonErrorChannel(HTTPChannel):
    error_task_class = JsonErrorTask


def create(app: Any, settings: Settings) -> Any:
    """A waitress server bound to Api.Host:Api.Port with the Api limits (not yet serving)."""
    api = settings.api
    server = create_server(
        app,
        host=api.host,
        port=api.port,
        threads=api.threads,
        ident="chokaq",
        max_request_body_size=api.max_body_bytes,
        channel_timeout=api.channel_timeout,
        cleanup_interval=max(0.5, min(MAX_CLEANUP_INTERVAL, api.channel_timeout / 2)),
        connection_limit=api.connection_limit,
        # select() cannot watch descriptors above 1023; poll() can, and Api.ConnectionLimit may exceed it.
        asyncore_use_poll=True,
        # Reading ahead lets waitress notice a closed connection while a response streams, so an event
        # stream whose client left ends within a poll interval instead of at its next failed write.
        channel_request_lookahead=1,
        clear_untrusted_proxy_headers=True,
    )
    server.channel_class = JsonErrorChannel
    return server
