"""Transient database errors (issue 2 §5): real SQLite busy errors, real PostgreSQL deadlocks and killed
connections are retried with backoff and the operation succeeds; a bulk operation retries only the batch
that failed, never one that committed."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from storage_factories import OPS, audit, counters, dead, enqueue, events, scalar

from chokaq_ops import errors
from chokaq_ops.models import NewJob
from chokaq_ops.storage import Store, admin_ops
from chokaq_ops.storage.dialects import from_url


def _sqlite_path(url: str) -> str:
    return url.removeprefix("sqlite:///")


class SqliteWriteLock:
    """Another process's writer: holds SQLite's write lock until released (or for `hold` seconds)."""

    def __init__(self, url: str) -> None:
        self.conn = sqlite3.connect(_sqlite_path(url), isolation_level=None, check_same_thread=False)
        self.conn.execute("BEGIN IMMEDIATE")

    def release_after(self, hold: float) -> threading.Timer:
        timer = threading.Timer(hold, self.release)
        timer.start()
        return timer

    def release(self) -> None:
        self.conn.rollback()
        self.conn.close()


def impatient_sqlite_store(url: str, **kw: Any) -> Store:
    """A Store whose SQLite connections give up on a lock after 30 ms, so a held lock surfaces as SQLITE_BUSY
    (the default busy timeout would simply wait it out)."""
    store = Store(url, pool_size=2, max_transient_retries=8, transient_retry_base_delay=0.05, **kw)
    store.dialect.busy_timeout_ms = 30  # type: ignore[attr-defined]
    return store


def test_sqlite_busy_is_retried_and_the_write_succeeds(sqlite_url):
    db_url = sqlite_url
    with impatient_sqlite_store(db_url) as store:
        [job] = enqueue(store, 1)
        lock = SqliteWriteLock(db_url)
        timer = lock.release_after(0.3)
        started = time.monotonic()
        res = store.enqueue([NewJob(type="t", id="while-locked")])
        timer.join()
        assert res[0].status == "new" and time.monotonic() - started >= 0.25
        assert store.retries_done >= 1
        assert scalar(store, "SELECT count(*) FROM jobs_hot") == 2 and counters(store)["enqueued"] == 2
        # A multi-statement move under the same contention commits once.
        store.fetch("w", 10)
        store.mark_processing("w", [job])
        lock = SqliteWriteLock(db_url)
        timer = lock.release_after(0.2)
        before = store.retries_done
        assert store.archive_succeeded("w", [(job, 1.0)]) == [job]
        timer.join()
        assert store.retries_done > before
        assert counters(store)["succeeded"] == 1 and scalar(store, "SELECT count(*) FROM jobs_archive") == 1


def test_sqlite_gives_up_after_the_retry_budget_with_a_transient_error(sqlite_url):
    db_url = sqlite_url
    with Store(db_url, pool_size=1, max_transient_retries=2, transient_retry_base_delay=0.01) as store:
        store.dialect.busy_timeout_ms = 10  # type: ignore[attr-defined]
        lock = SqliteWriteLock(db_url)
        try:
            with pytest.raises(errors.TransientStorageError):
                store.enqueue([NewJob(type="t")])
        finally:
            lock.release()
        assert store.retries_done == 2
        assert scalar(store, "SELECT count(*) FROM jobs_hot") == 0


# ------------------------------------------------------------------------------------ PostgreSQL


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[Store]:
    with Store(pg_url, pool_size=4, max_transient_retries=5, transient_retry_base_delay=0.02) as s:
        yield s


def pg_admin(url: str) -> Any:
    return from_url(url).connect()


def one(conn: Any, text: str, *params: Any) -> Any:
    cur = conn.cursor()
    try:
        cur.execute(text, params)
        return cur.fetchone()[0] if cur.description else None
    finally:
        cur.close()


def terminate_store_backends(admin: Any) -> int:
    """Kill every other session on this database (the Store's pooled connections) and wait for them to go."""
    return int(
        one(
            admin,
            "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
    )


def test_pg_killed_connection_between_calls_is_retried(pg_store, pg_url):
    [job] = enqueue(pg_store, 1)
    pg_store.release("w", ["none"])  # the worker's statements have pooled connections of their own
    admin = pg_admin(pg_url)
    try:
        assert terminate_store_backends(admin) >= 2
        assert [r["id"] for r in pg_store.fetch("w", 1)] == [job]  # on a dead pooled connection at first
        assert pg_store.retries_done >= 1
        terminate_store_backends(admin)
        assert pg_store.mark_processing("w", [job])[job]["attempt_count"] == 1
        terminate_store_backends(admin)
        assert pg_store.archive_succeeded("w", [(job, 1.0)]) == [job]
        assert counters(pg_store) == {"enqueued": 1, "succeeded": 1, "failed": 0, "retried": 0}
    finally:
        admin.close()


def test_pg_deadlock_victim_is_retried_and_succeeds(pg_store, pg_url):
    a, b = enqueue(pg_store, 2)
    admin = pg_admin(pg_url)
    dbname = pg_url.rpartition("/")[2]
    # The Store's sessions check for deadlock 300 ms into a lock wait, the other one only after 60 s: the
    # Store is the victim as long as the other transaction closes the cycle within those 300 ms.
    one(admin, f"ALTER DATABASE \"{dbname}\" SET deadlock_timeout = '300ms'")
    pg_store.pool.discard_idle()  # new sessions pick the setting up
    other = pg_admin(pg_url)
    one(other, "SET deadlock_timeout = '60s'")
    other.autocommit = False
    attempts: list[int] = []
    locked_a = threading.Event()

    def two_edits(tx: Any) -> None:
        attempts.append(1)
        tx.run(
            "edit_pending",
            id=a,
            actor="store",
            plan_id=None,
            payload='{"by":"store"}',
            tags=None,
            priority=None,
        )
        locked_a.set()
        tx.run(
            "edit_pending",
            id=b,
            actor="store",
            plan_id=None,
            payload='{"by":"store"}',
            tags=None,
            priority=None,
        )

    try:
        one(other, "UPDATE jobs_hot SET priority = 1 WHERE id = ?", b)  # the other transaction holds b
        result: dict[str, Any] = {}
        worker = threading.Thread(target=lambda: result.setdefault("v", pg_store.transaction(two_edits)))
        worker.start()
        assert locked_a.wait(10)
        # Wait until the Store's transaction is blocked on b, then close the cycle: the Store waited first, so
        # its deadlock check fires first and it is the victim.
        deadline = time.monotonic() + 10
        while not one(
            admin,
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'",
        ):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        one(other, "UPDATE jobs_hot SET priority = 2 WHERE id = ?", a)
        other.commit()
        worker.join(20)
        assert not worker.is_alive()
        assert len(attempts) >= 2 and pg_store.retries_done >= 1
        for job in (a, b):
            row = pg_store.get_job(job)
            assert (row["payload"], row["last_modified_by"], row["priority"]) == (
                '{"by":"store"}',
                "store",
                1 if job == b else 2,
            )
        assert len(audit(pg_store, "edit_pending")) == 2  # the rolled-back attempt left no audit row
    finally:
        other.close()
        admin.close()


# ------------------------------------------------------------------------------------ bulk operations


def _fault(store: Store, url: str) -> Any:
    """A real transient fault for the next statement: SQLite - another writer holds the lock for a moment;
    PostgreSQL - the Store's connections are killed."""
    if url.startswith("sqlite"):
        SqliteWriteLock(url).release_after(0.25)
        return None
    admin = pg_admin(url)
    try:
        terminate_store_backends(admin)
    finally:
        admin.close()
    return None


@pytest.fixture
def fault_store(db_url: str) -> Iterator[Store]:
    if db_url.startswith("sqlite"):
        store = impatient_sqlite_store(db_url, cleanup_batch_size=2)
    else:
        store = Store(
            db_url,
            pool_size=2,
            cleanup_batch_size=2,
            max_transient_retries=5,
            transient_retry_base_delay=0.02,
            # One chunk at a time: these faults land between two given chunks. A fault in a chunk in
            # flight beside another: test_bulk_streams.py.
            bulk_streams=1,
        )
    with store:
        yield store


def test_a_fault_in_batch_two_retries_only_batch_two(fault_store, db_url):
    store = fault_store
    ids = dead(store, 6, prefix="p")
    fired: list[int] = []

    def progress(done: int) -> None:
        if not fired:  # after batch 1 committed
            fired.append(done)
            _fault(store, db_url)

    res = store.purge_dlq(ids=ids, actor=OPS, progress=progress)
    assert fired == [2] and store.retries_done >= 1
    assert (res.count, res.batches) == (6, 3)
    assert scalar(store, "SELECT count(*) FROM jobs_dlq") == 0 and counters(store)["failed"] == 0
    assert len(audit(store, "purge_dlq")) == 6  # batch 1 was not purged (and audited) twice
    assert [e["data"]["count"] for e in events(store, "purge")] == [2, 2, 2]


def test_a_fault_between_resurrect_chunks_never_repeats_a_committed_chunk(fault_store, db_url, monkeypatch):
    store = fault_store
    monkeypatch.setattr(admin_ops, "RESURRECT_CHUNK", 2)
    ids = dead(store, 5, prefix="r")
    fired: list[int] = []

    def progress(done: int) -> None:
        if not fired:
            fired.append(done)
            _fault(store, db_url)

    res = store.resurrect_many(ids=ids, actor=OPS, progress=progress)
    assert (res.count, res.batches) == (5, 3) and store.retries_done >= 1
    assert [e["data"]["count"] for e in events(store, "resurrect")] == [2, 2, 1]
    assert len(audit(store, "resurrect")) == 5
    assert scalar(store, "SELECT count(*) FROM jobs_hot") == 5 and counters(store)["failed"] == 0
