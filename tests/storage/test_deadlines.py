"""Every database call has a bound (docs/configuration.md "Timeouts"): waits on the writer lock or a row
lock, a paused server or a half-open connection end in a transient error within the bound, never a hang,
and the store works again once the trouble is gone. Real databases, real locks, a real stalled link."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from typing import Any

import pytest
from crash.proxy import CuttableProxy

from chokaq_ops import errors
from chokaq_ops.models import Actor, NewJob
from chokaq_ops.storage import Store, deadline
from chokaq_ops.storage.migrate import migrate
from tests.support import dbprobe
from tests.support.dbprobe import processing


def timed_failure(fn: Any) -> tuple[float, errors.TransientStorageError]:
    start = time.monotonic()
    with pytest.raises(errors.TransientStorageError) as info:
        fn()
    return time.monotonic() - start, info.value


def row_locked(store: Store, job_id: str) -> contextlib.AbstractContextManager[Any]:
    """Another application's open transaction holding the job's row (SELECT ... FOR UPDATE)."""
    return dbprobe.row_locked(store, "SELECT id FROM jobs_hot WHERE id = ? FOR UPDATE", job_id)


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'bounded.db'}"
    with Store(url, pool_size=1) as s:
        migrate(s)
    return url


def test_sqlite_waits_for_the_writer_lock_only_as_long_as_the_command_timeout(sqlite_url, tmp_path):
    holder = sqlite3.connect(tmp_path / "bounded.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process in a long write transaction
    with Store(sqlite_url, command_timeout=0.5, max_transient_retries=0) as store:
        took, _ = timed_failure(lambda: store.enqueue([NewJob(type="t")]))
        assert took < 3.0  # the busy timeout was 30 s whatever Storage.CommandTimeout said
        holder.rollback()
        assert store.enqueue([NewJob(type="t")])[0].status == "new"


def test_a_time_limit_bounds_a_call_and_all_its_retries(sqlite_url, tmp_path):
    holder = sqlite3.connect(tmp_path / "bounded.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    with Store(sqlite_url, max_transient_retries=3, transient_retry_base_delay=0.2) as store:
        with deadline.limit(0.4):
            took, exc = timed_failure(lambda: store.enqueue([NewJob(type="t")]))
        assert took < 1.5 and isinstance(exc, errors.TransientStorageError)
        with deadline.limit(0.4):
            assert deadline.remaining() is not None
            with pytest.raises(deadline.DeadlineExceeded):
                time.sleep(0.45)
                store.now()  # the limit is spent before the call begins
    holder.rollback()


def test_a_call_waits_for_a_pooled_connection_only_within_its_bound(db_url):
    with Store(db_url, pool_size=1, command_timeout=0.3, max_transient_retries=0) as store:
        with store.connection():  # the only connection is busy (a call stuck on a paused server)
            took, exc = timed_failure(store.now)
        assert took < 1.5 and isinstance(exc, deadline.DeadlineExceeded)
        assert store.now() is not None


# ------------------------------------------------------------------------------------ PostgreSQL


def test_postgres_connections_carry_the_bounds(pg_url):
    with Store(pg_url, command_timeout=1.5, lock_timeout=0.25) as store:
        with store.connection() as conn:
            cur = conn.cursor()
            shown = {}
            for name in ("statement_timeout", "tcp_keepalives_idle", "idle_in_transaction_session_timeout"):
                cur.execute(f"SHOW {name}")
                shown[name] = cur.fetchone()[0]
        assert shown == {
            "statement_timeout": "1500ms",
            "tcp_keepalives_idle": "30",
            "idle_in_transaction_session_timeout": "1min",
        }
        hot = store.dialect.connect("hot")
        cur = hot.cursor()
        cur.execute("SHOW lock_timeout")
        assert cur.fetchone()[0] == "250ms"
        hot.close()
        assert "keepalives=1" in store.dialect.odbc and "tcp_user_timeout=60000" in store.dialect.odbc


def test_postgres_a_statement_blocked_by_a_row_lock_ends_at_the_command_timeout(pg_url):
    with Store(pg_url, command_timeout=1, max_transient_retries=0) as store:
        job_id = store.enqueue([NewJob(type="t")])[0].id
        with row_locked(store, job_id):
            took, exc = timed_failure(
                lambda: store.edit_pending(job_id, actor=Actor("op"), payload={"fixed": True})
            )
        assert 0.9 < took < 2.9, took  # the server's statement_timeout, before any client abort
        assert "statement timeout" in str(exc)
        assert store.edit_pending(job_id, actor=Actor("op"), payload={"fixed": True})


def test_postgres_worker_writes_wait_on_a_locked_row_only_for_the_lock_timeout(pg_url):
    with Store(pg_url, lock_timeout=0.3, max_transient_retries=0) as store:
        (job_id,) = processing(store, "w1", 1)
        with row_locked(store, job_id):
            took, exc = timed_failure(lambda: store.archive_succeeded("w1", [(job_id, 5.0)]))
        assert took < 1.5 and "lock timeout" in str(exc)
        assert store.archive_succeeded("w1", [(job_id, 5.0)]) == [job_id]


def test_postgres_a_heartbeat_skips_a_locked_row_and_beats_the_others(pg_url):
    with Store(pg_url) as store:
        ids = processing(store, "w1", 3)
        with row_locked(store, ids[0]):
            start = time.monotonic()
            beat, blocked = store.beat("w1", [*ids, "gone"])
            took = time.monotonic() - start
        assert took < 1.0
        assert (beat, blocked) == (set(ids[1:]), {ids[0]})
        assert store.beat("w1", ids) == (set(ids), set())


def test_postgres_a_half_open_connection_is_aborted_at_its_bound_and_replaced(pg_url):
    """The proxy stops forwarding without closing: the kernel still acknowledges every packet, so only
    the client's own deadline can end the wait."""
    proxy = CuttableProxy()
    try:
        with Store(
            proxy.url_for(pg_url), command_timeout=1, connect_timeout=1, max_transient_retries=0
        ) as store:
            assert store.now() is not None
            proxy.stall()
            took, exc = timed_failure(store.now)
            assert isinstance(exc, deadline.DeadlineExceeded) and took < 5.0, (took, exc)
            took, exc = timed_failure(store.now)  # a new connection cannot log in either
            assert took < 5.0, took
            proxy.restore()
            assert store.now() is not None
    finally:
        proxy.close()


def test_the_watchdog_is_woken_only_by_a_deadline_before_its_next_look():
    """Every database call arms a deadline; waking the watchdog thread for each (a thread switch per
    call) was measurable on a single-job enqueue. A deadline after the thread's next look waits for that
    look; an earlier one wakes it, and is still aborted on time."""
    dog = deadline._Watchdog()
    woken = []
    notify = dog._cv.notify
    dog._cv.notify = lambda n=1: (woken.append(n), notify(n))  # type: ignore[method-assign]
    # Starts the thread, which then sleeps at most 5 s (1 s if it saw this call in flight).
    dog.disarm(dog.arm(time.monotonic() + 1, lambda: None))
    for _ in range(200):
        if dog._next_look:
            break
        time.sleep(0.01)
    for _ in range(100):  # calls that end long before their bound, one after another
        dog.disarm(dog.arm(time.monotonic() + 30, lambda: None))
    assert woken == []
    fired = []
    token = dog.arm(time.monotonic() + 0.05, lambda: fired.append(time.monotonic()))
    began = time.monotonic()
    for _ in range(200):
        if fired:
            break
        time.sleep(0.01)
    assert woken and fired and fired[0] - began < 1.0
    assert dog.disarm(token)
