"""A real HTTP webhook receiver for the alert tests: a threaded server on a free local port that records
every request (path, headers, body) and answers with the statuses it is given (the last one repeats)."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# The path holds a token, as a Slack webhook's does: it must never show anywhere either.
SECRET_PATH = "/hooks/T0KEN-in-the-path-9f8e7d"


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Webhook:
    url: str
    statuses: list[int] = field(default_factory=lambda: [200])
    requests: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, *statuses: int) -> None:
        with self.lock:
            self.statuses = list(statuses)

    def _next_status(self) -> int:
        with self.lock:
            return self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]


def signature_ok(secret: str, r: Received) -> bool:
    """Verified as a receiver would, independently of chokaq's code: HMAC-SHA256 over "<ts>.<body>"."""
    ts = r.headers["X-Chokaq-Timestamp"]
    want = "v1=" + hmac.new(secret.encode(), ts.encode() + b"." + r.body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(want, r.headers["X-Chokaq-Signature"])


@contextmanager
def webhook() -> Iterator[Webhook]:
    hook: Webhook

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with hook.lock:
                hook.requests.append(Received(self.path, dict(self.headers), body))
            status = hook._next_status()
            self.send_response(status)
            if status == 429:
                self.send_header("Retry-After", "0")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hook = Webhook(f"http://127.0.0.1:{server.server_port}{SECRET_PATH}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hook
    finally:
        server.shutdown()
        server.server_close()
