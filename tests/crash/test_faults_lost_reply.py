"""A start whose reply is lost: mark_processing commits, then the connection dies before the rows come
back. The fault test against a real worker hits this by chance (killed backends); here it is made
deterministic by failing the result read right after the commit, as a dead connection would."""

from __future__ import annotations

import sqlite3

import pytest

from chokaq_ops import errors
from chokaq_ops.models import Actor, DlqFilter, FailureReason, NewJob
from chokaq_ops.storage import Dead, Store, admin_ops
from crash.support import counts, fetched


def lost_reply(store: Store) -> BaseException:
    if store.dialect.name == "sqlite":
        return sqlite3.OperationalError("database is locked")  # the transient error SQLite can give
    import pyodbc

    return pyodbc.Error("08S01", "[08S01] communication link failure")


@pytest.fixture
def lose_reply_of(store, monkeypatch):
    """Arm: the n-th statement from now (1: the next) runs and commits, then reading its rows fails."""
    original = store.dialect.rows
    armed = {"countdown": 0}

    def rows(cursor):
        got = original(cursor)
        if armed["countdown"]:
            armed["countdown"] -= 1
            if armed["countdown"] == 0:
                raise lost_reply(store)
        return got

    monkeypatch.setattr(store.dialect, "rows", rows)
    return lambda n: armed.update(countdown=n)


@pytest.fixture
def lose_next_reply(lose_reply_of):
    """Arm: the next statement runs and commits, then reading its rows fails once."""
    return lambda: lose_reply_of(1)


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


# ------------------------------------------------------------------------------------ operator paths


@pytest.fixture
def lose_commit_reply(monkeypatch):
    """`lose(store, skip=0)` arms: the next unit of work that commits on `store` (a statement run on its
    own, or a transaction) after `skip` others does commit, then its reply is lost once: the caller sees a
    connection failure."""

    def lose(store: Store, skip: int = 0, meanwhile=None) -> dict:
        """`meanwhile()` runs after the commit, before the reply is lost (what other sessions did then)."""
        dialect = store.dialect
        armed = {"on": True, "skip": skip}
        rows_of, commit_of, execute_of = dialect.rows, dialect.commit, dialect.execute

        def on_its_own(cursor) -> bool:
            conn = cursor.connection
            return conn.autocommit if store.dialect.name != "sqlite" else not conn.in_transaction

        def rows(cursor):
            got = rows_of(cursor)
            if armed["on"] and on_its_own(cursor):  # a statement that committed by itself
                fire()
            return got

        def execute(cursor, statement, params):
            execute_of(cursor, statement, params)
            if armed["on"] and cursor.description is None and on_its_own(cursor):  # one with no rows back
                fire()

        def commit(conn):
            commit_of(conn)
            if armed["on"]:
                fire()

        def fire() -> None:
            if armed["skip"]:
                armed["skip"] -= 1
                return
            armed["on"] = False
            if meanwhile is not None:
                meanwhile()
            raise lost_reply(store)

        monkeypatch.setattr(dialect, "rows", rows)
        monkeypatch.setattr(dialect, "commit", commit)
        monkeypatch.setattr(dialect, "execute", execute)
        return armed

    return lose


OPS = Actor("ops")


@pytest.mark.parametrize("explicit", [True, False], ids=["explicit-ids", "generated-ids"])
def test_an_enqueue_whose_commit_reply_was_lost_reports_its_jobs_as_new(store, lose_commit_reply, explicit):
    """Before: the store's retry found the jobs its lost attempt had inserted and answered `conflict` (or
    `duplicate` of the job itself) for every one of them."""
    jobs = [
        NewJob(type="t", id=f"e{i}" if explicit else None, idempotency_key="k1" if i == 0 else None)
        for i in range(3)
    ]
    lose_commit_reply(store)
    res = store.enqueue(jobs)
    assert store.retries_done >= 1  # the reply really was lost and the call retried
    assert [(r.status, r.created) for r in res] == [("new", True)] * 3
    if explicit:
        assert [r.id for r in res] == ["e0", "e1", "e2"]
    assert counts(store)["hot"] == 3 == counts(store)["enqueued_total"]
    # A real re-send is still refused.
    again = store.enqueue([NewJob(type="t", id=r.id) for r in res])
    assert {r.status for r in again} == {"conflict"}


def test_a_single_enqueue_whose_reply_was_lost_is_new_once(store, lose_commit_reply):
    """The lean one-job statement (prepared on PostgreSQL): its retry finds the job its lost attempt
    committed, answers `new`, and neither inserts nor counts it twice."""
    store.enqueue([NewJob(type="t")])  # the statement is prepared on a producer connection already
    lost = lose_commit_reply(store)
    [res] = store.enqueue([NewJob(type="t", payload={"n": 1})])
    assert not lost["on"]  # the reply really was lost
    assert (res.status, res.created) == ("new", True)
    assert store.get_job(res.id)["payload"] == '{"n":1}'
    assert counts(store)["hot"] == 2 == counts(store)["enqueued_total"]


@pytest.mark.parametrize("kind", ["generated-id", "explicit-id", "idempotency-key"])
def test_an_audited_enqueue_whose_reply_was_lost_is_new_once_with_one_audit_row(
    store, lose_commit_reply, kind
):
    """The API's POST /jobs (one statement for a generated id, a transaction otherwise): its retry finds
    the job, and the audit row, that its lost attempt committed, answers `new` (the API's 201, not a 409
    or a 200 for the caller's own job) and writes neither twice."""
    store.enqueue_audited(NewJob(type="t"), actor=OPS)  # a connection is open: the lost reply is ours
    lose_commit_reply(store)
    job = NewJob(
        type="t",
        payload={"n": 1},
        id="api-own" if kind == "explicit-id" else None,
        idempotency_key="api-key" if kind == "idempotency-key" else None,
    )
    res = store.enqueue_audited(job, actor=OPS, max_queues=100)
    assert store.retries_done >= 1
    assert (res.status, res.created) == ("new", True)
    assert store.get_job(res.id)["payload"] == '{"n":1}'
    assert counts(store)["hot"] == 2 == counts(store)["enqueued_total"]
    assert [e.job_id for e in store.list_audit(action="enqueue").items].count(res.id) == 1


def test_a_group_of_single_enqueues_whose_reply_was_lost_is_new_once(store, lose_commit_reply):
    """Single-job enqueues of concurrent threads go out as one statement (storage/combining.py): its
    retry finds the jobs its lost attempt committed, answers `new` for each, and counts them once."""
    producer = store.producer

    def group(n: int) -> list:
        items, _ = producer._enqueue_items([NewJob(type="t", payload={"n": i}) for i in range(n)])
        return producer._enqueue_singles(items)

    assert [r.status for r in group(2)] == ["new", "new"]  # prepared on a producer connection already
    lost = lose_commit_reply(store)
    res = group(3)
    assert not lost["on"]  # the reply really was lost
    assert [(r.status, r.created) for r in res] == [("new", True)] * 3
    assert [store.get_job(r.id)["payload"] for r in res] == ['{"n":0}', '{"n":1}', '{"n":2}']
    assert counts(store)["hot"] == 5 == counts(store)["enqueued_total"]


@pytest.mark.parametrize("plain", [True, False], ids=["plain", "general"])
def test_a_combined_group_whose_reply_was_lost_answers_each_caller_with_its_own_job(
    store, lose_commit_reply, plain
):
    """The Combiner's group is single enqueues of several threads, each item built by its own one-job
    call, so each carried the ordinal 0. Before: the retry by the checked statement (answered by ordinal)
    had three rows of ordinal 0, so each caller could get another caller's job. Now the retry numbers the
    group's items by their place (Producer._enqueue_unsure)."""
    producer = store.producer

    def item(n: int) -> dict:
        job = NewJob(type="t", payload={"n": n}, tags=None if plain else "t")
        return producer._plain_item(job) if plain else producer._enqueue_items([job])[0][0]

    producer._enqueue_singles([item(0), item(1)])  # prepared on a producer connection already
    lost = lose_commit_reply(store)
    sent = [item(n) for n in (10, 11, 12)]
    res = producer._enqueue_singles(sent)
    assert not lost["on"]  # the reply really was lost
    assert [(r.id, r.status, r.created) for r in res] == [(i["id"], "new", True) for i in sent]
    assert [store.get_job(r.id)["payload"] for r in res] == ['{"n":10}', '{"n":11}', '{"n":12}']
    assert counts(store)["hot"] == 5 == counts(store)["enqueued_total"]


@pytest.mark.parametrize(
    ("size", "plain"), [(1, False), (3, False), (3, True)], ids=["one", "group", "plain-batch"]
)
def test_a_retried_enqueue_does_not_put_back_a_job_that_ran_meanwhile(store, lose_commit_reply, size, plain):
    """A worker claims and archives a job between the commit whose reply was lost and the producer's
    retry. Before: the retry sent the same statement, which found that id gone from hot and inserted it
    again (ON CONFLICT DO NOTHING), so the job ran twice. Now a lean enqueue that failed transiently goes
    again by the checked statement, which sees the job in the archive (Producer._enqueue_unsure). A plain
    batch's items carry no ordinal (storage/plain_batch.py); the retry numbers them for that statement."""
    producer = store.producer

    def enqueue(n: int) -> list:
        jobs = [NewJob(type="t", payload={"n": i}) for i in range(n)]
        if plain:  # the batch's parameter written as text (storage/plain_batch.py)
            return producer.enqueue(jobs)
        items, _ = producer._enqueue_items(jobs)
        return producer._enqueue_singles(items)

    def claim_and_archive(n: int) -> list[str]:
        jobs = store.fetch("w-meanwhile", n, start=n)
        store.archive_succeeded("w-meanwhile", [(job.id, 1.0) for job in jobs])
        return [job.id for job in jobs]

    enqueue(size)  # the statement is prepared on a producer connection already
    assert len(claim_and_archive(size)) == size
    ran: list[str] = []

    lost = lose_commit_reply(store, meanwhile=lambda: ran.extend(claim_and_archive(1)))
    res = enqueue(size)
    assert not lost["on"]  # the reply really was lost
    assert [(r.status, r.created) for r in res] == [("new", True)] * size
    assert ran and ran[0] in {r.id for r in res}
    assert store.get_job(ran[0]).location == "archive"  # not back in hot to run again
    assert counts(store)["hot"] == size - 1
    assert counts(store)["archive"] == size + 1
    assert counts(store)["enqueued_total"] == 2 * size


def test_a_producer_retrying_after_a_lost_reply_gets_new_for_its_own_jobs(db_url, lose_commit_reply):
    with Store(db_url, pool_size=2, max_transient_retries=0) as impatient:
        jobs = [NewJob(type="t", id=f"p{i}", payload={"n": i}) for i in range(2)]
        lose_commit_reply(impatient)
        with pytest.raises(errors.TransientStorageError):
            impatient.enqueue(jobs)  # committed, but the producer is told it failed
        assert [r.status for r in impatient.enqueue(jobs)] == ["new", "new"]  # its own retry
        # Another producer's job with the same id but other content stays a conflict.
        assert impatient.enqueue([NewJob(type="t", id="p0", payload={"n": 9})])[0].status == "conflict"


def _dead(store: Store, n: int, prefix: str = "d", queue: str = "default") -> list[str]:
    ids = [r.id for r in store.enqueue([NewJob(type="t", id=f"{prefix}{i}", queue=queue) for i in range(n)])]
    store.fetch("w", n, [queue], start=n)
    assert sorted(store.move_to_dlq("w", [Dead(i, FailureReason.Fatal, "x") for i in ids])) == sorted(ids)
    return ids


def test_a_resurrect_whose_reply_was_lost_answers_with_the_resurrected_job(store, lose_commit_reply):
    """Before: the retry found the job gone from the DLQ and answered 409 (it is in hot) for a resurrect
    that had succeeded."""
    [job] = _dead(store, 1)
    lose_commit_reply(store)
    got = store.resurrect(job, actor=OPS, priority=7)
    assert store.retries_done >= 1
    assert (got["location"], got["status"], got["priority"]) == ("hot", "pending", 7)
    assert counts(store)["failed_total"] == 0
    with pytest.raises(errors.InvalidState):  # a real second resurrect is still refused
        store.resurrect(job, actor=OPS)


def test_an_operator_retrying_a_resurrect_after_a_lost_reply_is_told_it_succeeded(db_url, lose_commit_reply):
    with Store(db_url, pool_size=2, max_transient_retries=0) as impatient:
        [job] = _dead(impatient, 1)
        lose_commit_reply(impatient)
        with pytest.raises(errors.TransientStorageError):
            impatient.resurrect(job, actor=OPS)
        assert impatient.resurrect(job, actor=OPS)["location"] == "hot"
        with pytest.raises(errors.InvalidState):  # another operator's resurrect of it is a 409
            impatient.resurrect(job, actor=Actor("someone-else"))


@pytest.mark.parametrize("by", ["ids", "filter"])
def test_bulk_counts_report_what_committed_when_a_chunk_reply_was_lost(
    store, lose_commit_reply, monkeypatch, by
):
    """Before: the chunk whose reply was lost was retried, found its jobs gone (by ids) or took the next
    ones (by filter), and the count left out the jobs the lost attempt had moved."""
    monkeypatch.setattr(admin_ops, "RESURRECT_CHUNK", 2)
    ids = _dead(store, 5)
    skip = 0 if by == "ids" else 1  # by filter, the run first reads the database clock
    lose_commit_reply(store, skip)
    kw = {"ids": ids} if by == "ids" else {"flt": DlqFilter(queue="default")}
    assert store.resurrect_many(actor=OPS, **kw).count == 5
    assert store.retries_done >= 1 and counts(store)["hot"] == 5
    purged = _dead(store, 4, prefix="p", queue="q2")
    monkeypatch.setattr(store, "cleanup_batch_size", 3)
    lose_commit_reply(store, skip)
    kw = {"ids": purged} if by == "ids" else {"flt": DlqFilter(queue="q2")}
    assert store.purge_dlq(actor=OPS, **kw).count == 4
    assert counts(store)["dlq"] == 0


def test_a_cancel_whose_reply_was_lost_reports_the_jobs_it_cancelled(store, lose_commit_reply):
    ids = [r.id for r in store.enqueue([NewJob(type="t", id=f"c{i}") for i in range(3)])]
    lose_commit_reply(store)
    assert store.cancel_many(ids, actor=OPS) == (ids, [])
    assert counts(store)["dlq"] == 3


def test_a_start_whose_settling_read_failed_runs_every_job_on_the_retry(db_url, store, lose_reply_of):
    """A start set holds one job whose earlier start was lost (uncertain) and two new ones. The set's
    UPDATE marks the new ones; then the read that settles the uncertain one dies. The worker is told the
    set failed and sends it again: all three are its own to run, none refused into a false zombie."""
    with Store(db_url, pool_size=2, max_transient_retries=0) as impatient:
        impatient.dialect.rows = store.dialect.rows  # the same lossy reader
        ids = fetched(impatient, "w", 3)
        lose_reply_of(1)
        with pytest.raises(errors.TransientStorageError):
            impatient.mark_processing("w", ids[:1])  # committed, reply lost
        lose_reply_of(2)  # the set's UPDATE answers; the settling read after it dies
        with pytest.raises(errors.TransientStorageError):
            impatient.mark_processing("w", ids)
        again = impatient.mark_processing("w", ids)
        assert sorted(again) == sorted(ids)
        assert {m.attempt_count for m in again.values()} == {1}  # each started once


def test_a_finish_whose_settling_read_failed_is_applied_on_the_retry(db_url, store, lose_reply_of):
    """The same for finishing: an archive write of three jobs, one of them uncertain from an earlier
    lost reply, succeeds; the read that settles that one dies. The retry reports all three archived."""
    if store.dialect.name == "sqlite":
        pytest.skip(
            "SQLite's archive write is one transaction of several statements: a failed read rolls it back"
        )
    with Store(db_url, pool_size=2, max_transient_retries=0) as impatient:
        impatient.dialect.rows = store.dialect.rows
        ids = fetched(impatient, "w", 3)
        assert sorted(impatient.mark_processing("w", ids)) == sorted(ids)
        lose_reply_of(1)
        with pytest.raises(errors.TransientStorageError):
            impatient.archive_succeeded("w", [(ids[0], 1.0)])  # committed, reply lost
        lose_reply_of(2)
        with pytest.raises(errors.TransientStorageError):
            impatient.archive_succeeded("w", [(i, 1.0) for i in ids])
        assert sorted(impatient.archive_succeeded("w", [(i, 1.0) for i in ids])) == sorted(ids)
        assert counts(store)["archive"] == 3
