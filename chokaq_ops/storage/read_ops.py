"""Reads for operators, the API and the analysis toolkit: filtered, sorted, paged."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from chokaq_ops import errors, validation
from chokaq_ops.fingerprint import fingerprint_text
from chokaq_ops.models import ArchiveFilter, DlqFilter, FailureReason, HotFilter, Page, Status
from chokaq_ops.records import ArchivedJob, AuditEntry, DeadJob, HotJob, JobRecord, job_record
from chokaq_ops.storage.database import Database, Tx
from chokaq_ops.storage.filters import dlq_filter_params
from chokaq_ops.storage.inputs import paging as _paging
from chokaq_ops.storage.lanes import Peek

HOT_SORTS = ("created_at", "priority", "due_at", "id", "queue", "type", "status")
ARCHIVE_SORTS = ("finished_at", "created_at", "duration_ms", "queue", "type", "attempt_count", "id")
DLQ_SORTS = ("failed_at", "created_at", "queue", "type", "reason", "attempt_count", "id")
TOP_ERROR_SAMPLE = 5000
J = TypeVar("J", bound=JobRecord)
DEEP_PAGE_OFFSET = 2000  # below this, OFFSET over the index is as cheap as locating the hour first


def _sort(name: str, sort: str, descending: bool, allowed: Sequence[str]) -> str:
    if sort not in allowed:
        raise errors.ValidationError(f"sort must be one of {', '.join(allowed)}", field="sort")
    return f"{name}@{sort}:{'desc' if descending else 'asc'}"


def _counted(params: dict[str, Any]) -> bool:
    """True when a DLQ filter sets nothing but queue and reason: dlq_counts answers it exactly."""
    return all(v is None for k, v in params.items() if k not in ("queue", "reason"))


def budget_warning(n: int, matched: int, max_job_age: float) -> str:
    """The preview's warning about a resurrect that keeps old retry budgets (renew=False)."""
    return (
        f"{n:,} of {matched:,} job(s) were created more than Retry.MaxJobAge ({max_job_age:g}s) ago: "
        "resurrected without renewing their retry budget (renew=False, --keep-budget), each dies as "
        "RetryLifetimeExpired on its first failure, without a retry. Renew the budget (the default) to "
        "give them their attempts and lifetime afresh."
    )


class ReadOps:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.peek = Peek()  # PostgreSQL: this process's positions for reading queue lag

    def get_job(self, job_id: str) -> JobRecord:
        """Any job by id, wherever it lives; `location` says where (hot, archive, dlq)."""
        job_id = validation.job_id(job_id)
        # Most jobs asked for are hot (an enqueue's reply reads its job back): one statement, one round
        # trip, consistent on its own.
        hot = self.db.run("get_hot", write=False, id=job_id)
        if hot:
            return job_record(hot[0])

        # Not in hot a moment ago. One snapshot for the three reads: a job moving between tables (a
        # resurrect, a worker's finish) while they run is found in one of them, never missed by all three.
        def read(tx: Tx) -> dict[str, Any] | None:
            if self.db.dialect.snapshot_per_statement:
                tx.run("read_snapshot")
            for name in ("get_hot", "get_dlq", "get_archive"):
                rows = tx.run(name, id=job_id)
                if rows:
                    return rows[0]
            return None

        row = self.db.transaction(read, write=False)
        if row is None:
            raise errors.JobNotFound(f"no job with id {job_id}")
        return job_record(row)

    def _page(
        self,
        kind: type[J],
        name: str,
        count: str,
        params: dict[str, Any],
        page: int,
        page_size: int,
        *,
        total: int | None = None,
    ) -> Page[J]:
        paging = _paging(page, page_size)
        if total is None:
            total = int(self.db.run(count, write=False, **params)[0]["n"])
        else:
            # A count known apart from the rows (the hot counters): the page asks for no more rows than
            # there are, so its scan stops at the last one instead of walking the rest of the index,
            # which holds an entry of every job finished since the oldest snapshot (docs/endurance.md).
            paging["limit"] = max(0, min(paging["limit"], total - paging["offset"]))
        items = [] if paging["offset"] >= total else self.db.run(name, write=False, **params, **paging)
        return Page(items=[kind.from_stored(r) for r in items], total=total, page=page, page_size=page_size)

    def _hot_total(self, status: Any, queue: Any) -> int:
        """Hot jobs of a status and/or queue from the counters: exact, and never a count of jobs_hot,
        whose ranges hold the dead versions of finished work while a snapshot is held."""
        return sum(
            int(r["n"])
            for r in self.db.run("hot_status_counts", write=False)
            if (status is None or int(r["status"]) == status) and (queue is None or r["queue"] == queue)
        )

    def list_hot(
        self,
        flt: HotFilter | None = None,
        *,
        sort: str = "created_at",
        descending: bool = True,
        page: int = 1,
        page_size: int = 100,
    ) -> Page[HotJob]:
        flt = flt or HotFilter()
        params = {
            "status": int(flt.status) if flt.status is not None else None,
            "queue": validation.text(flt.queue, "queue", max_len=validation.MAX_QUEUE, required=False),
            "type": validation.text(flt.type, "type", max_len=validation.MAX_TYPE, required=False),
            "tag_like": validation.tag_pattern(flt.tag),
            "search_like": validation.like_pattern(flt.search),
        }
        counted = all(params[k] is None for k in ("type", "tag_like", "search_like"))
        status, queue = params["status"], params["queue"]
        return self._page(
            HotJob,
            _sort("list_hot", sort, descending, HOT_SORTS),
            "count_hot",
            params,
            page,
            page_size,
            total=self._hot_total(status, queue) if counted else None,
        )

    def list_archive(
        self,
        flt: ArchiveFilter | None = None,
        *,
        sort: str = "finished_at",
        descending: bool = True,
        page: int = 1,
        page_size: int = 100,
    ) -> Page[ArchivedJob]:
        flt = flt or ArchiveFilter()
        params = {
            "queue": validation.text(flt.queue, "queue", max_len=validation.MAX_QUEUE, required=False),
            "type": validation.text(flt.type, "type", max_len=validation.MAX_TYPE, required=False),
            "finished_from": flt.finished_from,
            "finished_to": flt.finished_to,
            "created_from": flt.created_from,
            "created_to": flt.created_to,
            "tag_like": validation.tag_pattern(flt.tag),
            "search_like": validation.like_pattern(flt.search),
        }
        return self._page(
            ArchivedJob,
            _sort("list_archive", sort, descending, ARCHIVE_SORTS),
            "count_archive",
            params,
            page,
            page_size,
        )

    def list_dlq(
        self,
        flt: DlqFilter | None = None,
        *,
        sort: str = "failed_at",
        descending: bool = True,
        page: int = 1,
        page_size: int = 100,
    ) -> Page[DeadJob]:
        params = dlq_filter_params(flt)
        name = _sort("list_dlq", sort, descending, DLQ_SORTS)
        if not _counted(params):
            return self._page(DeadJob, name, "count_dlq", params, page, page_size)
        # Filters the trigger-kept dlq_counts cover: an exact total without counting, and a deep page of
        # the failed_at order starts at the hour that holds its first row instead of OFFSET-scanning the
        # newer (or older) rows before it: O(page + one hour of rows) instead of O(position).
        paging = _paging(page, page_size)
        total = self._dlq_count_fast(params)
        if paging["offset"] >= total:
            return Page(items=[], total=total, page=page, page_size=page_size)
        if sort == "failed_at" and paging["offset"] > DEEP_PAGE_OFFSET:
            self._seek_hour(params, paging, descending)
        items = self.db.run(name, write=False, **params, **paging)
        return Page(
            items=[DeadJob.from_stored(r) for r in items], total=total, page=page, page_size=page_size
        )

    def _seek_hour(self, params: dict[str, Any], paging: dict[str, int], descending: bool) -> None:
        """Narrow a deep failed_at page to start in the hour holding its first row (params, paging edited)."""
        rows = self.db.run(
            f"dlq_locate@hour:{'desc' if descending else 'asc'}",
            write=False,
            queue=params["queue"],
            reason=params["reason"],
            offset=paging["offset"],
        )
        if not rows:
            return  # the list changed under us; plain OFFSET is still right
        hour = rows[0]["hour_at"]
        if descending:
            params["failed_to"] = hour + timedelta(hours=1)  # half-open: the hour's end is excluded
        else:
            params["failed_from"] = hour
        paging["offset"] = int(rows[0]["skip"])

    def _dlq_count_fast(self, params: dict[str, Any]) -> int:
        rows = self.db.run("dlq_count_fast", write=False, queue=params["queue"], reason=params["reason"])
        return int(rows[0]["n"])

    def count_dlq(self, flt: DlqFilter | None = None) -> int:
        params = dlq_filter_params(flt)
        if _counted(params):
            return self._dlq_count_fast(params)
        return int(self.db.run("count_dlq", write=False, **params)[0]["n"])

    def dlq_ids(self, flt: DlqFilter | None = None, *, limit: int = 10_000_000) -> list[str]:
        """Every id matching a filter, newest failure first: the frozen set behind a bulk plan."""
        return [r["id"] for r in self.db.run("dlq_ids", write=False, limit=limit, **dlq_filter_params(flt))]

    def preview_dlq(
        self,
        *,
        flt: DlqFilter | None = None,
        ids: Sequence[str] | None = None,
        sample: int = 10,
        max_jobs: int | None = None,
        renew: bool | None = None,
        max_job_age: float | None = None,
    ) -> dict[str, Any]:
        """What a bulk operation would touch: matched, sample_ids, by_reason/queue/type. Changes nothing.

        `max_jobs` caps it as the operation would (the first ids given; the newest failures of a filter):
        `matched` and every breakdown count exactly those jobs. For a resurrect, `renew` says whether it
        renews the jobs' retry budget: when it does not and `max_job_age` (Retry.MaxJobAge, seconds) is
        set, `past_lifetime` counts the jobs older than that, whose first failure after the resurrect
        would not be retried, and `warnings` says so."""
        if (ids is None) == (flt is None):
            raise errors.ValidationError("give either ids or a filter", field="ids")
        if max_jobs is not None and (
            isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or max_jobs < 1
        ):
            raise errors.ValidationError("max_jobs must be 1 or more", field="max_jobs")
        if ids is not None:
            wanted = validation.ids(ids, max_count=10**6)
            existing_set = {r["id"] for r in self.db.run("dlq_existing_ids", write=False, ids=wanted)}
            chosen = [i for i in dict.fromkeys(wanted) if i in existing_set][: max_jobs or None]
            rows = self.db.run("dlq_breakdown_ids", write=False, ids=chosen)
            matched, sample_ids = len(chosen), chosen[:sample]
            params = dlq_filter_params(DlqFilter(ids=tuple(chosen) or ("",)))
        else:
            params = dlq_filter_params(flt)
            if max_jobs is None:
                rows = self.db.run("dlq_breakdown", write=False, **params)
            else:
                rows = self.db.run("dlq_breakdown_capped", write=False, limit=max_jobs, **params)
            matched = sum(int(r["n"]) for r in rows if r["dimension"] == "reason")
            sample_ids = (
                [r["id"] for r in self.db.run("dlq_ids", write=False, limit=min(sample, matched), **params)]
                if matched
                else []
            )
        out: dict[str, Any] = {
            "matched": matched,
            "sample_ids": sample_ids,
            "by_reason": {},
            "by_queue": {},
            "by_type": {},
        }
        for r in rows:
            key = FailureReason(int(r["value"])).name if r["dimension"] == "reason" else r["value"]
            out[f"by_{r['dimension']}"][key] = int(r["n"])
        if renew is not None:
            out["renew"] = renew
            out["past_lifetime"] = 0
            out["warnings"] = []
            if not renew and max_job_age is not None and matched:
                n = int(
                    self.db.run(
                        "dlq_past_lifetime",
                        write=False,
                        limit=matched,
                        max_age_s=float(max_job_age),
                        **params,
                    )[0]["n"]
                )
                out["past_lifetime"] = n
                if n:
                    out["warnings"].append(budget_warning(n, matched, max_job_age))
        return out

    def top_errors(
        self, flt: DlqFilter | None = None, *, limit: int = 10, sample: int = TOP_ERROR_SAMPLE
    ) -> list[dict[str, Any]]:
        """Error groups (fingerprints) over the newest `sample` dead jobs, largest first, with a label."""
        rows = self.db.run(
            "top_fingerprints", write=False, limit=limit, sample=sample, **dlq_filter_params(flt)
        )
        examples = (
            {
                r["id"]: r["error_details"]
                for r in self.db.run("errors_of", write=False, ids=[r["example_id"] for r in rows])
            }
            if rows
            else {}
        )
        out = []
        for r in rows:
            fp = fingerprint_text(examples.get(r["example_id"]))
            out.append(
                {
                    "fingerprint": r["fingerprint"] or fp.id,
                    "failure_reason": FailureReason(int(r["failure_reason"])).name,
                    "exception_type": fp.exception_type,
                    "template": fp.template,
                    "frame": fp.frame,
                    "count": int(r["n"]),
                    "first_seen": r["first_at"],
                    "last_seen": r["last_at"],
                    "example_id": r["example_id"],
                    "example_queue": r["example_queue"],
                    "example_type": r["example_type"],
                }
            )
        return out

    def dlq_summary(self, flt: DlqFilter | None = None, *, top: int = 10) -> dict[str, Any]:
        """Counts by reason, queue and type with first/last failure, and the top error fingerprints."""
        rows = self.db.run("dlq_breakdown", write=False, **dlq_filter_params(flt))
        out: dict[str, Any] = {"total": 0, "by_reason": [], "by_queue": [], "by_type": []}
        for r in rows:
            value = FailureReason(int(r["value"])).name if r["dimension"] == "reason" else r["value"]
            out[f"by_{r['dimension']}"].append(
                {
                    "value": value,
                    "count": int(r["n"]),
                    "first_failed_at": r["first_at"],
                    "last_failed_at": r["last_at"],
                }
            )
            if r["dimension"] == "reason":
                out["total"] += int(r["n"])
        for key in ("by_reason", "by_queue", "by_type"):
            out[key].sort(key=lambda e: (-e["count"], str(e["value"])))
        out["top_errors"] = self.top_errors(flt, limit=top)
        return out

    # ------------------------------------------------------------------ stats

    def stats(self) -> dict[str, Any]:
        """Totals, per-status counts and throughput / failure rate over 1 and 5 minutes."""
        totals = self.db.run("stats_totals", write=False)[0]
        counts = self.db.run("table_counts", write=False)[0]
        by_status = {s.name: 0 for s in Status}
        for r in self.db.run("hot_status_counts", write=False):
            by_status[Status(int(r["status"])).name] += int(r["n"])
        tp = self.db.run("throughput", write=False)[0]
        p1, f1, p5, f5 = (int(tp[k] or 0) for k in ("processed_1m", "failed_1m", "processed_5m", "failed_5m"))
        return {
            "enqueued_total": int(totals["enqueued_total"]),
            "succeeded_total": int(totals["succeeded_total"]),
            "failed_total": int(totals["failed_total"]),
            "retried_total": int(totals["retried_total"]),
            "last_activity_at": totals["last_activity_at"],
            "pending": by_status["pending"],
            "fetched": by_status["fetched"],
            "processing": by_status["processing"],
            "hot": int(counts["hot"]),
            "archive": int(counts["archive"]),
            "dlq": int(counts["dlq"]),
            "jobs_per_second_1m": p1 / 60,
            "jobs_per_second_5m": p5 / 300,
            "failure_rate_1m": (f1 * 100 / p1) if p1 else 0.0,
            "failure_rate_5m": (f5 * 100 / p5) if p5 else 0.0,
            "processed_1m": p1,
            "failed_1m": f1,
            "processed_5m": p5,
            "failed_5m": f5,
        }

    def queue_stats(self, name: str | None = None, *, worker_gone_s: float = 30.0) -> list[dict[str, Any]]:
        """Per queue: control state, status counts, lag of the oldest due job no live worker runs (pending,
        or fetched by a worker whose registry row is older than `worker_gone_s`), counters."""
        if name is not None:
            name = validation.queue(name, "name")
        rows = self.db.run("queue_rows", write=False, name=name)
        if name is not None and not rows:
            raise errors.JobNotFound(f"no queue named {name}")
        counts: dict[str, dict[str, int]] = {}
        for r in self.db.run("hot_status_counts", write=False):
            counts.setdefault(r["queue"], {})[Status(int(r["status"])).name] = int(r["n"])
        lags = self._lags(worker_gone_s)
        out = []
        for r in rows:
            c, lag = counts.get(r["name"], {}), lags.get(r["name"], {})
            out.append(
                r
                | {
                    "pending": c.get("pending", 0),
                    "fetched": c.get("fetched", 0),
                    "processing": c.get("processing", 0),
                    "due_pending": int(lag.get("due_pending") or 0),
                    "stranded": int(lag.get("stranded") or 0),
                    "max_lag_seconds": max(0.0, float(lag.get("max_lag_s") or 0.0)),
                    "avg_lag_seconds": max(0.0, float(lag.get("avg_lag_s") or 0.0)),
                }
            )
        return out

    def _lags(self, worker_gone_s: float) -> dict[str, dict[str, Any]]:
        """Per queue: due pending jobs and jobs stranded with a gone worker, the oldest's and the average
        wait. PostgreSQL reads the pending side through lanes (storage/lanes.py, Peek) and the stranded
        side only while a worker is gone: neither walks the dead versions a held snapshot keeps."""
        stranded = {r["queue"]: r for r in self.db.run("queue_lag", write=False, gone_s=float(worker_gone_s))}
        if "peek_lanes" not in self.db.queries:
            return stranded  # SQLite: one statement counts both sides
        pending = self.peek.lags(
            lambda **p: self.db.run("peek_lanes", write=False, **p),
            lambda **p: self.db.run("discover_lanes", write=False, **p),
        )
        out: dict[str, dict[str, Any]] = {}
        for name in pending.keys() | stranded.keys():
            p, s = pending.get(name, {}), stranded.get(name, {})
            waiting = int(p.get("due_pending") or 0) + int(s.get("stranded") or 0)
            out[name] = {
                "due_pending": p.get("due_pending", 0),
                "stranded": int(s.get("stranded") or 0),
                "max_lag_s": max(float(p.get("max_lag_s") or 0.0), float(s.get("max_lag_s") or 0.0)),
                "avg_lag_s": (
                    float(p.get("avg_lag_s") or 0.0) * int(p.get("due_pending") or 0)
                    + float(s.get("avg_lag_s") or 0.0) * int(s.get("stranded") or 0)
                )
                / max(1, waiting),
            }
        return out

    def list_workers(
        self, *, recent_s: float = 60.0, fetched_s: float = 600.0, gone_s: float = 30.0
    ) -> list[dict[str, Any]]:
        """Workers holding claimed jobs, from the hot table (the API joins the registry): an idle worker is
        not here. PostgreSQL reads processing rows beaten in the last `recent_s`, fetched rows claimed in
        the last `fetched_s` (Recovery.FetchedJobTimeout), and older processing rows only of workers gone
        for `gone_s` (docs/endurance.md)."""
        return [
            r
            | {
                "fetched": int(r["fetched"] or 0),
                "processing": int(r["processing"] or 0),
                "queues": sorted(filter(None, (r.pop("queues") or "").split(","))),
                "silent_seconds": max(0.0, round(float(r.pop("silent_s") or 0.0), 3)),
            }
            for r in self.db.run(
                "list_workers", write=False, recent_s=recent_s, fetched_s=fetched_s, gone_s=gone_s
            )
        ]

    # ------------------------------------------------------------------ audit and events

    def list_audit(
        self,
        *,
        actor: str | None = None,
        action: str | None = None,
        job_id: str | None = None,
        plan_id: str | None = None,
        since: datetime | None = None,
        page: int = 1,
        page_size: int = 100,
    ) -> Page[AuditEntry]:
        params = {"actor": actor, "action": action, "job_id": job_id, "plan_id": plan_id, "since": since}
        paging = _paging(page, page_size)
        total = int(self.db.run("count_audit", write=False, **params)[0]["n"])
        items = self.db.run("list_audit", write=False, **params, **paging) if paging["offset"] < total else []
        return Page(
            items=[AuditEntry.from_row(r) for r in items], total=total, page=page, page_size=page_size
        )
