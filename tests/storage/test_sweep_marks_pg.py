"""PostgreSQL: each rescue phase starts its index scan where the previous sweep left a mark (sweep_marks,
docs/endurance.md), so the entries of jobs that left long ago are walked once; a row the previous sweep
had to leave (held by another session, or of a queue with a longer timeout) is never behind the mark."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from storage_factories import OPS, age, fetched, processing, sql

from chokaq_ops.storage import Store
from chokaq_ops.storage.dialects import from_url


@pytest.fixture
def pg(pg_url: str) -> Iterator[Store]:
    with Store(pg_url, pool_size=8, transient_retry_base_delay=0.02) as s:
        yield s


def _marks(store: Store) -> dict[str, datetime]:
    # Read raw: the session's time zone is UTC and the driver gives naive times.
    return {p: at.replace(tzinfo=UTC) for p, at in sql(store, "SELECT phase, at FROM sweep_marks")}


def test_a_sweep_leaves_marks_at_its_threshold_when_nothing_was_left(pg):
    assert pg.archive_zombies(600) == [] and pg.recover_abandoned(600) == []
    now = pg.now()
    marks = _marks(pg)
    assert set(marks) == {"zombies", "abandoned"}
    for at in marks.values():
        assert abs((now - at).total_seconds() - 600) < 5  # now - timeout: nothing older is left


def test_a_zombie_another_session_held_during_a_sweep_is_moved_by_the_next(pg, pg_url):
    [job] = processing(pg, "w", 1, prefix="z")
    age(pg, "jobs_hot", [job], 700, "updated_at", "heartbeat_at")
    other = from_url(pg_url).connect()
    other.autocommit = False
    try:
        other.cursor().execute("SELECT id FROM jobs_hot WHERE id = ? FOR UPDATE", job)
        assert pg.archive_zombies(600) == []  # skipped: its row is locked
    finally:
        other.rollback()
        other.close()
    # The mark stayed at the row it had to leave, not at the sweep's threshold.
    assert _marks(pg)["zombies"] <= pg.get_job(job)["heartbeat_at"]
    assert [r["id"] for r in pg.archive_zombies(600)] == [job]


def test_a_zombie_of_a_queue_with_a_longer_timeout_is_not_passed(pg):
    pg.set_queue("slow", actor=OPS, zombie_timeout_seconds=3600)
    [job] = processing(pg, "w", 1, prefix="s", queue="slow")
    age(pg, "jobs_hot", [job], 700, "updated_at", "heartbeat_at")
    assert pg.archive_zombies(600) == []  # its queue waits an hour
    assert pg.archive_zombies(600) == []
    pg.set_queue("slow", actor=OPS, zombie_timeout_seconds=650)
    assert [r["id"] for r in pg.archive_zombies(600)] == [job]


def test_an_abandoned_fetch_held_during_a_sweep_is_recovered_by_the_next(pg, pg_url):
    [job] = fetched(pg, "w", 1, prefix="a")
    age(pg, "jobs_hot", [job], 700, "updated_at")
    other = from_url(pg_url).connect()
    other.autocommit = False
    try:
        other.cursor().execute("SELECT id FROM jobs_hot WHERE id = ? FOR UPDATE", job)
        assert pg.recover_abandoned(600) == []
    finally:
        other.rollback()
        other.close()
    assert [r["id"] for r in pg.recover_abandoned(600)] == [job]
