"""Factories and direct-SQL probes for the storage contract tests: put jobs into each state through the
Store's own operations, age times on the database clock, and read tables directly (never through the code
under test) to check the one-table invariant, counters, buckets and "no row changed"."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from chokaq_ops.models import Actor, FailureReason
from chokaq_ops.storage import Dead, Store
from tests.support.dbprobe import (  # noqa: F401 (re-exported for the storage tests)
    JOB_TABLES,
    age,
    ago_expr,
    counters,
    enqueue,
    events,
    fetched,
    hot_copy,
    is_pg,
    jobs,
    locations,
    processing,
    scalar,
    sql,
)

OPS = Actor("ops")

# Every table a storage operation may write; "no row changed" compares all of them.
TABLES = (
    "jobs_hot",
    "jobs_archive",
    "jobs_dlq",
    "dlq_counts",
    "queues",
    "stats_summary",
    "metric_buckets",
    "audit_log",
    "events",
    "api_tokens",
    "leases",
    "plans",
    "plan_items",
)


# ------------------------------------------------------------------------------------ states


def archived(
    store: Store, n: int, *, worker: str = "w-arch", duration_ms: float = 5.0, **kw: Any
) -> list[str]:
    ids = processing(store, worker, n, **kw)
    assert sorted(store.archive_succeeded(worker, [(i, duration_ms) for i in ids])) == sorted(ids)
    return ids


def dead(
    store: Store,
    n: int,
    *,
    worker: str = "w-dead",
    reason: FailureReason = FailureReason.Fatal,
    error: str = "ValueError: boom",
    fingerprint: str | None = None,
    duration_ms: float | None = 3.0,
    **kw: Any,
) -> list[str]:
    ids = processing(store, worker, n, **kw)
    items = [Dead(i, reason, error, fingerprint, duration_ms) for i in ids]
    assert sorted(store.move_to_dlq(worker, items)) == sorted(ids)
    return ids


def dead_bulk(store: Store, n: int, *, prefix: str, queue: str = "bulk", **kw: Any) -> list[str]:
    """Many dead jobs quickly: enqueue, claim and fail them in batches of 1000 statements' worth."""
    out: list[str] = []
    for start in range(0, n, 1000):
        size = min(1000, n - start)
        out += dead(store, size, prefix=f"{prefix}{start // 1000}_", queue=queue, **kw)
    return out


# ------------------------------------------------------------------------------------ probes


def buckets(store: Store) -> dict[tuple[str, int, int], tuple[int, int, float]]:
    """(queue, outcome, reason) -> (completed, durations counted, total ms), summed over seconds."""
    rows = sql(
        store,
        "SELECT queue, outcome, failure_reason, sum(completed_count), sum(duration_count),"
        " sum(total_duration_ms) FROM metric_buckets GROUP BY queue, outcome, failure_reason",
    )
    return {(q, int(o), int(r)): (int(c), int(d), float(t)) for q, o, r, c, d, t in rows}


def assert_one_table(store: Store, ids: Iterable[str]) -> dict[str, str]:
    """Each id is in exactly one of hot / archive / DLQ; returns id -> location."""
    where = locations(store)
    ids = list(ids)
    doubled = {i: where[i] for i in ids if len(where.get(i, [])) > 1}
    missing = [i for i in ids if i not in where]
    assert not doubled, f"jobs in two tables: {list(doubled.items())[:5]}"
    assert not missing, f"{len(missing)} jobs in no table, e.g. {missing[:5]}"
    return {i: where[i][0] for i in ids}


def table_rows(store: Store, table: str) -> list[tuple[Any, ...]]:
    rows = sql(store, f"SELECT * FROM {table}")
    return sorted(rows, key=lambda r: tuple("" if v is None else str(v) for v in r))


def snapshot(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """The full contents of every table, for 'this call changed no row'."""
    return {t: table_rows(store, t) for t in TABLES}


def audit(store: Store, action: str | None = None) -> list[dict[str, Any]]:
    rows = sql(store, "SELECT id, actor, action, job_id, plan_id, count, details FROM audit_log ORDER BY id")
    out = [
        {
            "id": int(i),
            "actor": a,
            "action": act,
            "job_id": j,
            "plan_id": p,
            "count": int(c),
            "details": json.loads(d) if d else None,
        }
        for i, a, act, j, p, c, d in rows
    ]
    return [r for r in out if action is None or r["action"] == action]


def before_now(store: Store, seconds: float) -> Any:
    """A timezone-aware datetime `seconds` before the database clock."""
    return store.now() - timedelta(seconds=seconds)
