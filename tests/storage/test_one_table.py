"""One table per id under every race: explicit ids re-sent by several producers while workers drain
them never end in two tables; an id already in a move's target table never wedges the move (the newer
copy wins, the older one is kept in the audit log and announced); `get_job` reads the three tables in one
snapshot."""

from __future__ import annotations

import random
import threading
import time

import pytest
from storage_factories import (
    OPS,
    age,
    assert_one_table,
    audit,
    counters,
    dead,
    enqueue,
    events,
    hot_copy,
    locations,
    processing,
    scalar,
    sql,
)

from chokaq_ops import errors
from chokaq_ops.models import DlqFilter, FailureReason, NewJob
from chokaq_ops.storage import Dead, Store, admin_ops

# ------------------------------------------------------------------------------------ producers vs drain


def _drain(store: Store, name: str, stop: threading.Event, failures: list[BaseException]) -> None:
    """A worker loop of real statements: claim-and-start 50, finish them (1 in 10 to the DLQ)."""
    try:
        _drain_until(store, name, stop)
    except BaseException as exc:  # the test reports it
        failures.append(exc)


def _drain_until(store: Store, name: str, stop: threading.Event) -> None:
    while True:
        rows = store.fetch(name, 50, start=50)
        if not rows:
            if stop.is_set():
                return
            time.sleep(0.002)
            continue
        ids = [r["id"] for r in rows]
        dead_ids = [i for i in ids if i.endswith("7")]
        ok = [(i, 1.0) for i in ids if i not in dead_ids]
        assert len(store.archive_succeeded(name, ok)) == len(ok)
        assert len(store.move_to_dlq(name, [Dead(i, FailureReason.Fatal, "no") for i in dead_ids])) == len(
            dead_ids
        )


def test_producers_resending_explicit_ids_during_a_drain_never_put_an_id_in_two_tables(db_url):
    """Four producers send the same 2,000 explicit ids over and over (each in its own shuffled order) while
    two workers claim and finish them. Before enqueue re-checked its inserts after the fact, a move that
    committed during an enqueue statement was invisible to its NOT EXISTS checks on PostgreSQL, and dozens
    of ids ended in hot and in the archive (or DLQ) at once."""
    n_ids, rounds, batch = 2000, 6, 100
    ids = [f"re{i:05d}" for i in range(n_ids)]
    store = Store(db_url, pool_size=12, transient_retry_base_delay=0.02)
    stop = threading.Event()
    results: dict[str, int] = {"new": 0, "conflict": 0, "duplicate": 0}
    lock = threading.Lock()
    errors: list[BaseException] = []

    def produce(seed: int) -> None:
        rnd = random.Random(seed)
        try:
            for _ in range(rounds):
                order = ids[:]
                rnd.shuffle(order)
                for start in range(0, n_ids, batch):
                    res = store.enqueue([NewJob(type="t", id=i) for i in order[start : start + batch]])
                    with lock:
                        for r in res:
                            results[r.status] += 1
        except BaseException as exc:  # reported below
            errors.append(exc)

    workers = [threading.Thread(target=_drain, args=(store, f"w{k}", stop, errors)) for k in range(2)]
    producers = [threading.Thread(target=produce, args=(k,)) for k in range(4)]
    try:
        for t in workers + producers:
            t.start()
        for t in producers:
            t.join(60)
        stop.set()
        for t in workers:
            t.join(60)
        assert not errors, errors[:3]
        where = locations(store)
        doubled = {i: t for i, t in where.items() if len(t) > 1}
        assert not doubled, f"{len(doubled)} ids in two tables, e.g. {list(doubled.items())[:5]}"
        assert_one_table(store, ids)
        assert results["new"] == n_ids  # each id created exactly once; every re-send was a conflict
        assert results["conflict"] == n_ids * (4 * rounds - 1)
        assert scalar(store, "SELECT count(*) FROM jobs_hot") == 0
        assert counters(store)["enqueued"] == n_ids
    finally:
        stop.set()
        store.close()


# ------------------------------------------------------------------------------------ a second copy


def _copy_into(store: Store, table: str, job_id: str, queue: str = "x") -> None:
    """A hand-made second copy of `job_id` in the archive or the DLQ (an older life of the id)."""
    if table == "jobs_dlq":
        sql(
            store,
            "INSERT INTO jobs_dlq (id, queue, type, payload, priority, failure_reason, error_details,"
            " attempt_count, created_at, failed_at) VALUES (?, ?, 't', '{\"old\":1}', 10, 6, 'old death', 1,"
            " '2026-01-01 00:00:00', '2026-01-01 00:00:00')",
            job_id,
            queue,
        )
    else:
        sql(
            store,
            "INSERT INTO jobs_archive (id, queue, type, payload, priority, attempt_count, created_at,"
            " finished_at) VALUES (?, ?, 't', '{\"old\":1}', 10, 1, '2026-01-01 00:00:00',"
            " '2026-01-01 00:00:00')",
            job_id,
            queue,
        )
    column = "failed_total" if table == "jobs_dlq" else "succeeded_total"
    if not sql(store, "SELECT queue FROM stats_summary WHERE queue = ?", queue):
        sql(store, "INSERT INTO stats_summary (queue) VALUES (?)", queue)
    sql(store, f"UPDATE stats_summary SET {column} = {column} + 1 WHERE queue = ?", queue)  # as a move would


def test_a_duplicate_in_the_dlq_does_not_stop_a_sweep_from_moving_the_other_zombies(store, caplog):
    """Before: archive_zombies was one all-or-nothing statement; a zombie whose id was already in the DLQ
    failed it on the duplicate key, every later sweep failed the same way, and the other zombies stayed
    stuck. Now the zombie moves like the others, the older DLQ copy is displaced to the audit log and
    announced, and the counters still equal the rows."""
    zombies = processing(store, "w", 4, prefix="z", queue="x")
    age(store, "jobs_hot", zombies, 3600, "heartbeat_at")
    _copy_into(store, "jobs_dlq", zombies[1])
    before = counters(store)
    moved = store.archive_zombies(60)
    assert sorted(r["id"] for r in moved) == sorted(zombies)
    assert all("twin" not in r for r in moved)
    assert assert_one_table(store, zombies) == dict.fromkeys(zombies, "dlq")
    row = store.get_job(zombies[1])
    assert row["failure_reason"] == "Zombie" and "heartbeat expired" in row["error_details"]
    after = counters(store)
    assert after["failed"] == before["failed"] + 4 - 1 == scalar(store, "SELECT count(*) FROM jobs_dlq")
    [kept] = audit(store, "displace")
    assert kept["job_id"] == zombies[1] and kept["actor"] == "system"
    assert kept["details"]["location"] == "dlq"
    assert kept["details"]["copy"]["error_details"] == "old death"  # the older copy, verbatim
    [event] = events(store, "conflict")
    assert event["data"] == {"job_id": zombies[1], "queue": "x", "location": "dlq"}
    assert any(zombies[1] in r.getMessage() and "two tables" in r.getMessage() for r in caplog.records)
    assert store.archive_zombies(60) == []  # nothing left wedged: the next sweep has nothing to do


def test_worker_finishes_and_cancels_move_every_job_even_with_an_older_copy_elsewhere(store):
    """The worker's finishing moves and an operator's cancel: a job whose id has a copy in the target table
    (the worker's fast statement fails on the duplicate key and the store runs the displacing one) or, for
    the sweep and cancel, in either table, still moves, and so does every other job of the same call."""
    ok = processing(store, "w", 3, prefix="ok", queue="x")
    _copy_into(store, "jobs_archive", ok[0])
    _copy_into(store, "jobs_dlq", ok[0])  # displaced too, once the batch is on the displacing path
    assert sorted(store.archive_succeeded("w", [(i, 1.0) for i in ok])) == sorted(ok)
    bad = processing(store, "w", 2, prefix="bad", queue="x")
    _copy_into(store, "jobs_dlq", bad[0])
    assert sorted(store.move_to_dlq("w", [Dead(i, FailureReason.Fatal, "e") for i in bad])) == sorted(bad)
    pending = enqueue(store, 2, prefix="c", queue="x")
    _copy_into(store, "jobs_archive", pending[1])
    assert store.cancel_many(pending, actor=OPS) == (pending, [])
    where = assert_one_table(store, ok + bad + pending)
    assert where == {**dict.fromkeys(ok, "archive"), **dict.fromkeys(bad + pending, "dlq")}
    assert store.get_job(ok[0])["status"] == "succeeded"
    assert sorted((e["data"]["job_id"], e["data"]["location"]) for e in events(store, "conflict")) == sorted(
        [(ok[0], "archive"), (ok[0], "dlq"), (bad[0], "dlq"), (pending[1], "archive")]
    )
    c = counters(store)
    assert c["succeeded"] == scalar(store, "SELECT count(*) FROM jobs_archive") == 3
    assert c["failed"] == scalar(store, "SELECT count(*) FROM jobs_dlq") == 4


def test_a_resurrect_never_fails_its_chunk_on_an_id_already_in_hot(store, monkeypatch):
    """DLQ -> hot where the id is in hot already (a job in two tables): the hot job is the live one and
    stays as it is; the DLQ copy is displaced to the audit log with an event; the other jobs of the chunk
    go back to hot."""
    ids = dead(store, 3, prefix="r", queue="x")
    hot_copy(store, ids[0])
    result = store.resurrect_many(ids=ids, actor=OPS)
    assert result.count == 2
    assert assert_one_table(store, ids) == dict.fromkeys(ids, "hot")
    assert store.get_job(ids[0])["priority"] == 3  # the live hot copy, untouched
    assert [e["data"]["job_id"] for e in events(store, "conflict")] == [ids[0]]
    assert [a["job_id"] for a in audit(store, "displace")] == [ids[0]]
    assert sorted(a["job_id"] for a in audit(store, "resurrect")) == sorted(ids[1:])
    assert counters(store)["failed"] == 0

    # By filter, two jobs a chunk: a first chunk whose rows all have a live hot copy does not end the run.
    monkeypatch.setattr(admin_ops, "RESURRECT_CHUNK", 2)
    more = dead(store, 3, prefix="s", queue="y")
    for job_id in more[:2]:
        hot_copy(store, job_id, priority=10)
    assert store.resurrect_many(flt=DlqFilter(queue="y"), actor=OPS).count == 1
    assert scalar(store, "SELECT count(*) FROM jobs_dlq") == 0
    assert assert_one_table(store, more) == dict.fromkeys(more, "hot")


# ------------------------------------------------------------------------------------ get_job


def test_get_job_never_misses_a_job_moving_between_tables(db_url):
    """One thread moves a job round DLQ -> hot -> DLQ (resurrect, claim, dead again) while two others read
    it with get_job. Before the three reads shared one snapshot, a resurrect that committed between the
    hot read and the DLQ read made the job look missing (404)."""
    store = Store(db_url, pool_size=6, transient_retry_base_delay=0.02)
    [job] = dead(store, 1, prefix="mv", queue="mv")
    stop = threading.Event()
    cycles = [0]
    seen: dict[str, int] = {"hot": 0, "dlq": 0, "archive": 0}
    failures: list[BaseException] = []

    def move() -> None:
        try:
            while not stop.is_set():
                store.resurrect(job, actor=OPS)
                assert [r["id"] for r in store.fetch("w", 1, ["mv"], start=1)] == [job]
                assert store.move_to_dlq("w", [Dead(job, FailureReason.Fatal, "again")]) == [job]
                cycles[0] += 1
        except BaseException as exc:  # the test reports it
            failures.append(exc)

    def read() -> None:
        try:
            while not stop.is_set():
                seen[store.get_job(job)["location"]] += 1
        except BaseException as exc:  # a JobNotFound here is the fault
            failures.append(exc)

    threads = [threading.Thread(target=move)] + [threading.Thread(target=read) for _ in range(2)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and not failures:
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        store.close()
    assert not failures, failures[:3]
    assert cycles[0] >= 20 and seen["hot"] and seen["dlq"], (cycles, seen)


def test_get_job_reads_a_hot_job_with_one_statement_and_looks_elsewhere_in_one_snapshot(db_url, monkeypatch):
    """Most jobs asked for are hot (POST /jobs reads its job back): one statement; a job not in hot takes
    the three-table read in one snapshot, as above."""
    with Store(db_url, pool_size=2) as store:
        [hot] = store.enqueue([NewJob(type="t", queue="g-hot")])
        [gone] = dead(store, 1, prefix="g1", queue="g")
        transactions = []
        tx = store.db.transaction
        monkeypatch.setattr(store.db, "transaction", lambda fn, **kw: transactions.append(1) or tx(fn, **kw))
        assert store.get_job(hot.id)["location"] == "hot" and transactions == []
        assert store.get_job(gone)["location"] == "dlq" and transactions == [1]
        with pytest.raises(errors.JobNotFound):
            store.get_job("no-such-job")
