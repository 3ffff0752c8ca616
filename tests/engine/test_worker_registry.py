"""The worker registry and live concurrency: a running worker's slots changed over the API (the real
Flask app) take effect within a heartbeat, observed in the number of handlers running at once; lowering
cancels nothing."""

from __future__ import annotations

import threading
import time

import pytest
from worker_support import fast_settings, hosted, wait_for

from chokaq_api import create_app
from chokaq_ops.engine.handlers import Registry
from chokaq_ops.engine.retention import Retention
from chokaq_ops.models import Actor, NewJob
from chokaq_ops.storage import Store
from tests.api.conftest import ApiClient
from tests.support.dbprobe import sql


class Gauge:
    """Handlers running at once."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self.cancelled = 0
        self.lock = threading.Lock()

    def reset_peak(self) -> None:
        with self.lock:
            self.peak = self.now

    def run(self, seconds: float, ctx) -> None:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        try:
            time.sleep(seconds)
            if ctx.cancelled.is_set():
                self.cancelled += 1
        finally:
            with self.lock:
                self.now -= 1


def test_concurrency_lowered_and_raised_over_the_api(store: Store) -> None:
    reg = Registry()
    gauge = Gauge()

    @reg.job("slot.v1")
    def slot(payload, ctx):
        gauge.run(0.3, ctx)

    store.enqueue([NewJob(type="slot.v1", id=f"j{i:04d}") for i in range(400)])
    settings = fast_settings(store, worker__concurrency=8, worker__worker_id="w-live")
    client = ApiClient(
        create_app(settings, store=store), {"admin": store.create_token("a", "admin", actor=Actor("t"))}
    )
    with hosted(store, settings, reg):
        wait_for(lambda: gauge.now == 8, 10, "8 handlers at once")
        [row] = [w for w in client.get("/workers").json if w["worker_id"] == "w-live"]
        assert row["registered"] and row["alive"] and row["concurrency"] == 8 and row["pid"] > 0

        r = client.patch("/workers/w-live", json={"concurrency": 2})
        assert r.status_code == 200 and r.json["desired_concurrency"] == 2
        wait_for(lambda: gauge.now <= 2, 5, "running handlers drain to 2 (none cancelled)")
        gauge.reset_peak()
        time.sleep(1.0)  # three handler durations
        assert gauge.peak <= 2 and gauge.now >= 1
        [row] = [w for w in client.get("/workers").json if w["worker_id"] == "w-live"]
        assert row["concurrency"] == 2

        assert client.patch("/workers/w-live", json={"concurrency": 16}).status_code == 200
        wait_for(lambda: gauge.now == 16, 5, "16 handlers at once")
    assert gauge.cancelled == 0
    assert store.stats()["dlq"] == 0
    assert sql(store, "SELECT count(*) FROM jobs_archive WHERE attempt_count <> 1") == [(0,)]
    assert store.list_registry() == []  # a stopping worker removes its row


def test_bad_patches_change_nothing(store: Store) -> None:
    settings = fast_settings(store)
    client = ApiClient(
        create_app(settings, store=store), {"admin": store.create_token("a", "admin", actor=Actor("t"))}
    )
    store.worker_register("w1", host="h", pid=1, queues=["a"], concurrency=4, running=0, prefetched=0)
    for body in (
        {"concurrency": 0},
        {"concurrency": 2000},
        {"concurrency": "4"},
        {},
        {"concurrency": 2, "x": 1},
    ):
        r = client.patch("/workers/w1", json=body)
        assert r.status_code == 422, (body, r.json)
    assert client.patch("/workers/nobody", json={"concurrency": 2}).status_code == 404
    assert store.list_registry()[0]["desired_concurrency"] is None
    assert store.list_audit(action="set_worker").items == []


def test_retention_prunes_stale_registry_rows(store: Store) -> None:
    store.worker_register("old", host="h", pid=1, queues=None, concurrency=4, running=0, prefetched=0)
    store.worker_register("new", host="h", pid=2, queues=None, concurrency=4, running=0, prefetched=0)
    ago = (
        "now() - interval '2 days'"
        if store.dialect.name == "postgresql"
        else "strftime('%Y-%m-%d %H:%M:%f', 'now', '-2 days')"
    )
    sql(store, f"UPDATE workers SET last_seen_at = {ago} WHERE id = 'old'")
    result = Retention(store, fast_settings(store)).run(force=True)
    assert result["workers_pruned"] == 1 and [w["worker_id"] for w in store.list_registry()] == ["new"]


@pytest.mark.postgres_only
def test_a_registry_row_locked_for_a_moment_at_shutdown_is_still_removed(
    store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The stopping worker finds its row locked (its own last beat may still be writing it; here another
    session, which lets go right after that first try): it tries once more after UNREGISTER_RETRY_S and
    the row is gone, with no warning. A lock that outlasts the retry leaves the row in place
    (tests/crash/test_db_trouble.py::test_a_locked_registry_row_does_not_hold_up_shutdown)."""
    settings = fast_settings(store, worker__worker_id="w-brief")
    holder = store.dialect.connect()
    holder.autocommit = False
    tries: list[bool] = []
    real = store.worker_unregister

    def unregister(worker_id: str) -> bool:
        removed = real(worker_id)
        tries.append(removed)
        if len(tries) == 1:
            holder.rollback()  # the lock ends between the two tries
        return removed

    monkeypatch.setattr(store, "worker_unregister", unregister)
    try:
        with hosted(store, settings, Registry()):
            wait_for(lambda: [w["worker_id"] for w in store.list_registry()] == ["w-brief"], 10, "registered")
            holder.cursor().execute("SELECT id FROM workers WHERE id = ? FOR UPDATE", "w-brief")
    finally:
        holder.rollback()
        holder.close()
    assert tries == [False, True]
    assert store.list_registry() == []
    assert "left in place" not in caplog.text


def test_a_worker_is_registered_before_it_claims_anything(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rescue sweep returns a dead worker's prefetched jobs by its registry row (docs/rescue.md, phase
    1b). A worker killed after its first claim but before its row existed left them to wait
    FetchedJobTimeout (minutes), so the row is written before any claim. Registration is slowed here to
    make that window wide: no job may start inside it."""
    reg = Registry()
    started: list[bool] = []
    registered = threading.Event()

    @reg.job("early.v1")
    def early(payload, ctx):
        started.append(registered.is_set())

    store.enqueue([NewJob(type="early.v1", id=f"e{i}") for i in range(4)])
    real = store.worker_register

    def slow_register(worker_id: str, **kw):
        if not registered.is_set():
            time.sleep(0.5)
        desired = real(worker_id, **kw)
        registered.set()
        return desired

    monkeypatch.setattr(store, "worker_register", slow_register)
    with hosted(store, fast_settings(store, worker__worker_id="w-early"), reg):
        wait_for(lambda: len(started) == 4, 10, "the four jobs ran")
    assert started == [True] * 4
