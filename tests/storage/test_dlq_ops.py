"""Operator mutations (docs/rescue.md-§4.12; reference §11.22-27): edit gates, resurrect, bulk resurrect in
transactions of at most 1000, cancel, purge in CleanupBatchSize batches, and their audit and event rows."""

from __future__ import annotations

import json

import pytest
from storage_factories import (
    OPS,
    age,
    archived,
    assert_one_table,
    audit,
    before_now,
    buckets,
    counters,
    dead,
    dead_bulk,
    enqueue,
    events,
    fetched,
    processing,
    scalar,
    snapshot,
    sql,
)

from chokaq_ops import errors
from chokaq_ops.models import Actor, DlqFilter, FailureReason, NewJob
from chokaq_ops.storage import Dead, Retry, Store

# ------------------------------------------------------------------------------------ edits


def test_edit_pending_changes_only_given_fields_and_audits_before_and_after(store):
    [job] = store.enqueue([NewJob(type="keep.me", id="e1", payload='{"a":1}', tags="x", priority=3)])
    out = store.edit_pending(job.id, actor=OPS, payload={"a": 2})
    assert (out["payload"], out["tags"], out["priority"], out["type"]) == ('{"a":2}', "x", 3, "keep.me")
    assert out["last_modified_by"] == "ops"
    store.edit_pending(job.id, actor=Actor("ann", plan_id="p-1"), tags="y,z", priority=99)
    row = store.get_job(job.id)
    assert (row["payload"], row["tags"], row["priority"], row["status"]) == ('{"a":2}', "y,z", 99, "pending")
    first, second = audit(store, "edit_pending")
    assert (first["actor"], first["job_id"], first["plan_id"]) == ("ops", "e1", None)
    assert json.loads(first["details"]["before"]["payload"]) == {"a": 1}
    assert json.loads(first["details"]["after"]["payload"]) == {"a": 2}
    # A caller's plan id is dropped: plan ids on audit rows come only from the server's own plans.
    assert (second["actor"], second["plan_id"]) == ("ann", None)
    assert second["details"]["before"]["priority"] == 3 and second["details"]["after"]["priority"] == 99
    assert second["details"]["after"]["tags"] == "y,z"


def test_edit_pending_refuses_fetched_processing_and_non_hot_jobs(store):
    [f] = fetched(store, "w", 1, prefix="f", queue="qf")
    [p] = processing(store, "w", 1, prefix="p", queue="qp")
    [d] = dead(store, 1, prefix="d", queue="qd")
    [a] = archived(store, 1, prefix="a", queue="qa")
    before = snapshot(store)
    for job in (f, p, d, a):
        with pytest.raises(errors.InvalidState):
            store.edit_pending(job, actor=OPS, payload={"x": 1})
    with pytest.raises(errors.JobNotFound):
        store.edit_pending("nope", actor=OPS, payload={"x": 1})
    assert snapshot(store) == before


def test_job_type_is_never_editable(store):
    [job] = enqueue(store, 1, type_="orig")
    [dlq] = dead(store, 1, prefix="d", type_="orig.dead", queue="qd")
    with pytest.raises(TypeError):
        store.edit_pending(job, actor=OPS, type="other")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        store.edit_dlq(dlq, actor=OPS, type="other")  # type: ignore[call-arg]
    store.edit_pending(job, actor=OPS, payload={"type": "other"})
    store.edit_dlq(dlq, actor=OPS, payload={"type": "other"})
    assert store.get_job(job)["type"] == "orig" and store.get_job(dlq)["type"] == "orig.dead"


def test_edit_dlq_works_for_every_reason_and_only_in_the_dlq(store):
    zombie = processing(store, "w", 1, prefix="z", queue="qz")
    age(store, "jobs_hot", zombie, 3600, "heartbeat_at")
    store.archive_zombies(60)
    [fatal] = dead(store, 1, prefix="f", reason=FailureReason.Fatal)
    [cancelled] = enqueue(store, 1, prefix="c", queue="qc")
    store.cancel_many([cancelled], actor=OPS)
    failed_before = counters(store)["failed"]
    for job in (zombie[0], fatal, cancelled):
        out = store.edit_dlq(job, actor=Actor("fixer"), payload='{"fixed":true}', tags="t1")
        assert (out["location"], out["payload"], out["tags"], out["last_modified_by"]) == (
            "dlq",
            '{"fixed":true}',
            "t1",
            "fixer",
        )
    assert counters(store)["failed"] == failed_before  # an edit moves nothing
    rows = audit(store, "edit_dlq")
    assert [r["job_id"] for r in rows] == [zombie[0], fatal, cancelled]
    assert rows[1]["details"]["before"]["payload"] == "{}" and rows[1]["details"]["after"]["tags"] == "t1"
    [hot] = enqueue(store, 1, prefix="h", queue="qh")
    with pytest.raises(errors.InvalidState):
        store.edit_dlq(hot, actor=OPS, payload={})
    with pytest.raises(errors.JobNotFound):
        store.edit_dlq("missing", actor=OPS, payload={})


# ------------------------------------------------------------------------------------ resurrect


def test_resurrect_resets_the_job_and_decrements_failed_total_only(store):
    store.enqueue(
        [NewJob(type="t", id="r1", priority=77, idempotency_key="key-1", payload='{"v":1}', tags="old")]
    )
    store.fetch("w", 1)
    store.mark_processing("w", ["r1"])
    store.reschedule("w", [Retry("r1", 0)])
    store.fetch("w", 1)
    store.mark_processing("w", ["r1"])
    store.move_to_dlq("w", [Dead("r1", FailureReason.MaxRetriesExceeded, "gave up")])
    assert store.get_job("r1")["attempt_count"] == 2
    metric = buckets(store)
    before = counters(store)

    out = store.resurrect("r1", actor=Actor("ann"))
    assert (out["location"], out["status"], out["attempt_count"], out["idempotency_key"]) == (
        "hot",
        "pending",
        0,
        None,
    )
    assert (out["priority"], out["payload"], out["tags"], out["last_modified_by"]) == (
        10,
        '{"v":1}',
        "old",
        "ann",
    )
    assert out["worker_id"] is None and out["heartbeat_at"] is None and out["started_at"] is None
    after = counters(store)
    assert after == before | {"failed": before["failed"] - 1}
    assert buckets(store) == metric
    assert_one_table(store, ["r1"])
    # The cleared key is free again, and the resurrected job is fetchable at once.
    assert store.enqueue([NewJob(type="t", idempotency_key="key-1")])[0].status == "new"
    assert "r1" in [r["id"] for r in store.fetch("w2", 10)]
    [ev] = events(store, "resurrect")
    assert ev["data"]["count"] == 1 and ev["data"]["actor"] == "ann"
    [row] = audit(store, "resurrect")
    assert (row["actor"], row["job_id"]) == ("ann", "r1")


def test_resurrect_replaces_payload_tags_and_priority_when_given(store):
    [job] = dead(store, 1, prefix="r", tags="a", priority=5)
    out = store.resurrect(job, actor=OPS, payload={"fixed": 1}, tags=["b", "c"], priority=500)
    assert (out["payload"], out["tags"], out["priority"]) == ('{"fixed":1}', "b,c", 500)
    [row] = audit(store, "resurrect")
    assert row["details"]["before"] == {"payload": "{}", "tags": "a"}
    assert row["details"]["after"] == {"payload": '{"fixed":1}', "tags": "b,c", "priority": 500}


def test_resurrect_404_and_409(store):
    [h] = enqueue(store, 1, prefix="h")
    [a] = archived(store, 1, prefix="a", queue="qa")
    before = snapshot(store)
    with pytest.raises(errors.JobNotFound):
        store.resurrect("ghost", actor=OPS)
    for job in (h, a):
        with pytest.raises(errors.InvalidState):
            store.resurrect(job, actor=OPS)
    assert snapshot(store) == before
    [d] = dead(store, 1, prefix="d", queue="qd")
    store.resurrect(d, actor=OPS)
    with pytest.raises(errors.InvalidState):  # the second resurrect finds it hot
        store.resurrect(d, actor=OPS)


def test_resurrect_failed_total_never_goes_below_zero(store):
    [job] = dead(store, 1)
    sql(store, "UPDATE stats_summary SET failed_total = 0")
    store.resurrect(job, actor=OPS)
    assert counters(store)["failed"] == 0


def _bulk_checks(store: Store, ids: list[str], res, *, plan_id: str | None) -> None:
    assert (res.count, res.batches) == (2500, 3)
    # One 'resurrect' event per committed transaction, with the chunk's size (chunks in flight together
    # may commit in either order: test_bulk_streams.py).
    assert sorted(e["data"]["count"] for e in events(store, "resurrect")) == [500, 1000, 1000]
    rows = audit(store, "resurrect")
    assert len(rows) == 2500 and {r["plan_id"] for r in rows} == {plan_id}
    assert assert_one_table(store, ids) == dict.fromkeys(ids, "hot")
    assert counters(store, "bulk")["failed"] == 0
    assert scalar(store, "SELECT count(*) FROM jobs_hot WHERE attempt_count <> 0 OR status <> 0") == 0


def test_bulk_resurrect_of_2500_ids_runs_as_three_transactions(store):
    ids = dead_bulk(store, 2500, prefix="b")
    seen: list[int] = []
    res = store.resurrect_many(actor=Actor("bulk", plan_id="plan-7"), ids=ids, progress=seen.append)
    assert len(seen) == 3 and seen == sorted(seen) and seen[-1] == 2500  # one report per committed chunk
    _bulk_checks(store, ids, res, plan_id=None)  # a caller's plan id is not recorded


def test_bulk_resurrect_of_2500_by_filter_runs_as_three_transactions(store):
    ids = dead_bulk(store, 2500, prefix="b", reason=FailureReason.Transient)
    [other] = dead(store, 1, prefix="x", queue="other", reason=FailureReason.Transient)
    res = store.resurrect_many(actor=OPS, flt=DlqFilter(queue="bulk", reason=FailureReason.Transient))
    _bulk_checks(store, ids, res, plan_id=None)
    assert store.get_job(other)["location"] == "dlq"
    details = audit(store, "resurrect")[0]["details"]
    assert details == {"filter": {"queue": "bulk", "reason": "Transient"}, "failure_reason": "Transient"} | {
        "fingerprint": details["fingerprint"],
        "renewed": True,  # the default: the retry budget starts afresh
    }


@pytest.mark.parametrize("by", ["ids", "filter"])
def test_a_crash_between_chunks_leaves_every_job_in_exactly_one_table(store, by):
    # One chunk at a time, so the crash lands after exactly one; with chunks in flight together the ones
    # in flight end first (test_bulk_streams.py).
    store.db.bulk_streams = 1
    ids = dead_bulk(store, 2500, prefix="c")

    def crash(done: int) -> None:
        raise KeyboardInterrupt(f"killed after {done}")

    target = {"ids": ids} if by == "ids" else {"flt": DlqFilter(queue="bulk")}
    with pytest.raises(KeyboardInterrupt):
        store.resurrect_many(actor=OPS, progress=crash, **target)
    where = assert_one_table(store, ids)
    assert sorted(where.values()).count("hot") == 1000 and sorted(where.values()).count("dlq") == 1500
    assert counters(store, "bulk")["failed"] == 1500
    assert len(events(store, "resurrect")) == 1 and len(audit(store, "resurrect")) == 1000
    # Running it again finishes the job without touching the first chunk twice.
    res = store.resurrect_many(actor=OPS, **target)
    # By ids the first chunk's ids are offered again and move nothing (already hot); a filter skips them.
    assert (res.count, res.batches) == (1500, 3 if by == "ids" else 2)
    assert set(assert_one_table(store, ids).values()) == {"hot"}
    assert len(audit(store, "resurrect")) == 2500


def test_bulk_resurrect_with_edits_and_max_jobs(store):
    ids = dead(store, 5, prefix="m", priority=1)
    res = store.resurrect_many(
        actor=OPS, ids=ids, edits={ids[0]: {"payload": {"n": 1}, "priority": 3}}, max_jobs=2
    )
    assert (res.count, res.batches) == (2, 1)
    assert (store.get_job(ids[0])["payload"], store.get_job(ids[0])["priority"]) == ('{"n":1}', 3)
    assert store.get_job(ids[1])["priority"] == 10
    assert [store.get_job(i)["location"] for i in ids[2:]] == ["dlq"] * 3
    res = store.resurrect_many(actor=OPS, flt=DlqFilter(), max_jobs=2)
    assert res.count == 2
    assert counters(store)["failed"] == 1


def test_filtered_bulk_operations_take_the_newest_failures_first_and_freeze_their_match(small_batch_store):
    store = small_batch_store
    ids = dead(store, 6, prefix="f", queue="qf")
    for k, job in enumerate(ids):
        age(store, "jobs_dlq", [job], 60 * (k + 1), "failed_at")  # f00000 newest ... f00005 oldest
    assert store.resurrect_many(flt=DlqFilter(queue="qf"), max_jobs=2, actor=OPS).count == 2
    assert [store.get_job(j)["location"] for j in ids[:3]] == ["hot", "hot", "dlq"]
    assert store.preview_dlq(flt=DlqFilter(queue="qf"))["sample_ids"] == ids[2:]

    # Jobs that die while a filtered purge runs are not swept up by it: the match is frozen at the start.
    late: list[str] = []

    def more_deaths(done: int) -> None:
        if not late:
            late.extend(dead(store, 2, prefix="late", queue="qlate"))

    res = store.purge_dlq(flt=DlqFilter(type="t"), actor=OPS, progress=more_deaths)
    assert (res.count, res.batches) == (4, 2)
    assert sorted(r[0] for r in sql(store, "SELECT id FROM jobs_dlq")) == sorted(late)
    assert (counters(store, "qf")["failed"], counters(store, "qlate")["failed"]) == (0, 2)


# ------------------------------------------------------------------------------------ cancel


def test_cancel_moves_pending_and_fetched_and_skips_processing(store):
    [pend] = enqueue(store, 1, prefix="pend")
    [fet] = fetched(store, "w", 1, prefix="fet", queue="qf")
    [run] = processing(store, "w", 1, prefix="run", queue="qr")
    [gone] = dead(store, 1, prefix="gone", queue="qd")
    cancelled, skipped = store.cancel_many(
        [pend, fet, run, gone, "ghost", pend], actor=Actor("ann", plan_id="pc")
    )
    assert (cancelled, skipped) == ([pend, fet], [run, gone, "ghost"])
    for job in (pend, fet):
        row = store.get_job(job)
        assert (row["location"], row["failure_reason"], row["last_modified_by"]) == (
            "dlq",
            "Cancelled",
            "ann",
        )
        assert "ann" in row["error_details"]
    assert store.get_job(run)["status"] == "processing"
    assert [(r["job_id"], r["plan_id"]) for r in audit(store, "cancel")] == [(pend, None), (fet, None)]
    [ev] = events(store, "cancel")
    assert ev["data"] == {"count": 2, "actor": "ann", "plan_id": None}
    assert counters(store)["failed"] == 3
    # The fenced worker of the cancelled fetched job can no longer start it.
    assert store.mark_processing("w", [fet]) == {}


# ------------------------------------------------------------------------------------ purge


@pytest.fixture
def small_batch_store(db_url):
    with Store(db_url, pool_size=4, cleanup_batch_size=2) as s:
        yield s


def test_purge_dlq_by_ids_in_cleanup_batches(small_batch_store):
    store = small_batch_store
    ids = dead(store, 7, prefix="p")
    chosen = ids[:5]
    seen: list[int] = []
    res = store.purge_dlq(ids=[*chosen, "ghost"], actor=Actor("ops", plan_id="pp"), progress=seen.append)
    assert (res.count, res.batches) == (5, 3)
    assert len(seen) == 3 and seen == sorted(seen) and seen[-1] == 5
    assert sorted(r[0] for r in sql(store, "SELECT id FROM jobs_dlq")) == ids[5:]
    assert counters(store)["failed"] == 2
    rows = audit(store, "purge_dlq")
    assert sorted(r["job_id"] for r in rows) == sorted(chosen) and {r["plan_id"] for r in rows} == {None}
    assert sorted(e["data"]["count"] for e in events(store, "purge")) == [1, 2, 2]


def test_purge_dlq_by_filter_in_cleanup_batches(small_batch_store):
    store = small_batch_store
    keep = dead(store, 2, prefix="k", queue="keep")
    drop = dead(store, 5, prefix="d", queue="drop", reason=FailureReason.Timeout)
    res = store.purge_dlq(flt=DlqFilter(queue="drop"), actor=OPS)
    assert (res.count, res.batches) == (5, 3)
    assert set(locations_of(store, keep + drop)) == {"dlq", None}
    assert counters(store, "drop")["failed"] == 0 and counters(store, "keep")["failed"] == 2
    assert audit(store, "purge_dlq")[0]["details"] == {"filter": {"queue": "drop"}}


def locations_of(store: Store, ids: list[str]) -> list[str | None]:
    out = []
    for job in ids:
        try:
            out.append(store.get_job(job)["location"])
        except errors.JobNotFound:
            out.append(None)
    return out


def test_purge_archive_older_than_a_cutoff_in_cleanup_batches(small_batch_store):
    store = small_batch_store
    old = archived(store, 5, prefix="old", queue="qa")
    new = archived(store, 2, prefix="new", queue="qb")
    age(store, "jobs_archive", old, 7200, "finished_at")
    seen: list[int] = []
    res = store.purge_archive(before_now(store, 3600), actor=OPS, progress=seen.append)
    assert (res.count, res.batches) == (5, 3) and seen == [2, 4, 5]
    assert locations_of(store, old + new) == [None] * 5 + ["archive"] * 2
    assert counters(store, "qa")["succeeded"] == 0 and counters(store, "qb")["succeeded"] == 2
    rows = audit(store, "purge_archive")
    assert [r["count"] for r in rows] == [2, 2, 1] and {r["job_id"] for r in rows} == {None}
    assert store.purge_archive(before_now(store, 3600), actor=OPS).count == 0


def test_purge_archive_with_an_exact_multiple_of_the_batch(small_batch_store):
    store = small_batch_store
    old = archived(store, 4, prefix="old")
    age(store, "jobs_archive", old, 7200, "finished_at")
    res = store.purge_archive(before_now(store, 60), actor=OPS)
    assert res.count == 4 and res.batches == 2
    assert scalar(store, "SELECT count(*) FROM jobs_archive") == 0


# ------------------------------------------------------------------------------------ audit and events


def test_every_operator_action_writes_audit_rows_and_an_event(store):
    plan = Actor("ann", plan_id="plan-1")
    [pend] = enqueue(store, 1, prefix="pend")
    d = dead(store, 3, prefix="d", queue="qd")
    [arch] = archived(store, 1, prefix="a", queue="qa")
    age(store, "jobs_archive", [arch], 60, "finished_at")
    base = len(events(store))

    store.edit_pending(pend, actor=plan, priority=1)
    store.edit_dlq(d[0], actor=plan, tags="x")
    store.resurrect(d[0], actor=plan)
    store.cancel_many([pend], actor=plan)
    store.purge_dlq(ids=[d[1]], actor=plan)
    store.resurrect_many(ids=[d[2]], actor=plan)
    store.purge_archive(store.now(), actor=plan)
    store.set_queue("qx", actor=plan, paused=True)

    by_action = {}
    for r in audit(store):
        by_action.setdefault(r["action"], []).append(r)
    assert {a: [(r["actor"], r["job_id"]) for r in rows] for a, rows in by_action.items()} == {
        "edit_pending": [("ann", pend)],
        "edit_dlq": [("ann", d[0])],
        "resurrect": [("ann", d[0]), ("ann", d[2])],
        "cancel": [("ann", pend)],
        "purge_dlq": [("ann", d[1])],
        "purge_archive": [("ann", None)],
        "set_queue": [("ann", None)],
    }
    job_level = [r for r in audit(store) if r["job_id"] is not None]
    assert {r["plan_id"] for r in job_level} == {None}  # not a server-side plan: dropped
    # One event per operator action (per committed batch for bulk ones), in the order they happened.
    got = [(e["kind"], e["data"]) for e in events(store)[base:]]
    assert [k for k, _ in got] == [
        "edit",
        "edit",
        "resurrect",
        "cancel",
        "purge",
        "resurrect",
        "purge",
        "queue",
    ]
    assert got[0][1] == {"job_id": pend, "location": "hot", "actor": "ann", "plan_id": None}
    assert got[1][1] == {"job_id": d[0], "location": "dlq", "actor": "ann", "plan_id": None}
    for _, data in got[2:5]:
        assert data == {"count": 1, "actor": "ann", "plan_id": None}
    assert got[6][1] == {"count": 1, "actor": "ann", "source": "archive"}
    assert got[7][1]["paused"] in (True, 1) and got[7][1]["name"] == "qx"
    # A refused edit writes neither an audit row nor an event.
    before = (len(audit(store)), len(events(store)))
    with pytest.raises(errors.InvalidState):
        store.edit_pending(pend, actor=plan, priority=2)  # cancelled: in the DLQ now
    assert (len(audit(store)), len(events(store))) == before
