"""Fixtures every client-facing test directory shares (tests/cli, tests/client, tests/analysis, tests/core
import them in their conftest.py): a DbClient, the real API served on a socket, and both clients at once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from werkzeug.serving import make_server

from chokaq_api import create_app
from chokaq_ops import connect
from chokaq_ops.client import DbClient
from chokaq_ops.models import Actor
from chokaq_ops.settings import Settings
from chokaq_ops.storage import Store


@pytest.fixture
def client(store: Store):
    with DbClient(store, actor="alice") as c:
        yield c


# How often the serving thread looks for shutdown(): socketserver's default of 0.5 s made every test
# with a served API wait about that long in its teardown.
SHUTDOWN_POLL_S = 0.01


@contextmanager
def served_api(store: Store, db_url: str, **overrides: Any) -> Iterator[str]:
    """The real API served on a socket over `store` (settings `overrides` applied): its base URL."""
    app = create_app(Settings().with_overrides({"storage.url": db_url, **overrides}), store=store)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, args=(SHUTDOWN_POLL_S,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.shutdown()
        thread.join(5)


@pytest.fixture
def api(store, db_url) -> Iterator[tuple[str, dict[str, str]]]:
    """The real API served on a socket over `store`: its URL and a token per role."""
    with served_api(store, db_url) as url:
        tokens = {
            role: store.create_token(f"{role}-token", role, actor=Actor("setup"))
            for role in ("reader", "operator", "admin")
        }
        yield url, tokens


@pytest.fixture(params=["db", "http"])
def any_client(request, store, db_url) -> Iterator[Any]:
    """The same scenario through DbClient and through HttpClient over a real served app."""
    if request.param == "db":
        yield DbClient(store, actor="admin-token")
        return
    with served_api(store, db_url) as url:
        token = store.create_token("admin-token", "admin", actor=Actor("setup"))
        yield connect(url + "/", token)
