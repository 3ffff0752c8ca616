"""Factories and direct-SQL probes for the storage contract tests: put jobs into each state through the
Store's own operations, age times on the database clock, and read tables directly (never through the code
under test) to check the one-table invariant, counters, buckets and "no row changed"."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

from chokaq_ops.models import Actor, FailureReason, NewJob
from chokaq_ops.storage import Dead, Store

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
JOB_TABLES = {"hot": "jobs_hot", "archive": "jobs_archive", "dlq": "jobs_dlq"}

# Time columns a test may move into the past, per table (never taken from test input at run time).
_AGEABLE = {
    "jobs_hot": ("heartbeat_at", "updated_at", "started_at", "created_at", "due_at", "scheduled_at"),
    "jobs_archive": ("finished_at", "created_at"),
    "jobs_dlq": ("failed_at", "created_at"),
    "audit_log": ("at",),
}


def is_pg(store: Store) -> bool:
    return store.dialect.name == "postgresql"


def sql(store: Store, text: str, *params: Any) -> list[tuple[Any, ...]]:
    """Raw SQL with `?` parameters on a pooled autocommit connection (both drivers take qmark)."""
    with store.connection() as conn:
        cur = conn.cursor()
        try:
            cur.execute(text, params)
            return [tuple(r) for r in cur.fetchall()] if cur.description else []
        finally:
            cur.close()


def scalar(store: Store, text: str, *params: Any) -> Any:
    return sql(store, text, *params)[0][0]


def ago_expr(store: Store) -> str:
    """SQL for 'database now minus ? seconds'."""
    if is_pg(store):
        return "now() - make_interval(secs => CAST(? AS double precision))"
    return "strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || CAST(? AS text) || ' seconds')"


def age(store: Store, table: str, ids: Sequence[str], seconds: float, *columns: str) -> None:
    """Set time columns of the given rows to `seconds` before the database's now."""
    assert ids
    for col in columns:
        assert col in _AGEABLE[table], (table, col)
        marks = ",".join("?" * len(ids))
        sql(store, f"UPDATE {table} SET {col} = {ago_expr(store)} WHERE id IN ({marks})", seconds, *ids)


# ------------------------------------------------------------------------------------ states


def jobs(n: int, *, prefix: str = "j", queue: str = "default", type_: str = "t", **kw: Any) -> list[NewJob]:
    return [NewJob(type=type_, id=f"{prefix}{i:05d}", queue=queue, **kw) for i in range(n)]


def enqueue(store: Store, n: int, **kw: Any) -> list[str]:
    res = store.enqueue(jobs(n, **kw))
    assert all(r.status == "new" for r in res), res[:3]
    return [r.id for r in res]


def fetched(store: Store, worker: str, n: int, **kw: Any) -> list[str]:
    """n new jobs claimed by `worker` (the queue must hold no other pending jobs)."""
    ids = enqueue(store, n, **kw)
    got = [r["id"] for r in store.fetch(worker, n, [kw.get("queue", "default")])]
    assert sorted(got) == sorted(ids)
    return ids


def processing(store: Store, worker: str, n: int, **kw: Any) -> list[str]:
    ids = fetched(store, worker, n, **kw)
    assert set(store.mark_processing(worker, ids)) == set(ids)
    return ids


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


def counters(store: Store, queue: str | None = None) -> dict[str, int]:
    """The four counters summed over queues (or of one queue), read from stats_summary directly."""
    where, params = ("WHERE queue = ?", (queue,)) if queue else ("", ())
    row = sql(
        store,
        "SELECT coalesce(sum(enqueued_total), 0), coalesce(sum(succeeded_total), 0),"
        f" coalesce(sum(failed_total), 0), coalesce(sum(retried_total), 0) FROM stats_summary {where}",
        *params,
    )[0]
    return dict(zip(("enqueued", "succeeded", "failed", "retried"), (int(v) for v in row), strict=True))


def buckets(store: Store) -> dict[tuple[str, int, int], tuple[int, int, float]]:
    """(queue, outcome, reason) -> (completed, durations counted, total ms), summed over seconds."""
    rows = sql(
        store,
        "SELECT queue, outcome, failure_reason, sum(completed_count), sum(duration_count),"
        " sum(total_duration_ms) FROM metric_buckets GROUP BY queue, outcome, failure_reason",
    )
    return {(q, int(o), int(r)): (int(c), int(d), float(t)) for q, o, r, c, d, t in rows}


def locations(store: Store) -> dict[str, list[str]]:
    """Every job id -> the tables it is in (a job in two tables lists both)."""
    out: dict[str, list[str]] = {}
    for loc, table in JOB_TABLES.items():
        for (job_id,) in sql(store, f"SELECT id FROM {table}"):
            out.setdefault(job_id, []).append(loc)
    return out


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


def events(store: Store, kind: str | None = None) -> list[dict[str, Any]]:
    rows = sql(store, "SELECT id, kind, message, data FROM events ORDER BY id")
    out = [
        {"id": int(i), "kind": k, "message": m, "data": json.loads(d) if d else None} for i, k, m, d in rows
    ]
    return [e for e in out if kind is None or e["kind"] == kind]


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
