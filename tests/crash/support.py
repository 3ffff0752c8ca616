"""Database helpers for the rescue, retention and crash tests: put jobs in a state, age their times on the
database clock, read rows directly (from outside any worker), and check the one-table invariant."""

from __future__ import annotations

from collections.abc import Sequence

from chokaq_ops.storage import Store
from tests.support.dbprobe import age, counters, enqueue, events, fetched, is_pg, locations, processing, sql  # noqa: F401 (re-exported)


def counts(store: Store) -> dict[str, int]:
    """Rows per table and the summed counters, read directly."""
    hot, archive, dlq = (
        sql(store, f"SELECT count(*) FROM {t}")[0][0] for t in ("jobs_hot", "jobs_archive", "jobs_dlq")
    )
    totals = counters(store)
    return {
        "hot": int(hot),
        "archive": int(archive),
        "dlq": int(dlq),
        "enqueued_total": totals["enqueued"],
        "succeeded_total": totals["succeeded"],
        "failed_total": totals["failed"],
        "retried_total": totals["retried"],
    }


def assert_one_table_each(store: Store, expected_ids: Sequence[str] | None = None) -> dict[str, list[str]]:
    where = locations(store)
    doubled = {k: v for k, v in where.items() if len(v) > 1}
    assert not doubled, f"jobs in more than one table: {list(doubled.items())[:10]}"
    if expected_ids is not None:
        missing = set(expected_ids) - set(where)
        assert not missing, f"{len(missing)} jobs in no table, e.g. {sorted(missing)[:10]}"
    return where


def rescue_totals(store: Store) -> tuple[int, int]:
    """(recovered, archived) summed over every rescue event."""
    data = [e["data"] for e in events(store, "rescue")]
    return sum(d["recovered"] for d in data), sum(d["archived"] for d in data)
