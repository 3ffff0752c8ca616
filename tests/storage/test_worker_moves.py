"""Worker and rescue moves (docs/worker.md-§4.7, §4.13; reference §11.5-9, 18-19, 28): owner fencing, the
one-table invariant, exact counters and metric buckets written with each terminal move."""

from __future__ import annotations

import itertools

from storage_factories import (
    OPS,
    age,
    assert_one_table,
    buckets,
    counters,
    dead,
    enqueue,
    events,
    fetched,
    processing,
    scalar,
    snapshot,
    sql,
)

from chokaq_ops.models import FailureReason
from chokaq_ops.storage import Dead, Retry

# ------------------------------------------------------------------------------------ fencing


def test_mark_processing_is_owner_and_state_gated(store):
    [job] = fetched(store, "owner", 1)
    before = snapshot(store)
    assert store.mark_processing("intruder", [job]) == {}
    assert snapshot(store) == before
    got = store.mark_processing("owner", [job])
    assert got[job]["attempt_count"] == 1 and got[job]["started_at"] is not None
    row = store.get_job(job)
    assert (row["status"], row["attempt_count"]) == ("processing", 1)
    assert row["heartbeat_at"] is not None and row["started_at"] == row["heartbeat_at"]
    # A second mark (a replayed message) neither restarts nor counts another attempt.
    assert store.mark_processing("owner", [job]) == {}
    assert store.get_job(job)["attempt_count"] == 1
    # Pending jobs nobody fetched cannot be marked either.
    [free] = enqueue(store, 1, prefix="free", queue="other")
    assert store.mark_processing("owner", [free]) == {}


def test_heartbeat_refreshes_only_the_owners_running_jobs_in_one_call(store):
    running = processing(store, "owner", 3, prefix="r")
    [waiting] = fetched(store, "owner", 1, prefix="f", queue="q2")
    age(store, "jobs_hot", running, 60, "heartbeat_at")
    stale = {r[0]: r[1] for r in sql(store, "SELECT id, heartbeat_at FROM jobs_hot")}
    assert store.heartbeat("intruder", running) == set()
    assert {r[0]: r[1] for r in sql(store, "SELECT id, heartbeat_at FROM jobs_hot")} == stale
    assert store.heartbeat("owner", [*running, waiting, "unknown"]) == set(running)
    fresh = {r[0]: r[1] for r in sql(store, "SELECT id, heartbeat_at FROM jobs_hot")}
    assert all(fresh[i] != stale[i] for i in running)
    assert fresh[waiting] == stale[waiting]  # a fetched job has no heartbeat to refresh


def test_finalizations_by_a_non_owner_change_nothing(store):
    [job] = processing(store, "owner", 1)
    [pre] = fetched(store, "owner", 1, prefix="pre", queue="q2")
    before = snapshot(store)
    assert store.archive_succeeded("intruder", [(job, 1.0)]) == []
    assert store.move_to_dlq("intruder", [Dead(job, FailureReason.Fatal, "x")]) == []
    assert store.reschedule("intruder", [Retry(job, 0, "x")]) == []
    assert store.release("intruder", [pre]) == []
    assert store.heartbeat("intruder", [job]) == set()
    assert snapshot(store) == before
    # State gates for the owner too: a fetched job cannot be archived, a running one cannot be released.
    assert store.archive_succeeded("owner", [(pre, 1.0)]) == []
    assert store.move_to_dlq("owner", [Dead(pre, FailureReason.Fatal, "x")]) == []
    assert store.reschedule("owner", [Retry(pre, 0)]) == []
    assert store.release("owner", [job]) == []
    assert snapshot(store) == before


def test_a_late_success_after_a_zombie_move_changes_nothing(store):
    [job] = processing(store, "slow", 1)
    age(store, "jobs_hot", [job], 120, "heartbeat_at")
    moved = store.archive_zombies(60)
    assert [(r["id"], r["worker_id"]) for r in moved] == [(job, "slow")]
    before = snapshot(store)
    assert store.archive_succeeded("slow", [(job, 9000.0)]) == []
    assert store.move_to_dlq("slow", [Dead(job, FailureReason.Transient, "late")]) == []
    assert store.reschedule("slow", [Retry(job, 1)]) == []
    assert store.heartbeat("slow", [job]) == set()
    assert snapshot(store) == before
    assert scalar(store, "SELECT count(*) FROM jobs_archive") == 0
    c = counters(store)
    assert (c["succeeded"], c["failed"]) == (0, 1)
    assert store.get_job(job)["failure_reason"] == "Zombie"


def test_a_job_another_worker_took_over_is_fenced_against_the_first(store):
    [job] = fetched(store, "first", 1)
    age(store, "jobs_hot", [job], 120, "updated_at")
    assert [r["id"] for r in store.recover_abandoned(60)] == [job]
    assert [r["id"] for r in store.fetch("second", 1)] == [job]
    assert store.mark_processing("first", [job]) == {}
    assert store.mark_processing("second", [job])[job]["attempt_count"] == 1
    assert store.archive_succeeded("first", [(job, 1.0)]) == []
    assert store.archive_succeeded("second", [(job, 1.0)]) == [job]


# ------------------------------------------------------------------------------------ moves


def test_every_move_keeps_each_job_in_exactly_one_table(store):
    ids: list[str] = []
    ids += (ok := processing(store, "w", 2, prefix="ok", queue="a"))
    store.archive_succeeded("w", [(i, 2.0) for i in ok])
    ids += (bad := processing(store, "w", 2, prefix="bad", queue="b"))
    store.move_to_dlq("w", [Dead(i, FailureReason.MaxRetriesExceeded, "e") for i in bad])
    ids += (retry := processing(store, "w", 1, prefix="retry", queue="c"))
    store.reschedule("w", [Retry(retry[0], 0)])
    ids += (cancel := enqueue(store, 2, prefix="cancel", queue="d"))
    store.cancel_many(cancel, actor=OPS)
    ids += (zombie := processing(store, "w", 1, prefix="zombie", queue="e"))
    age(store, "jobs_hot", zombie, 3600, "heartbeat_at")
    store.archive_zombies(60)
    ids += (abandoned := fetched(store, "w", 1, prefix="abandoned", queue="f"))
    age(store, "jobs_hot", abandoned, 3600, "updated_at")
    store.recover_abandoned(60)
    ids += (released := fetched(store, "w", 1, prefix="released", queue="g"))
    store.release("w", released)
    store.resurrect(bad[0], actor=OPS)
    store.purge_dlq(ids=[bad[1]], actor=OPS)
    store.purge_archive(store.now(), actor=OPS)

    where = assert_one_table(store, [i for i in ids if i not in (bad[1], *ok)])
    assert where == {
        bad[0]: "hot",
        retry[0]: "hot",
        cancel[0]: "dlq",
        cancel[1]: "dlq",
        zombie[0]: "dlq",
        abandoned[0]: "hot",
        released[0]: "hot",
    }
    assert scalar(store, "SELECT count(*) FROM jobs_archive") == 0  # purged
    for gone in (bad[1], *ok):
        assert scalar(store, "SELECT count(*) FROM jobs_dlq WHERE id = ?", gone) == 0
    c = counters(store)
    # 2 archived then purged; 2 dead (1 resurrected, 1 purged) + 2 cancelled + 1 zombie; 1 retry.
    assert c == {"enqueued": 10, "succeeded": 0, "failed": 3, "retried": 1}


def test_retry_keeps_the_row_hot_pending_later_and_counts_once(store):
    [job] = processing(store, "w", 1)
    assert store.reschedule("w", [Retry(job, 3600, "boom")]) == [job]
    row = store.get_job(job)
    assert (row["status"], row["worker_id"], row["heartbeat_at"], row["attempt_count"]) == (
        "pending",
        None,
        None,
        1,
    )
    assert row["last_error"] == "boom" and row["scheduled_at"] > store.now()
    assert store.fetch("w", 1) == []  # not due for an hour
    assert counters(store) == {"enqueued": 1, "succeeded": 0, "failed": 0, "retried": 1}
    assert buckets(store) == {}  # a retry is not a terminal outcome
    assert store.reschedule("w", [Retry(job, 0)]) == []  # already moved: no second retry


def test_counters_and_metric_buckets_are_written_with_each_terminal_move(store):
    ok = processing(store, "w", 3, prefix="ok", queue="qa")
    assert len(store.archive_succeeded("w", [(ok[0], 10.0), (ok[1], 30.0), (ok[2], None)])) == 3
    bad = processing(store, "w", 2, prefix="bad", queue="qa")
    store.move_to_dlq(
        "w", [Dead(bad[0], FailureReason.Timeout, "t", None, 5.0), Dead(bad[1], FailureReason.Fatal, "f")]
    )
    again = processing(store, "w", 1, prefix="again", queue="qb")
    store.reschedule("w", [Retry(again[0], 0)])
    [cancel] = enqueue(store, 1, prefix="cancel", queue="qb")
    store.cancel_many([cancel], actor=OPS)
    [zombie] = processing(store, "w", 1, prefix="zombie", queue="qc")
    age(store, "jobs_hot", [zombie], 3600, "heartbeat_at")
    store.archive_zombies(60)

    assert counters(store, "qa") == {"enqueued": 5, "succeeded": 3, "failed": 2, "retried": 0}
    assert counters(store, "qb") == {"enqueued": 2, "succeeded": 0, "failed": 1, "retried": 1}
    assert counters(store, "qc") == {"enqueued": 1, "succeeded": 0, "failed": 1, "retried": 0}
    b = buckets(store)
    assert b[("qa", 0, -1)] == (3, 2, 40.0)  # outcome success, reason -1, 2 of 3 had a duration
    assert b[("qa", 1, int(FailureReason.Timeout))] == (1, 1, 5.0)
    assert b[("qa", 1, int(FailureReason.Fatal))][:1] == (1,)
    assert b[("qb", 1, int(FailureReason.Cancelled))][0] == 1
    assert b[("qc", 1, int(FailureReason.Zombie))][0] == 1
    assert len(b) == 5
    s = store.stats()
    assert (s["processed_1m"], s["failed_1m"], s["succeeded_total"], s["failed_total"]) == (7, 4, 3, 4)
    assert s["retried_total"] == 1 and s["enqueued_total"] == 8

    # Later resurrect and purge never rewrite the outcome windows.
    store.resurrect(bad[0], actor=OPS)
    store.purge_dlq(ids=[bad[1]], actor=OPS)
    store.purge_archive(store.now(), actor=OPS)
    assert buckets(store) == b
    assert counters(store, "qa") == {"enqueued": 5, "succeeded": 0, "failed": 0, "retried": 0}


def test_dlq_move_keeps_reason_error_and_fingerprint_and_writes_an_event(store):
    [job] = dead(
        store, 1, reason=FailureReason.Throttled, error="Traceback ...\nRateLimited: 429", fingerprint="fp1"
    )
    row = store.get_job(job)
    assert (row["location"], row["failure_reason"], row["fingerprint"]) == ("dlq", "Throttled", "fp1")
    assert row["error_details"] == "Traceback ...\nRateLimited: 429"
    assert row["attempt_count"] == 1 and row["worker_id"] == "w-dead" and row["failed_at"] is not None
    [ev] = events(store, "dlq")
    assert job in ev["message"] and ev["data"]["job_id"] == job and ev["data"]["reason"] == 5


# ------------------------------------------------------------------------------------ rescue


def test_abandoned_fetches_return_to_pending_without_touching_attempts_or_counters(store):
    old = fetched(store, "gone", 2, prefix="old")
    young = fetched(store, "alive", 1, prefix="young", queue="q2")
    age(store, "jobs_hot", old, 120, "updated_at")
    before = counters(store)
    assert sorted(r["id"] for r in store.recover_abandoned(60)) == sorted(old)
    for job in old:
        row = store.get_job(job)
        assert (row["status"], row["worker_id"], row["attempt_count"]) == ("pending", None, 0)
    assert store.get_job(young[0])["worker_id"] == "alive"
    assert counters(store) == before and buckets(store) == {}


def test_zombie_without_heartbeat_uses_last_update_and_reports_worker_and_runtime(store):
    [job] = processing(store, "w-z", 1)
    sql(store, "UPDATE jobs_hot SET heartbeat_at = NULL")
    age(store, "jobs_hot", [job], 120, "updated_at")
    assert [r["id"] for r in store.archive_zombies(60, fingerprint="zfp")] == [job]
    row = store.get_job(job)
    assert row["failure_reason"] == "Zombie" and row["fingerprint"] == "zfp"
    assert row["error_details"].startswith("Zombie detected: heartbeat expired")
    assert "w-z" in row["error_details"] and "attempt 1" in row["error_details"]


def test_queue_row_timeout_wins_over_the_global_one_in_both_directions(store):
    store.set_queue("fast", actor=OPS, zombie_timeout_seconds=10)
    store.set_queue("slow", actor=OPS, zombie_timeout_seconds=3600)
    fast = processing(store, "w", 1, prefix="fast", queue="fast")
    slow = processing(store, "w", 1, prefix="slow", queue="slow")
    plain = processing(store, "w", 1, prefix="plain", queue="plain")
    age(store, "jobs_hot", fast + slow + plain, 30, "heartbeat_at")
    # Global 600 s: only the queue with 10 s is overdue; global 20 s: plain is, slow (1 h) still is not.
    assert [r["id"] for r in store.archive_zombies(600)] == fast
    assert [r["id"] for r in store.archive_zombies(20)] == plain
    assert store.archive_zombies(1) == []
    assert store.get_job(slow[0])["status"] == "processing"


def test_configured_override_wins_over_the_global_one_and_the_queue_row_over_both(store):
    store.set_queue("both", actor=OPS, zombie_timeout_seconds=3600)
    short = processing(store, "w", 1, prefix="short", queue="short")
    long_ = processing(store, "w", 1, prefix="long", queue="long")
    both = processing(store, "w", 1, prefix="both", queue="both")
    age(store, "jobs_hot", short + long_ + both, 30, "heartbeat_at")
    overrides = {"short": 10.0, "long": 3600.0, "both": 5.0}
    assert [r["id"] for r in store.archive_zombies(600, overrides)] == short
    assert store.archive_zombies(20, overrides) == []  # long's override beats the 20 s global
    assert [r["id"] for r in store.archive_zombies(20, {})] == long_
    assert store.get_job(both[0])["status"] == "processing"  # the queue row (1 h) beats the 5 s override


def test_configured_overrides_apply_to_queue_names_with_any_characters(store):
    names = ["émails", 'we"ird', "back\\slash", "dots.and[0]"]
    running = {name: processing(store, "w", 1, prefix=f"n{i}", queue=name)[0] for i, name in enumerate(names)}
    age(store, "jobs_hot", list(running.values()), 30, "heartbeat_at")
    moved = store.archive_zombies(600, dict.fromkeys(names, 10.0))
    assert sorted(r["id"] for r in moved) == sorted(running.values())


def test_each_job_of_a_set_keeps_its_own_values(store):
    """A set finished in one statement: every row gets its own item's duration, reason, error, fingerprint
    and delay, whatever the items' order (PostgreSQL looks each row's item up by id, docs/worker.md)."""
    ok = processing(store, "w", 5, prefix="ok")
    durations: dict[str, float | None] = {j: 10.0 * (i + 1) + 0.125 for i, j in enumerate(ok)}
    durations[ok[2]] = None
    assert sorted(store.archive_succeeded("w", list(reversed(durations.items())))) == sorted(ok)
    assert {j: store.get_job(j)["duration_ms"] for j in ok} == durations

    bad = processing(store, "w", 4, prefix="bad")
    reasons = [
        FailureReason.Timeout,
        FailureReason.Fatal,
        FailureReason.MaxRetriesExceeded,
        FailureReason.Fatal,
    ]
    items = [
        Dead(j, reasons[i], f"error {i}\nline 2 'quoted' \"x\" \\ é", f"fp{i}", float(i) if i else None)
        for i, j in enumerate(bad)
    ]
    assert sorted(store.move_to_dlq("w", items[::-1])) == sorted(bad)
    for d in items:
        row = store.get_job(d.id)
        got = (row["failure_reason"], row["error_details"], row["fingerprint"], row["duration_ms"])
        assert got == (d.reason.name, d.error, d.fingerprint, d.duration_ms)

    again = processing(store, "w", 3, prefix="again")
    retries = [Retry(j, 3600.0 * (i + 1), f"boom {i}", f"rf{i}") for i, j in enumerate(again)]
    assert sorted(store.reschedule("w", retries[::-1])) == sorted(again)
    rows = {j: store.get_job(j) for j in again}
    assert [rows[r.id]["last_error"] for r in retries] == ["boom 0", "boom 1", "boom 2"]
    times = [rows[j]["scheduled_at"] for j in again]
    gaps = [(later - earlier).total_seconds() for earlier, later in itertools.pairwise(times)]
    assert all(abs(g - 3600) < 60 for g in gaps), gaps  # delays of 1, 2 and 3 hours, each its own
