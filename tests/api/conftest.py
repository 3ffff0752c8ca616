"""Fixtures for the API tests: an app over the `store` fixture (SQLite and PostgreSQL), one token per
role, and a client that speaks /api/v1 with a chosen role."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from chokaq_api import create_app
from chokaq_ops.models import Actor, NewJob
from chokaq_ops.settings import Settings
from chokaq_ops.storage import Store
from tests.support.served import Served, WorkerProc

PREFIX = "/api/v1"
ROLES = ("reader", "operator", "admin")

# Short stream timings so SSE tests end quickly.
TEST_SETTINGS = {
    "api.sse_keepalive": 0.2,
    "api.sse_poll_interval": 0.05,
    "api.sse_max_duration": 0.6,
    "api.max_body_bytes": 200_000,
}


class ApiClient:
    """The Flask test client with the /api/v1 prefix and a bearer token per role."""

    def __init__(self, app: Any, tokens: dict[str, str]) -> None:
        self.app = app
        self.raw = app.test_client()
        self.tokens = tokens

    def request(
        self, method: str, path: str, *, role: str | None = "admin", token: str | None = None, **kw: Any
    ) -> Any:
        headers = dict(kw.pop("headers", {}) or {})
        token = token if token is not None else (self.tokens[role] if role else None)
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return self.raw.open(PREFIX + path, method=method, headers=headers, **kw)

    def get(self, path: str, **kw: Any) -> Any:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> Any:
        return self.request("POST", path, **kw)

    def patch(self, path: str, **kw: Any) -> Any:
        return self.request("PATCH", path, **kw)

    def delete(self, path: str, **kw: Any) -> Any:
        return self.request("DELETE", path, **kw)


@pytest.fixture
def settings(db_url: str) -> Settings:
    return Settings().with_overrides({"storage.url": db_url, **TEST_SETTINGS})


@pytest.fixture
def app(store: Store, settings: Settings, bound_app: Callable[..., Any]) -> Any:
    return bound_app(settings, store=store)


@pytest.fixture
def tokens(store: Store) -> dict[str, str]:
    return {role: store.create_token(role, role, actor=Actor("test-setup")) for role in ROLES}


@pytest.fixture
def client(app: Any, tokens: dict[str, str]) -> Iterator[ApiClient]:
    yield ApiClient(app, tokens)


def enqueue(store: Store, n: int = 1, **kw: Any) -> list[str]:
    jobs = [
        NewJob(type=kw.get("type", "email.send.v1"), **{k: v for k, v in kw.items() if k != "type"})
        for _ in range(n)
    ]
    return [r.id for r in store.enqueue(jobs)]


def events_settled(store: Store, n: int, timeout: float = 10.0) -> list[dict[str, Any]]:
    """The first n events once readable. On PostgreSQL a fresh event waits while an older writing
    transaction of the same database is in flight (up to 5 s; see events_after)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        events = store.events_after(0, 1000)
        if len(events) >= n or time.monotonic() > deadline:
            return events
        time.sleep(0.05)


def pagination(response: Any) -> dict[str, Any]:
    return json.loads(response.headers["X-Pagination"])


WORKER = "test-worker-1"


def to_dlq(
    store: Store,
    n: int = 1,
    *,
    reason: Any = None,
    error: str = "ValueError: boom",
    queue: str = "default",
    **kw: Any,
) -> list[str]:
    """Enqueue n jobs in `queue` and kill them through the worker path (fetch, run, move to the DLQ)."""
    from chokaq_ops.fingerprint import fingerprint_text
    from chokaq_ops.models import FailureReason
    from chokaq_ops.storage import Dead

    ids = enqueue(store, n, queue=queue, **kw)
    fetched = store.fetch(WORKER, n, queues=[queue])
    assert sorted(r["id"] for r in fetched) == sorted(ids), "the queue held other due jobs"
    store.mark_processing(WORKER, ids)
    fp = fingerprint_text(error).id
    store.move_to_dlq(WORKER, [Dead(i, reason or FailureReason.Fatal, error, fingerprint=fp) for i in ids])
    return ids


def to_archive(store: Store, n: int = 1, *, queue: str = "default", **kw: Any) -> list[str]:
    ids = enqueue(store, n, queue=queue, **kw)
    store.fetch(WORKER, n, queues=[queue])
    store.mark_processing(WORKER, ids)
    store.archive_succeeded(WORKER, [(i, 12.5) for i in ids])
    return ids


@contextmanager
def fuzz_app_on(url: str, **overrides: Any) -> Iterator[tuple[Any, str]]:
    """An app over the migrated database `url`, seeded with jobs in every table, and an admin token: what
    the fuzzers send their requests to."""
    from chokaq_ops.models import FailureReason
    from chokaq_ops.storage.migrate import migrate

    with Store(url, pool_size=4) as store:
        migrate(store)
        enqueue(store, 3, queue="mail", tags="eu")
        to_dlq(store, 3, queue="dlq1", reason=FailureReason.Zombie)
        to_archive(store, 2, queue="done")
        token = store.create_token("fuzzer", "admin", actor=Actor("test"))
        settings = {
            "storage.url": url,
            **TEST_SETTINGS,
            "api.sse_max_duration": 0.05,
            "api.sse_max_streams": 64,
            "api.sse_max_streams_per_token": 64,
            # The seeded pending jobs wait for the whole fuzz run: readiness must not turn 503 on their
            # lag once the run takes longer than the default 10 s threshold.
            "health.queue_lag_degraded": 86_400,
            "health.queue_lag_unhealthy": 86_400,
            **overrides,
        }
        yield create_app(Settings().with_overrides(settings), store=store), token


@pytest.fixture
def e2e(db_url, tmp_path):
    """A store on the test database, an operator and an admin token, and a factory of served processes."""
    procs: list[Served | WorkerProc] = []
    with Store(db_url, pool_size=4) as store:
        tokens = {
            role: store.create_token(f"{role}-1", role, actor=Actor("test")) for role in ("operator", "admin")
        }

        def serve(name: str, *args: str) -> Served:
            proc = Served(db_url, tmp_path, name, *args)
            procs.append(proc)
            return proc

        def worker(name: str, *args: str) -> WorkerProc:
            proc = WorkerProc(db_url, tmp_path, name, *args)
            procs.append(proc)
            return proc

        serve.worker = worker  # type: ignore[attr-defined]

        try:
            yield store, tokens, serve, tmp_path
        finally:
            for p in procs:
                p.stop()
