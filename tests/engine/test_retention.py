"""Retention against a real Store on SQLite and PostgreSQL: it purges only what is older than the policy,
in batches, audited as system:retention, never the DLQ unless configured; it survives failures."""

from __future__ import annotations

import logging

import pytest
from crash.support import age, counts, events, processing, sql

from chokaq_ops.engine.retention import Retention
from chokaq_ops.models import FailureReason
from chokaq_ops.settings import Settings
from chokaq_ops.storage import Store
from chokaq_ops.storage.worker_ops import Dead
from tests.support.dbprobe import ago_expr

DAY = 86400


@pytest.fixture
def small_batches(db_url):
    with Store(db_url, pool_size=8, cleanup_batch_size=2, transient_retry_base_delay=0.02) as s:
        yield s


def archived(store, n: int, prefix: str) -> list[str]:
    ids = processing(store, "w", n, prefix=prefix)
    assert sorted(store.archive_succeeded("w", [(i, 1.0) for i in ids])) == sorted(ids)
    return ids


def dead(store, n: int, prefix: str) -> list[str]:
    ids = processing(store, "w", n, prefix=prefix)
    moved = store.move_to_dlq("w", [Dead(i, FailureReason.Fatal, "boom") for i in ids])
    assert sorted(moved) == sorted(ids)
    return ids


def ids_in(store, table: str) -> list[str]:
    return sorted(r[0] for r in sql(store, f"SELECT id FROM {table}"))


def test_archive_purge_takes_only_older_rows_in_batches_and_audits_them(small_batches):
    store = small_batches
    old = archived(store, 5, "old")
    recent = archived(store, 3, "new")
    age(store, "jobs_archive", old, 31 * DAY, "finished_at")
    age(store, "jobs_archive", recent, 29 * DAY, "finished_at")
    before = counts(store)["succeeded_total"]
    result = Retention(store, Settings()).run()  # default: 30 days
    assert (result["archive_purged"], result["batches"], result["errors"]) == (5, 3, [])
    assert ids_in(store, "jobs_archive") == sorted(recent)
    assert counts(store)["succeeded_total"] == before - 5
    audit = store.list_audit(actor="system:retention").items
    assert sum(a["count"] for a in audit) == 5 and {a["action"] for a in audit} == {"purge_archive"}


def test_the_dlq_is_never_purged_by_default(store):
    ids = dead(store, 3, "d")
    age(store, "jobs_dlq", ids, 3650 * DAY, "failed_at")
    result = Retention(store, Settings()).run()
    assert result["dlq_purged"] == 0 and ids_in(store, "jobs_dlq") == sorted(ids)
    assert counts(store)["failed_total"] == 3


def test_configured_dlq_retention_purges_by_failed_at(store):
    old, recent = dead(store, 3, "old"), dead(store, 2, "new")
    age(store, "jobs_dlq", old, 15 * DAY, "failed_at")
    age(store, "jobs_dlq", recent, 13 * DAY, "failed_at")
    settings = Settings().with_overrides({"retention.dlq": "14d"})
    result = Retention(store, settings).run()
    assert result["dlq_purged"] == 3 and ids_in(store, "jobs_dlq") == sorted(recent)
    assert counts(store)["failed_total"] == 2
    audit = store.list_audit(actor="system:retention").items
    assert sorted(a["job_id"] for a in audit) == sorted(old)


def test_archive_retention_can_be_switched_off(store):
    ids = archived(store, 2, "a")
    age(store, "jobs_archive", ids, 400 * DAY, "finished_at")
    result = Retention(store, Settings().with_overrides({"retention.archive": "none"})).run()
    assert result["archive_purged"] == 0 and len(ids_in(store, "jobs_archive")) == 2


def test_metric_buckets_and_events_older_than_their_policy_are_pruned(store):
    archived(store, 2, "a")
    for i in range(4):
        store.add_event("test", f"event {i}")
    old_event_ids = [e["id"] for e in events(store)][:2]
    sql(store, f"UPDATE events SET at = {ago_expr(store)} WHERE id IN (?, ?)", 9 * DAY, *old_event_ids)
    sql(store, f"UPDATE metric_buckets SET bucket_start = {ago_expr(store)}", 9 * DAY)
    archived(store, 1, "b")  # a fresh bucket
    settings = Settings().with_overrides({"retention.metric_buckets": "8d", "retention.events": "8d"})
    assert Retention(store, settings).run()["pruned"] is True
    assert [e["message"] for e in events(store)] == ["event 2", "event 3"]
    assert sql(store, "SELECT sum(completed_count) FROM metric_buckets")[0][0] == 1


def test_retention_takes_the_lease(store):
    ids = archived(store, 2, "a")
    age(store, "jobs_archive", ids, 31 * DAY, "finished_at")
    a, b = Retention(store, Settings(), holder="a"), Retention(store, Settings(), holder="b")
    assert a.run()["archive_purged"] == 2
    assert b.run()["skipped"] is True
    assert sql(store, "SELECT holder FROM leases WHERE name = 'retention'")[0][0] == "a"


def test_a_failing_part_is_logged_and_the_others_still_run(store, caplog):
    ids = archived(store, 2, "a")
    age(store, "jobs_archive", ids, 31 * DAY, "finished_at")
    store.add_event("test", "old")
    sql(store, f"UPDATE events SET at = {ago_expr(store)}", 30 * DAY)
    sql(store, "ALTER TABLE jobs_archive RENAME TO jobs_archive_away")
    try:
        with caplog.at_level(logging.ERROR, logger="chokaq.retention"):
            result = Retention(store, Settings()).run()
    finally:
        sql(store, "ALTER TABLE jobs_archive_away RENAME TO jobs_archive")
    assert len(result["errors"]) == 1 and result["errors"][0].startswith("archive:")
    assert any("retention archive failed" in r.getMessage() for r in caplog.records)
    assert result["pruned"] is True and events(store) == []
    assert Retention(store, Settings(), holder="next").run(force=True)["archive_purged"] == 2
