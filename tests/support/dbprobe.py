"""Direct-SQL helpers every database test shares: raw statements on a pooled connection, times moved into
the past on the database clock, jobs put into a state through the Store's own operations, and reads of
the job tables and events that never go through the code under test."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from typing import Any

from chokaq_ops.models import NewJob
from chokaq_ops.storage import Store

JOB_TABLES = {"hot": "jobs_hot", "archive": "jobs_archive", "dlq": "jobs_dlq"}

# Time columns a test may move into the past, per table (never taken from test input at run time).
_AGEABLE = {
    "jobs_hot": ("heartbeat_at", "updated_at", "started_at", "created_at", "due_at", "scheduled_at"),
    "jobs_archive": ("finished_at", "created_at"),
    "jobs_dlq": ("failed_at", "created_at"),
    "audit_log": ("at",),
    "metric_buckets": ("bucket_start",),
    "events": ("at",),
    "job_failures": ("failed_at",),  # no id column: age every row (ids=None)
    "plan_freezes": ("beat_at",),  # no id column: age every row (ids=None)
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
    """SQL for 'database now minus ? seconds' (one parameter)."""
    if is_pg(store):
        return "now() - make_interval(secs => CAST(? AS double precision))"
    return "strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || CAST(? AS text) || ' seconds')"


def age(store: Store, table: str, ids: Sequence[str] | None, seconds: float, *columns: str) -> None:
    """Set time columns to `seconds` before the database's now: of the given rows, or of every row (None)."""
    assert ids is None or ids, "no ids given: pass None to age every row"
    for col in columns:
        assert col in _AGEABLE[table], (table, col)
        where = " WHERE id IN (" + ",".join("?" * len(ids)) + ")" if ids is not None else ""
        # A pending job moved earlier by hand lands behind the claims' lane positions: like every write
        # that makes a job claimable it must name its transaction, or no claim looks there
        # (docs/endurance.md).
        ready = (
            ", ready_xid = pg_current_xact_id()"
            if table == "jobs_hot" and col == "due_at" and is_pg(store)
            else ""
        )
        sql(store, f"UPDATE {table} SET {col} = {ago_expr(store)}{ready}{where}", seconds, *(ids or []))
    if table == "jobs_hot" and {"heartbeat_at", "updated_at"} & set(columns) and is_pg(store):
        # Rows aged by hand may land before where the rescue sweep starts its scans (sweep_marks), which
        # real time never does: the next sweep starts at the beginning.
        sql(store, "DELETE FROM sweep_marks")


def counters(store: Store, queue: str | None = None) -> dict[str, int]:
    """The four counters summed over queues (or of one queue), read from the tables directly. PostgreSQL
    keeps the deltas of recent transactions in queue_counts until they are folded into stats_summary
    (docs/endurance.md): a counter is the two added up."""
    where, params = ("WHERE queue = ?", (queue,)) if queue else ("", ())
    pairs = (("enqueued_total", "enqueued"), ("succeeded_total", "succeeded"), ("failed_total", "failed"),
             ("retried_total", "retried"))  # fmt: skip
    parts = [f"(SELECT coalesce(sum({total}), 0) FROM stats_summary {where})" for total, _ in pairs]
    if is_pg(store):
        parts = [
            f"{p} + (SELECT coalesce(sum({d}), 0) FROM queue_counts {where})"
            for p, (_, d) in zip(parts, pairs, strict=True)
        ]
    row = sql(store, "SELECT " + ", ".join(parts), *(params * (len(parts) * (2 if is_pg(store) else 1))))[0]
    return {key: int(v) for (_, key), v in zip(pairs, row, strict=True)}


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


def locations(store: Store) -> dict[str, list[str]]:
    """Every job id -> the tables it is in (a job in two tables lists both)."""
    out: dict[str, list[str]] = {}
    for loc, table in JOB_TABLES.items():
        for (job_id,) in sql(store, f"SELECT id FROM {table}"):
            out.setdefault(job_id, []).append(loc)
    return out


def events(store: Store, kind: str | None = None) -> list[dict[str, Any]]:
    """Event rows read directly: the stream's reader (`events_after`) on PostgreSQL holds back events while
    an older writing transaction of the same database is in flight."""
    rows = sql(store, "SELECT id, kind, message, data FROM events ORDER BY id")
    out = [
        {"id": int(i), "kind": k, "message": m, "data": json.loads(d) if d else None} for i, k, m, d in rows
    ]
    return [e for e in out if kind is None or e["kind"] == kind]


@contextlib.contextmanager
def row_locked(store: Store, query: str, *params: Any) -> Iterator[Any]:
    """Another application's open transaction holding the rows `query` (a SELECT ... FOR UPDATE) locks
    until the block ends; yields that connection (a test may act from it, e.g. end other sessions)."""
    holder = store.dialect.connect()
    holder.autocommit = False
    try:
        cur = holder.cursor()
        cur.execute(query, *params)
        assert cur.fetchall(), f"nothing to lock: {query} {params}"
        yield holder
    finally:
        holder.rollback()
        holder.close()


def hot_copy(store: Store, job_id: str, priority: int = 3) -> None:
    """A live copy in hot of the dead job `job_id` (a job in two tables), told apart by its `priority`."""
    sql(
        store,
        "INSERT INTO jobs_hot (id, queue, type, payload, priority, status, attempt_count, due_at, created_at,"
        " updated_at) SELECT id, queue, type, payload, ?, 0, 0, created_at, created_at, created_at"
        " FROM jobs_dlq WHERE id = ?",
        priority,
        job_id,
    )


def reject_inserts(store: Store, table: str, job_id: str) -> None:
    """A trigger that fails every insert of `job_id` into `table` (test_reject; allow_inserts drops it)."""
    if is_pg(store):
        sql(
            store,
            "CREATE OR REPLACE FUNCTION test_reject() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " IF NEW.id = TG_ARGV[0] THEN RAISE EXCEPTION 'rejected by the test'; END IF; RETURN NEW; END $$",
        )
        sql(
            store,
            f"CREATE TRIGGER test_reject BEFORE INSERT ON {table} FOR EACH ROW"
            f" EXECUTE FUNCTION test_reject('{job_id}')",
        )
    else:
        sql(
            store,
            f"CREATE TRIGGER test_reject BEFORE INSERT ON {table} WHEN NEW.id = '{job_id}'"
            " BEGIN SELECT RAISE(ABORT, 'rejected by the test'); END",
        )


def allow_inserts(store: Store, table: str) -> None:
    sql(store, "DROP TRIGGER test_reject" + (f" ON {table}" if is_pg(store) else ""))
