"""The event log (what happened, for the API's feed and alerts), the pruning of time-series rows
(metric buckets, events, failure history) past their retention, and the folding of counter deltas."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chokaq_ops.storage.database import Database


class Events:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add_event(self, kind: str, message: str, data: Mapping[str, Any] | None = None) -> int:
        rows = self.db.run(
            "add_event", kind=kind, message=message, data=dict(data) if data is not None else None
        )
        return int(rows[0]["id"])

    def events_after(self, after_id: int, limit: int = 100) -> list[dict[str, Any]]:
        return self.db.run("events_after", write=False, after_id=int(after_id), limit=int(limit))

    def last_event_id(self) -> int:
        return int(self.db.run("last_event_id", write=False)[0]["id"])

    def prune(
        self,
        *,
        buckets_older_than_s: float,
        events_older_than_s: float,
        failures_older_than_s: float | None = None,
        schedule_runs_older_than_s: float | None = None,
    ) -> dict[str, int]:
        """Delete metric buckets, events, failure history and the schedules' tick ledger older than
        their retention, in CleanupBatchSize transactions. Returns how many of each went and the number
        of batches."""
        done = {"buckets": 0, "events": 0, "failures": 0, "schedule_runs": 0, "batches": 0}
        for key, query, age in (
            ("buckets", "prune_buckets", buckets_older_than_s),
            ("events", "prune_events", events_older_than_s),
            ("failures", "prune_failures", failures_older_than_s),
            ("schedule_runs", "prune_schedule_runs", schedule_runs_older_than_s),
        ):
            if age is None:
                continue
            batches = self.db.run_batches(
                query, count=_deleted, cursor=_after, older_than_s=float(age), after_at=None
            )
            for rows in batches:
                n = _deleted(rows)
                done[key] += n
                done["batches"] += n > 0  # the probe that finds a table already pruned is no batch
        return done

    def fold_counters(self) -> int:
        """PostgreSQL: add the counter deltas of finished transactions into the queues' totals (query
        fold_counters, docs/endurance.md); returns how many queues' totals changed. SQLite keeps its
        totals in place (no deltas): 0."""
        if "fold_counters" not in self.db.queries:
            return 0
        return len(self.db.run("fold_counters"))


def _deleted(rows: list[dict[str, Any]]) -> int:
    return int(rows[0]["n"]) if rows else 0


def _after(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"after_at": rows[0]["last_at"]}
