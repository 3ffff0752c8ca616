"""Retention: the scheduled clean-up of data nobody needs to keep forever.

- archive rows finished before now - `Retention.Archive` (default 30 days; none disables it), deleted in
  `Storage.CleanupBatchSize` transactions exactly like `chokaq archive purge`, audited as "system:retention";
- DLQ rows failed before now - `Retention.Dlq`, only when that is configured (never by default: a dead job
  waits for a human), deleted by the batched DLQ purge and audited the same way;
- metric buckets older than `Retention.MetricBuckets` (7 days) and events older than `Retention.Events`
  (7 days: the events table is the live stream's outbox, and a reader reconnects within minutes), also
  in `Storage.CleanupBatchSize` transactions, so on SQLite a worker's heartbeat gets the writer lock
  between two batches however much there is to prune;
- worker registry rows not refreshed for `Retention.Workers` (1 day): workers that crashed or were
  killed (a worker that stops deletes its own row);
- the schedules' tick ledger past `Schedules.RunHistory` (7 days; a pruned tick never runs again:
  a schedule's next_run_at only moves forward).

Cutoffs come from the database clock. Each part runs on its own: one failing does not stop the others.
A database lease ("retention") lets one of many hosting processes do the work per interval.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from chokaq_ops.engine.rescue import default_holder, lease_ttl
from chokaq_ops.models import Actor, DlqFilter

if TYPE_CHECKING:
    from chokaq_ops.engine.metrics import Metrics
    from chokaq_ops.settings import Settings
    from chokaq_ops.storage import Store

log = logging.getLogger("chokaq.retention")

LEASE = "retention"
ACTOR = Actor("system:retention")


class Retention:
    def __init__(
        self,
        store: Store,
        settings: Settings,
        metrics: Metrics | None = None,
        holder: str | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.metrics = metrics
        self.holder = (holder or default_holder())[:100]
        self.last_result: dict[str, Any] | None = None

    def run(self, force: bool = False) -> dict[str, Any]:
        """One retention pass. Returns what it did: `skipped` (another process holds the lease),
        `archive_purged`, `dlq_purged`, `batches` (their committed transactions), `pruned`,
        `buckets_pruned`, `events_pruned`, `failures_pruned`, `schedule_runs_pruned`, `prune_batches`,
        `workers_pruned`, `orphans_reclaimed` (plan items of dead freezes) and `errors`. Never raises."""
        result: dict[str, Any] = {
            "skipped": False,
            "archive_purged": 0,
            "dlq_purged": 0,
            "batches": 0,
            "pruned": False,
            "buckets_pruned": 0,
            "events_pruned": 0,
            "failures_pruned": 0,
            "schedule_runs_pruned": 0,
            "prune_batches": 0,
            "workers_pruned": 0,
            "orphans_reclaimed": 0,
            "errors": [],
        }
        try:
            if not force and not self._lease():
                log.debug("retention: lease %r held by another process; skipping", LEASE)
                return result | {"skipped": True}
        except Exception as exc:
            log.error("retention: cannot take the lease: %s", exc)
            result["errors"].append(f"lease: {exc}")
            return result
        r = self.settings.retention
        if r.archive is not None:
            self._part(result, "archive", self._purge_archive, r.archive)
        if r.dlq is not None:
            self._part(result, "dlq", self._purge_dlq, r.dlq)
        self._part(result, "prune", self._prune)
        self._part(result, "workers", self._prune_workers)
        self._part(result, "orphans", self._reclaim_orphans)
        if result["archive_purged"] or result["dlq_purged"]:
            log.info(
                "retention: purged %d archived jobs and %d dead jobs in %d batches",
                result["archive_purged"],
                result["dlq_purged"],
                result["batches"],
            )
        self.last_result = result
        return result

    def _lease(self) -> bool:
        return self.store.try_lease(LEASE, self.holder, lease_ttl(self.settings.retention.interval))

    def _renew(self, _done: int) -> None:
        # Called after each committed batch: a long purge keeps the lease, so no second process joins it.
        try:
            self.store.try_lease(LEASE, self.holder, lease_ttl(self.settings.retention.interval))
        except Exception as exc:  # the purge itself is fine; only the courtesy renewal failed
            log.debug("retention: lease renewal failed: %s", exc)

    def _part(self, result: dict[str, Any], name: str, fn: Any, *args: Any) -> None:
        try:
            fn(result, *args)
        except Exception as exc:
            result["errors"].append(f"{name}: {exc}")
            log.error("retention %s failed; the next pass runs on schedule: %s", name, exc)

    def _purge_archive(self, result: dict[str, Any], keep_s: float) -> None:
        cutoff = self.store.now() - timedelta(seconds=keep_s)
        done = self.store.purge_archive(cutoff, actor=ACTOR, progress=self._renew)
        result["archive_purged"] += done.count
        result["batches"] += done.batches

    def _purge_dlq(self, result: dict[str, Any], keep_s: float) -> None:
        cutoff = self.store.now() - timedelta(seconds=keep_s)
        done = self.store.purge_dlq(actor=ACTOR, flt=DlqFilter(failed_to=cutoff), progress=self._renew)
        result["dlq_purged"] += done.count
        result["batches"] += done.batches

    def _prune(self, result: dict[str, Any]) -> None:
        r = self.settings.retention
        done = self.store.prune(
            buckets_older_than_s=r.metric_buckets,
            events_older_than_s=r.events,
            failures_older_than_s=r.failure_history,
            schedule_runs_older_than_s=self.settings.schedules.run_history,
        )
        result["pruned"] = True
        result["buckets_pruned"] = done["buckets"]
        result["events_pruned"] = done["events"]
        result["failures_pruned"] = done["failures"]
        result["schedule_runs_pruned"] = done["schedule_runs"]
        result["prune_batches"] = done["batches"]

    def _reclaim_orphans(self, result: dict[str, Any]) -> None:
        """The plan_items of freezes whose process died (docs/notebooks.md, "No orphan rows")."""
        result["orphans_reclaimed"] = sum(r["items"] for r in self.store.reclaim_orphans())

    def _prune_workers(self, result: dict[str, Any]) -> None:
        result["workers_pruned"] = self.store.prune_workers(self.settings.retention.workers)
