"""Database helpers for the rescue, retention and crash tests: put jobs in a state, age their times on the
database clock, read rows directly (from outside any worker), and check the one-table invariant."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from chokaq_ops.models import NewJob
from chokaq_ops.storage import Store

# Which time columns a test may age, per table (names are never taken from test input at run time).
_AGEABLE = {
    "jobs_hot": ("heartbeat_at", "updated_at", "started_at", "created_at"),
    "jobs_archive": ("finished_at",),
    "jobs_dlq": ("failed_at",),
    "metric_buckets": ("bucket_start",),
    "events": ("at",),
}


def is_pg(store: Store) -> bool:
    return store.dialect.name == "postgresql"


def sql(store: Store, text: str, *params: Any) -> list[tuple[Any, ...]]:
    """Raw SQL (qmark parameters on both drivers) on a pooled autocommit connection."""
    with store.connection() as conn:
        cur = conn.cursor()
        try:
            cur.execute(text, params)
            return [tuple(r) for r in cur.fetchall()] if cur.description else []
        finally:
            cur.close()


def ago(store: Store, seconds: float) -> str:
    """An SQL expression for 'database now minus `seconds`' taking one parameter."""
    if is_pg(store):
        return "now() - make_interval(secs => CAST(? AS double precision))"
    return "strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || CAST(? AS text) || ' seconds')"


def age(store: Store, table: str, ids: Sequence[str] | None, seconds: float, *columns: str) -> None:
    """Move time columns `seconds` into the past (database clock); ids None: every row of the table."""
    for col in columns:
        assert col in _AGEABLE[table], (table, col)
        where = " WHERE id IN (" + ",".join("?" * len(ids)) + ")" if ids is not None else ""
        sql(store, f"UPDATE {table} SET {col} = {ago(store, seconds)}{where}", seconds, *(ids or []))


def enqueue(
    store: Store, n: int, *, queue: str = "default", type_: str = "t", prefix: str = "j"
) -> list[str]:
    jobs = [NewJob(type=type_, id=f"{prefix}{i:05d}", queue=queue, payload="{}") for i in range(n)]
    return [r.id for r in store.enqueue(jobs)]


def fetched(store: Store, worker: str, n: int, **kw: Any) -> list[str]:
    ids = enqueue(store, n, **kw)
    got = [r["id"] for r in store.fetch(worker, n, [kw.get("queue", "default")])]
    assert sorted(got) == sorted(ids)
    return ids


def processing(store: Store, worker: str, n: int, **kw: Any) -> list[str]:
    ids = fetched(store, worker, n, **kw)
    assert set(store.mark_processing(worker, ids)) == set(ids)
    return ids


def counts(store: Store) -> dict[str, int]:
    """Rows per table and the summed counters, read directly."""
    hot, archive, dlq = (
        sql(store, f"SELECT count(*) FROM {t}")[0][0] for t in ("jobs_hot", "jobs_archive", "jobs_dlq")
    )
    enq, ok, failed = sql(
        store,
        "SELECT coalesce(sum(enqueued_total), 0), coalesce(sum(succeeded_total), 0),"
        " coalesce(sum(failed_total), 0) FROM stats_summary",
    )[0]
    return {
        "hot": int(hot),
        "archive": int(archive),
        "dlq": int(dlq),
        "enqueued_total": int(enq),
        "succeeded_total": int(ok),
        "failed_total": int(failed),
    }


def locations(store: Store) -> dict[str, list[str]]:
    """Every job id per table; a job in two tables shows up twice."""
    out: dict[str, list[str]] = {}
    for loc, table in (("hot", "jobs_hot"), ("archive", "jobs_archive"), ("dlq", "jobs_dlq")):
        for (job_id,) in sql(store, f"SELECT id FROM {table}"):
            out.setdefault(job_id, []).append(loc)
    return out


def assert_one_table_each(store: Store, expected_ids: Sequence[str] | None = None) -> dict[str, list[str]]:
    where = locations(store)
    doubled = {k: v for k, v in where.items() if len(v) > 1}
    assert not doubled, f"jobs in more than one table: {list(doubled.items())[:10]}"
    if expected_ids is not None:
        missing = set(expected_ids) - set(where)
        assert not missing, f"{len(missing)} jobs in no table, e.g. {sorted(missing)[:10]}"
    return where


def events(store: Store, kind: str | None = None) -> list[dict[str, Any]]:
    """Event rows read directly: the stream's reader (`events_after`) on PostgreSQL holds back events while
    any transaction on the shared server is older than them, which other tests' load can make seconds."""
    rows = sql(store, "SELECT id, kind, message, data FROM events ORDER BY id")
    out = [
        {"id": int(i), "kind": k, "message": m, "data": json.loads(d) if d else None} for i, k, m, d in rows
    ]
    return [e for e in out if kind is None or e["kind"] == kind]


def rescue_totals(store: Store) -> tuple[int, int]:
    """(recovered, archived) summed over every rescue event."""
    data = [e["data"] for e in events(store, "rescue")]
    return sum(d["recovered"] for d in data), sum(d["archived"] for d in data)
