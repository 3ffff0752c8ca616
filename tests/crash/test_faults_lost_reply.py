"""A start whose reply is lost: mark_processing commits, then the connection dies before the rows come
back. The fault test against a real worker hits this by chance (killed backends); here it is made
deterministic by failing the result read right after the commit, as a dead connection would."""

from __future__ import annotations

import sqlite3

import pytest

from chokaq_ops import errors
from chokaq_ops.storage import Store
from crash.support import counts, fetched


def lost_reply(store: Store) -> BaseException:
    if store.dialect.name == "sqlite":
        return sqlite3.OperationalError("database is locked")  # the transient error SQLite can give
    import pyodbc

    return pyodbc.Error("08S01", "[08S01] communication link failure")


@pytest.fixture
def lose_next_reply(store, monkeypatch):
    """Arm: the next statement runs and commits, then reading its rows fails once."""
    original = store.dialect.rows
    armed = {"on": False}

    def rows(cursor):
        got = original(cursor)  # every row read: the statement is complete and committed
        if armed["on"]:
            armed["on"] = False
            raise lost_reply(store)
        return got

    monkeypatch.setattr(store.dialect, "rows", rows)
    return lambda: armed.update(on=True)


def test_a_retried_start_runs_the_jobs_its_lost_attempt_marked(store, lose_next_reply):
    ids = fetched(store, "w", 3)
    lose_next_reply()
    marked = store.mark_processing("w", ids)  # attempt 1 commits and fails, attempt 2 finds them marked
    assert sorted(marked) == sorted(ids)
    assert {m["attempt_count"] for m in marked.values()} == {1}  # started once, counted once
    assert store.archive_succeeded("w", [(i, 1.0) for i in ids]) == ids
    assert counts(store)["archive"] == 3


def test_a_start_that_gave_up_is_recognised_on_the_workers_next_try(db_url, lose_next_reply, store):
    with Store(db_url, pool_size=2, max_transient_retries=0) as impatient:
        ids = fetched(impatient, "w", 2)
        impatient.dialect.rows = store.dialect.rows  # the same lossy reader
        lose_next_reply()
        with pytest.raises(errors.TransientStorageError):
            impatient.mark_processing("w", ids)  # committed, but the worker is told it failed
        again = impatient.mark_processing("w", ids)  # the worker's own retry
        assert sorted(again) == sorted(ids) and {m["attempt_count"] for m in again.values()} == {1}


def test_a_plain_replay_is_still_refused(store):
    ids = fetched(store, "w", 1)
    assert list(store.mark_processing("w", ids)) == ids
    assert store.mark_processing("w", ids) == {}  # no lost reply: a second start is a replay
    assert store.get_job(ids[0])["attempt_count"] == 1


def test_a_start_that_gave_up_then_a_release_puts_the_jobs_back_untouched(db_url, lose_next_reply, store):
    """The worker's other way out: it gives up on the jobs and releases them. They never ran, so they go
    back to pending with the attempt the lost start counted taken back, and another worker runs them."""
    with Store(db_url, pool_size=2, max_transient_retries=0) as impatient:
        ids = fetched(impatient, "w", 2)
        impatient.dialect.rows = store.dialect.rows
        lose_next_reply()
        with pytest.raises(errors.TransientStorageError):
            impatient.mark_processing("w", ids)
        assert {impatient.get_job(i)["status"] for i in ids} == {"processing"}  # committed after all
        assert sorted(impatient.release("w", ids)) == sorted(ids)
    for i in ids:
        job = store.get_job(i)
        assert (job["status"], job["worker_id"], job["attempt_count"]) == ("pending", None, 0)
    assert sorted(r["id"] for r in store.fetch("w2", 10)) == sorted(ids)
    assert {m["attempt_count"] for m in store.mark_processing("w2", ids).values()} == {1}


def test_a_release_never_touches_a_job_the_worker_really_started(store):
    ids = fetched(store, "w", 1)
    store.mark_processing("w", ids)
    assert store.release("w", ids) == []  # running: only the sweep or the worker's result may move it
    assert store.get_job(ids[0])["status"] == "processing"
