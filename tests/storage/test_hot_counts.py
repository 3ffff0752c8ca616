"""Hot jobs per queue and status are counted where they move (PostgreSQL: queue_counts deltas, folded into
stats_summary; docs/endurance.md), not read from jobs_hot: after every kind of move, and after folds, the
counts equal the rows."""

from __future__ import annotations

import time
from collections import Counter

from storage_factories import OPS, age, sql

from chokaq_ops.models import FailureReason, HotFilter, NewJob, Status
from chokaq_ops.storage import Dead, Retry, Store


def _rows(store: Store) -> Counter:
    return Counter(
        {
            (q, int(s)): int(n)
            for q, s, n in sql(store, "SELECT queue, status, count(*) FROM jobs_hot GROUP BY 1, 2")
        }
    )


def _counted(store: Store) -> Counter:
    names = {"pending": 0, "fetched": 1, "processing": 2}
    out: Counter = Counter()
    for q in store.queue_stats():
        for name, status in names.items():
            if q[name]:
                out[(q["name"], status)] = q[name]
    return out


def _check(store: Store) -> None:
    assert _counted(store) == _rows(store)
    stats = store.stats()
    rows = _rows(store)
    assert [stats["pending"], stats["fetched"], stats["processing"]] == [
        sum(n for (_, s), n in rows.items() if s == k) for k in (0, 1, 2)
    ]
    assert stats["hot"] == sum(rows.values())


def test_hot_counts_equal_the_rows_after_every_kind_of_move(store):
    store.enqueue([NewJob(type="t", id=f"a{i}", queue="a") for i in range(10)])
    store.enqueue([NewJob(type="t", id=f"b{i}", queue="b", idempotency_key=f"k{i}") for i in range(4)])
    # Generated ids: counted per queue by the producer and sent with the items (enqueue_fresh), for a
    # plain batch written as text and for items of other fields alike.
    store.enqueue([NewJob(type="t", queue=q) for q in ("c", "d", "c", "c")])
    store.enqueue([NewJob(type="t", queue=q, tags="x") for q in ("d", "c", "d")])
    _check(store)
    fetched = [r["id"] for r in store.fetch("w", 4, ["a"])]  # fetched, not started
    started = [r["id"] for r in store.fetch("w", 3, ["a"], start=3)]  # claim-and-start
    _check(store)
    store.mark_processing("w", fetched[:2])
    store.release("w", fetched[2:3])
    _check(store)
    store.archive_succeeded("w", [(started[0], 1.0)])
    store.move_to_dlq("w", [Dead(started[1], FailureReason.Fatal, "bad")])
    store.reschedule("w", [Retry(started[2], 30.0, "again")])
    _check(store)
    store.cancel_many([fetched[3], "b0"], actor=OPS)  # a fetched and a pending job
    _check(store)
    [dead] = sql(store, "SELECT id FROM jobs_dlq WHERE failure_reason = 6")[0]
    store.resurrect(dead, actor=OPS)
    _check(store)
    # The sweep: an abandoned fetch back to pending, a zombie to the DLQ.
    more = [r["id"] for r in store.fetch("w2", 2, ["b"])]
    age(store, "jobs_hot", more[:1], 700, "updated_at")
    store.mark_processing("w2", more[1:])
    age(store, "jobs_hot", more[1:], 700, "updated_at", "heartbeat_at")
    assert [r["id"] for r in store.recover_abandoned(600)] == more[:1]
    assert [r["id"] for r in store.archive_zombies(600)] == more[1:]
    _check(store)
    if store.dialect.name == "postgresql":
        # Deltas fold once their bucket of 1,024 transaction ids has passed and every transaction of the
        # server that began before has ended (tests of other databases share the ids): use ids up.
        deadline = time.monotonic() + 30
        folded = 0
        while int(sql(store, "SELECT count(*) FROM queue_counts")[0][0]) and time.monotonic() < deadline:
            for _ in range(300):
                sql(store, "SELECT pg_current_xact_id()")
            folded += store.fold_counters()
        assert folded >= 2 and not int(sql(store, "SELECT count(*) FROM queue_counts")[0][0])
    _check(store)


def test_a_hot_page_asks_for_no_more_rows_than_the_counters_hold(store, monkeypatch):
    """GET /jobs filtered by status and queue: the total comes from the counters, and the page's scan asks
    for at most that many rows, so it stops at the last live one instead of walking the rest of an index
    that holds an entry of every job finished since the oldest snapshot (docs/endurance.md)."""
    store.enqueue([NewJob(type="t", id=f"j{i}") for i in range(5)])
    store.fetch("w", 0)
    assert len(store.fetch("w", 3, start=3)) == 3
    asked: list[tuple[str, dict]] = []
    run = store.db.run

    def spy(name, *args, **params):
        asked.append((name, params))
        return run(name, *args, **params)

    monkeypatch.setattr(store.db, "run", spy)
    page = store.list_hot(HotFilter(status=Status.processing, queue="default"), page_size=50)
    assert page.total == 3 and len(page.items) == 3
    assert [n for n, _ in asked if n.startswith("count_hot")] == []  # no count of jobs_hot
    assert [p["limit"] for n, p in asked if n.startswith("list_hot")] == [3]
    asked.clear()
    page = store.list_hot(HotFilter(status=Status.pending), page=2, page_size=1)
    assert page.total == 2 and [p["limit"] for n, p in asked if n.startswith("list_hot")] == [1]
    asked.clear()
    assert store.list_hot(HotFilter(type="t"), page_size=50).total == 5  # other filters are counted
    assert [n for n, _ in asked if n.startswith("count_hot")] == ["count_hot"]
