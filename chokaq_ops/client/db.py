"""DbClient: the toolkit straight on the database, through the Store (the API's SQL and audit rows)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pandas as pd

from chokaq_ops import errors
from chokaq_ops.alert_catalog import AlertCatalog
from chokaq_ops.analysis import frames
from chokaq_ops.analysis.plans import interactive, progress_bar
from chokaq_ops.client.base import (
    QUEUE_COLUMNS,
    BaseClient,
    audit_frame,
    ids_or_conflict,
    parsed_details,
    records_frame,
)
from chokaq_ops.filters import archive_filter, dlq_filter, hot_filter, parse_time
from chokaq_ops.models import Actor, DlqFilter, FailureFilter, HotFilter, NewJob
from chokaq_ops.records import AuditEntry, JobRecord, ScheduleRecord
from chokaq_ops.schedules import with_next_runs
from chokaq_ops.settings import Settings
from chokaq_ops.storage import Store
from chokaq_ops.storage.admin_ops import UNSET

ACTOR_ENV = "CHOKAQ_ACTOR"
SCHEDULE_PAGE = 1000
# An alert in force as GET /alerts shows it: the store's row also holds its internal key.
ALERT_FIELDS = ("rule", "status", "labels", "annotations", "value", "active_at", "firing_at", "resolved_at")


def alert_view(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: row.get(k) for k in ALERT_FIELDS}
    if out["value"] is not None:
        out["value"] = float(out["value"])  # SQLite gives an integral REAL back as an int
    return out


class DbClient(BaseClient):
    """Reads and changes jobs directly in the database.

    Reads need nothing else. Changes are audited like the API's: they need an actor name, given as
    ``connect(url, actor="alice")`` or in the CHOKAQ_ACTOR environment variable. A client opened on a URL
    closes its store with `close()`; one given a Store closes it only with ``close_store=True``."""

    def __init__(
        self,
        target: str | Store,
        *,
        actor: str | None = None,
        settings: Settings | None = None,
        close_store: bool = False,
    ) -> None:
        if isinstance(target, Store):
            self.store, self._owns = target, close_store
        else:
            base = settings or Settings()
            self.store, self._owns = Store.from_settings(base, url=target), True
        self.settings = settings or Settings()
        self._actor_name = actor or os.environ.get(ACTOR_ENV) or None

    # ------------------------------------------------------------------ plumbing

    def __repr__(self) -> str:
        return f"DbClient({self.store.dialect.redacted_url()}, actor={self._actor_name!r})"

    def close(self) -> None:
        if self._owns:
            self.store.close()

    def __enter__(self) -> DbClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def actor(self) -> str | None:
        return self._actor_name

    def _who(self, plan_id: str | None = None) -> Actor:
        if not self._actor_name:
            raise errors.ValidationError(
                "changes made directly on the database are audited under an actor name: "
                "connect(url, actor='your-name') or set CHOKAQ_ACTOR",
                field="actor",
            )
        return Actor(self._actor_name, plan_id)

    def _progress(self, show: bool | None, total: int | None, desc: str) -> Any:
        if not (interactive() if show is None else show):
            return None, None
        bar = progress_bar(total or 0, 0, desc, delay=1.0)  # quick loads and changes show no bar

        def update(done: int) -> None:
            bar.update(done - bar.n)

        return bar, update

    # ------------------------------------------------------------------ frames

    def load_dlq(
        self,
        filters: DlqFilter | None = None,
        *,
        heavy: bool = True,
        limit: int | None = None,
        chunk_size: int = frames.DEFAULT_CHUNK,
        progress: bool | None = None,
        **kw: Any,
    ) -> pd.DataFrame:
        """Dead jobs as a DataFrame, oldest failure first.

        Parameters
        ----------
        filters : DlqFilter, optional
            Or keyword filters: ``queue``, ``type``, ``reason`` (name or number), ``fingerprint``,
            ``search`` (substring of id, type, tags or error details), ``tag``, ``failed_from``,
            ``failed_to``, ``created_from``, ``created_to`` (datetime, ISO text, or a timedelta meaning
            "that long ago"). All are applied in SQL.
        heavy : bool
            Include ``payload`` and ``error_details`` (most of the memory); False leaves them out.
        limit : int, optional
            At most this many rows (the oldest matching).
        chunk_size : int
            Rows per keyset page (default 50,000).
        progress : bool, optional
            A row counter while loading (default: on a terminal or in a notebook).

        Returns
        -------
        DataFrame
            The job columns of `chokaq_ops.analysis.columns` (without payload and error_details when
            ``heavy=False``): id, queue, type, payload, tags, priority, status, attempt_count, worker_id,
            idempotency_key, heartbeat_at, scheduled_at, created_at, started_at, finished_at, failed_at,
            duration_ms, created_by, last_modified_by, failure_reason, error_details, fingerprint, location.
            Times are datetime64[us, UTC]; queue, type, failure_reason (all 11 reasons), status and
            location are categorical.
        """
        flt = dlq_filter(filters, **kw)
        params = frames.dlq_params(self.store, flt)
        if params["failed_to"] is None:
            # Freeze the end: jobs that die while a big load runs do not stretch it out.
            params["failed_to"] = self._frozen_end()
        return self._load("dlq", params, heavy=heavy, limit=limit, chunk_size=chunk_size, progress=progress)

    def _frozen_end(self) -> Any:
        """Now on the database clock, as the exclusive end of a half-open window: one millisecond (the
        coarsest clock, SQLite's) past it, so a job that failed in this very millisecond is in."""
        return self.store.now() + timedelta(milliseconds=1)

    def iter_dlq(
        self,
        filters: DlqFilter | None = None,
        *,
        heavy: bool = True,
        chunk_size: int = frames.DEFAULT_CHUNK,
        **kw: Any,
    ) -> Iterator[pd.DataFrame]:
        """`load_dlq` one page at a time (frames of at most `chunk_size` rows, same columns): for DLQs
        too big to hold at once."""
        params = frames.dlq_params(self.store, dlq_filter(filters, **kw))
        if params["failed_to"] is None:
            params["failed_to"] = self._frozen_end()
        return frames.iter_job_pages(self.store, "dlq", params, heavy=heavy, chunk_size=chunk_size)

    def load_archive(
        self,
        *,
        heavy: bool = True,
        limit: int | None = None,
        chunk_size: int = frames.DEFAULT_CHUNK,
        progress: bool | None = None,
        **filters: Any,
    ) -> pd.DataFrame:
        """Succeeded jobs as a DataFrame, oldest finish first; filters ``queue``, ``type``, ``search``,
        ``tag``, ``finished_from``, ``finished_to``, ``created_from``, ``created_to``. Columns as
        `load_dlq` (``heavy`` adds payload; error_details is absent), status ``succeeded``."""
        params = frames.archive_params(archive_filter(filters))
        return self._load(
            "archive", params, heavy=heavy, limit=limit, chunk_size=chunk_size, progress=progress
        )

    def load_hot(
        self,
        filters: HotFilter | None = None,
        *,
        heavy: bool = True,
        limit: int | None = None,
        chunk_size: int = frames.DEFAULT_CHUNK,
        progress: bool | None = None,
        **kw: Any,
    ) -> pd.DataFrame:
        """A snapshot of hot jobs (pending, fetched, processing), oldest first; filters ``status``,
        ``queue``, ``type``, ``tag``, ``search``. Columns as `load_dlq`; error_details holds the error of
        the last failed attempt of a job waiting for its retry."""
        params = frames.hot_params(hot_filter(filters, **kw))
        return self._load("hot", params, heavy=heavy, limit=limit, chunk_size=chunk_size, progress=progress)

    def _load(
        self, location: str, params: dict[str, Any], *, progress: bool | None, **kw: Any
    ) -> pd.DataFrame:
        bar, update = self._progress(progress, None, f"loading {location}")
        try:
            return frames.load_job_frame(self.store, location, params, on_rows=update, **kw)
        finally:
            if bar is not None:
                bar.close()

    # ------------------------------------------------------------------ jobs

    def get_job(self, job_id: str) -> JobRecord:
        """Any job by id, wherever it lives (`location` says where), with contract field names."""
        return self.store.get_job(job_id)

    def preview(
        self,
        ids: Sequence[str] | None = None,
        *,
        sample: int = 10,
        max_jobs: int | None = None,
        renew: bool | None = None,
        **filters: Any,
    ) -> dict[str, Any]:
        """What a bulk resurrect or purge would touch, changing nothing: matched, sample_ids, by_reason,
        by_queue, by_type (of at most `max_jobs`: the first ids, the newest failures of a filter). With
        `renew` (a resurrect's): also renew, past_lifetime and warnings (renew=False: how many jobs are
        older than Retry.MaxJobAge and would die on their first failure)."""
        age = self.settings.retry.max_job_age
        if ids is not None:
            return self.store.preview_dlq(
                ids=list(ids), sample=sample, max_jobs=max_jobs, renew=renew, max_job_age=age
            )
        return self.store.preview_dlq(
            flt=dlq_filter(**filters), sample=sample, max_jobs=max_jobs, renew=renew, max_job_age=age
        )

    def dlq_page(
        self,
        *,
        sort: str = "failed_at",
        descending: bool = True,
        page: int = 1,
        page_size: int = 50,
        **filters: Any,
    ) -> tuple[list[JobRecord], int]:
        """One page of dead jobs as records (newest failure first by default) and how many match."""
        got = self.store.list_dlq(
            dlq_filter(**filters), sort=sort, descending=descending, page=page, page_size=page_size
        )
        return list(got.items), got.total

    def audit_rows(
        self,
        *,
        actor: str | None = None,
        action: str | None = None,
        job_id: str | None = None,
        plan_id: str | None = None,
        since: Any = None,
        limit: int = 100,
    ) -> tuple[list[dict[str, Any]], int]:
        """The newest audit rows (at most `limit`, 1000) as dicts, `details` parsed, and how many match."""
        got = self.store.list_audit(
            actor=actor,
            action=action,
            job_id=job_id,
            plan_id=plan_id,
            since=parse_time(since, "since"),
            page_size=limit,
        )
        return [parsed_details(r.to_dict()) for r in got.items], got.total

    def summary(self, *, top: int = 10, **filters: Any) -> dict[str, Any]:
        """Counts by reason, queue and type (with first/last failure) and the top error groups. Times are
        timezone-aware UTC datetimes, as from HttpClient."""
        return self.store.dlq_summary(dlq_filter(**filters), top=top)

    def resurrect(
        self,
        ids: Sequence[str] | None = None,
        *,
        edits: dict[str, dict[str, Any]] | None = None,
        max_jobs: int | None = None,
        progress: bool | None = None,
        renew: bool = True,
        label: str | None = None,
        safe_only: bool = False,
        **filters: Any,
    ) -> dict[str, Any]:
        """Move dead jobs back to the queue by ids or filter, 1000 per transaction, now (no plan). Returns
        {resurrected, batches}. For a reviewed, resumable change use `plan_resurrect`.

        `renew` (default) gives each job its retry budget afresh: attempts and the lifetime clock
        (Retry.MaxJobAge) restart now; `renew=False` keeps the clock at its creation. `safe_only`: only
        job types a worker declared idempotent. With a `label`, the run is a plan bound to it, exactly as
        `chokaq dlq resurrect --label` runs: a re-run resumes it; run options (`rate`, `canary`, `watch`,
        `max_failure_rate`, `spread`, `new`, `wait`, `chunk_size`) go with it; returns the final event."""
        first, filters = self._resurrect_first(
            ids,
            filters,
            label=label,
            edits=edits,
            max_jobs=max_jobs,
            progress=progress,
            renew=renew,
            safe_only=safe_only,
        )
        if first is not None:
            return first
        flt = None if ids is not None else dlq_filter(**filters)
        bar, update = self._progress(progress, len(ids) if ids is not None else None, "resurrect")
        try:
            result = self.store.resurrect_many(
                actor=self._who(),
                ids=list(ids) if ids is not None else None,
                flt=flt,
                max_jobs=max_jobs,
                edits=edits,
                progress=update,
                renew=renew,
            )
        finally:
            if bar is not None:
                bar.close()
        return {"resurrected": result.count, "batches": result.batches}

    def purge(
        self,
        ids: Sequence[str] | None = None,
        *,
        max_jobs: int | None = None,
        progress: bool | None = None,
        label: str | None = None,
        **filters: Any,
    ) -> dict[str, Any]:
        """Delete dead jobs for good by ids or filter, in batches. Returns {purged, batches}. With a
        `label`: a labelled plan run, as `resurrect(..., label=)`."""
        if label is not None:
            return self._labelled_run(
                "purge", ids, filters, label=label, max_jobs=max_jobs, progress=progress
            )
        flt = None if ids is not None else dlq_filter(**filters)
        bar, update = self._progress(progress, len(ids) if ids is not None else None, "purge")
        try:
            result = self.store.purge_dlq(
                actor=self._who(),
                ids=list(ids) if ids is not None else None,
                flt=flt,
                max_jobs=max_jobs,
                progress=update,
            )
        finally:
            if bar is not None:
                bar.close()
        return {"purged": result.count, "batches": result.batches}

    def purge_archive(self, older_than: Any, *, progress: bool | None = None) -> dict[str, Any]:
        """Delete succeeded jobs finished before `older_than` (a time, or a timedelta meaning that long ago).
        Returns {purged, batches, cutoff}."""
        cutoff = parse_time(older_than, "older_than")
        assert cutoff is not None
        if cutoff > self.store.now():  # as the API: a cutoff in the future is a typo, not a wish
            raise errors.ValidationError("older_than is in the future", field="older_than")
        bar, update = self._progress(progress, None, "purge archive")
        try:
            result = self.store.purge_archive(cutoff, actor=self._who(), progress=update)
        finally:
            if bar is not None:
                bar.close()
        return {"purged": result.count, "batches": result.batches, "cutoff": cutoff}

    def cancel(self, ids: Sequence[str]) -> dict[str, list[str]]:
        """Pending or fetched jobs -> DLQ as Cancelled. Returns {cancelled: [...], skipped: [...]}."""
        cancelled, skipped = self.store.cancel_many(list(ids), actor=self._who())
        return {"cancelled": cancelled, "skipped": skipped}

    def edit(
        self, job_id: str, *, payload: Any = None, tags: Any = None, priority: int | None = None
    ) -> JobRecord:
        """Edit a dead job (payload, tags) or a pending hot job (payload, tags, priority); audited with the
        before/after payload."""
        job = self.store.get_job(job_id)
        if job["location"] == "dlq":
            if priority is not None:
                raise errors.ValidationError(
                    "a dead job's priority is set when it is resurrected", field="priority"
                )
            return self.store.edit_dlq(job_id, actor=self._who(), payload=payload, tags=tags)
        return self.store.edit_pending(
            job_id, actor=self._who(), payload=payload, tags=tags, priority=priority
        )

    # ------------------------------------------------------------------ producing

    def _enqueue(self, jobs: list[NewJob], connection: Any) -> list[str]:
        # A producer's enqueue is the application's own write, like a worker's, not an operator's change:
        # it needs no actor and writes no audit row; the actor, when given, is the jobs' created_by.
        jobs = [replace(j, created_by=j.created_by or self._actor_name) for j in jobs]
        if connection is None:
            results = self.store.enqueue(jobs)
        else:
            results = self.store.enqueue_on(connection, jobs)
        return ids_or_conflict(results)

    # ------------------------------------------------------------------ queues, stats, audit

    def queues(self) -> pd.DataFrame:
        """Every queue: name, paused, active, zombie_timeout_seconds, max_workers, pending, fetched,
        processing, due_pending, max_lag_seconds, avg_lag_seconds, the four totals and updated_at (UTC)."""
        rows = self.store.queue_stats()
        return records_frame(rows, QUEUE_COLUMNS, ("updated_at",))

    def queue(self, name: str) -> dict[str, Any]:
        return self.store.queue_stats(name)[0]

    def pause(self, name: str) -> dict[str, Any]:
        return self.store.set_queue(name, actor=self._who(), paused=True)

    def resume(self, name: str) -> dict[str, Any]:
        return self.store.set_queue(name, actor=self._who(), paused=False)

    def set_worker_concurrency(self, worker_id: str, concurrency: int) -> dict[str, Any]:
        """A running worker's handler slots, applied at its next heartbeat (lowering cancels nothing)."""
        return self.store.set_worker_concurrency(worker_id, concurrency, actor=self._who())

    def set_circuit(self, type_key: str, state: str) -> dict[str, Any]:
        """Force a job type's circuit "open" (until closed) or "closed" (its failure count cleared)."""
        return self.store.set_circuit(type_key, state, actor=self._who())

    def set_queue(
        self,
        name: str,
        *,
        paused: bool = UNSET,
        active: bool = UNSET,
        zombie_timeout_seconds: int | None = UNSET,
        max_workers: int | None = UNSET,
    ) -> dict[str, Any]:
        """Change a queue's control row; None clears an override (zombie timeout, max workers)."""
        return self.store.set_queue(
            name,
            actor=self._who(),
            paused=paused,
            active=active,
            zombie_timeout_seconds=zombie_timeout_seconds,
            max_workers=max_workers,
            min_zombie_timeout=self.settings.min_zombie_timeout(),
        )

    def stats(self) -> dict[str, Any]:
        """Totals, per-status counts, throughput and failure rate over 1 and 5 minutes."""
        return self.store.stats()

    def audit(
        self,
        *,
        actor: str | None = None,
        action: str | None = None,
        job_id: str | None = None,
        plan_id: str | None = None,
        since: Any = None,
        limit: int = 100_000,
    ) -> pd.DataFrame:
        """Audit rows, newest first. Columns: id (int64), at (UTC), actor, action, job_id, plan_id, count
        (int64), details (parsed JSON)."""
        rows: list[AuditEntry] = []
        page = 1
        while len(rows) < limit:
            size = min(1000, limit - len(rows))
            got = self.store.list_audit(
                actor=actor,
                action=action,
                job_id=job_id,
                plan_id=plan_id,
                since=parse_time(since, "since"),
                page=page,
                page_size=size,
            )
            rows.extend(got.items)
            if len(got.items) < size:
                break
            page += 1
        return audit_frame(rows)

    # ------------------------------------------------------------------ schedules (docs/schedules.md)

    def schedule_rows(
        self, *, type: str | None = None, paused: bool | None = None, source: str | None = None
    ) -> list[dict[str, Any]]:
        """Every schedule by name, as GET /schedules shows it (with `next_runs`, its next five ticks);
        filters by job type, paused, source (api or code)."""
        found: list[ScheduleRecord] = []
        page = 1
        while True:
            got = self.store.list_schedules(
                type=type, paused=paused, source=source, page=page, page_size=SCHEDULE_PAGE
            )
            found += got.items
            if len(found) >= got.total or not got.items:
                return [with_next_runs(s) for s in found]
            page += 1

    def schedule(self, name: str) -> dict[str, Any]:
        """One schedule with its `next_runs`."""
        return with_next_runs(self.store.get_schedule(name))

    def schedule_run_rows(self, name: str, *, limit: int = 100) -> tuple[list[dict[str, Any]], int]:
        """A schedule's newest runs (at most `limit`, 1000), each job and where it is now, and how many
        there are."""
        got = self.store.schedule_runs(name, page_size=limit)
        return [dict(r) for r in got.items], got.total

    def create_schedule(self, name: str, type: str, cron: str, **fields: Any) -> dict[str, Any]:
        """Create a schedule (audited); `fields` as POST /schedules: tz, payload (JSON text or a value),
        queue, priority, tags, misfire, catch_up_max, misfire_grace_seconds, paused."""
        definition = {"name": name, "type": type, "cron": cron, **fields}
        return with_next_runs(self.store.create_schedule(definition, actor=self._who()))

    def pause_schedule(self, name: str) -> dict[str, Any]:
        return with_next_runs(self.store.pause_schedule(name, actor=self._who()))

    def resume_schedule(self, name: str) -> dict[str, Any]:
        return with_next_runs(self.store.resume_schedule(name, actor=self._who()))

    def trigger_schedule(self, name: str) -> dict[str, Any]:
        """Enqueue the schedule's job now, outside its ticks: the run (its `job_id`)."""
        return dict(self.store.trigger_schedule(name, actor=self._who()))

    def delete_schedule(self, name: str) -> None:
        self.store.delete_schedule(name, actor=self._who())

    # ------------------------------------------------------------------ alerts (docs/alerts.md)

    def _alerts(self) -> AlertCatalog:
        return AlertCatalog(self.settings, self.store)

    def alert_rows(self) -> list[dict[str, Any]]:
        """The alerts in force (pending, firing, resolved and not yet told), as GET /alerts shows them."""
        return [alert_view(a) for a in self.store.alert_states()]

    def alert_receiver_rows(self) -> list[dict[str, Any]]:
        """Every receiver (the configuration file's with source config): no URL path, no secret."""
        return [r.view() for r in self._alerts().receivers()]

    def alert_rule_rows(self) -> list[dict[str, Any]]:
        return [r.view() for r in self._alerts().rules()]

    def create_alert_receiver(self, name: str, **fields: Any) -> dict[str, Any]:
        """`fields` as POST /alerts/receivers: url, kind, secret, send_resolved, timeout_s, max_alerts."""
        return self._alerts().create_receiver({"name": name, **fields}, actor=self._who()).view()

    def update_alert_receiver(self, name: str, **changes: Any) -> dict[str, Any]:
        return self._alerts().update_receiver(name, changes, actor=self._who()).view()

    def delete_alert_receiver(self, name: str) -> None:
        self._alerts().delete_receiver(name, actor=self._who())

    def create_alert_rule(self, name: str, **fields: Any) -> dict[str, Any]:
        """`fields` as POST /alerts/rules: kind, receivers, severity, threshold, window_s, for_s, ..."""
        return self._alerts().create_rule({"name": name, **fields}, actor=self._who()).view()

    def update_alert_rule(self, name: str, **changes: Any) -> dict[str, Any]:
        return self._alerts().update_rule(name, changes, actor=self._who()).view()

    def delete_alert_rule(self, name: str) -> None:
        self._alerts().delete_rule(name, actor=self._who())

    def send_alert_test(self, receiver: str) -> str:
        """Enqueue one test notification to `receiver` (audited): the delivery job's id."""
        return self._alerts().test(receiver, actor=self._who())

    def _locate(self, ids: list[str]) -> list[dict[str, Any]]:
        return self.store.locate(ids)

    def _failure_rows(self, flt: FailureFilter, limit: int, after: int | None) -> list[dict[str, Any]]:
        return self.store.failure_history(flt, limit=limit, after_seq=after)

    # ------------------------------------------------------------------ plans

    def _plan_create(
        self,
        action: str,
        *,
        ids: list[str] | None,
        flt: Any,
        edits: dict[str, dict[str, Any]] | None,
        max_jobs: int | None,
        chunk_size: int,
    ) -> dict[str, Any]:
        return self.store.create_plan(
            action, actor=self._who(), ids=ids, flt=flt, edits=edits, max_jobs=max_jobs, chunk_size=chunk_size
        )

    def _plan_get(self, plan_id: str) -> dict[str, Any]:
        return self.store.get_plan(plan_id)

    def _plan_chunk(
        self, plan_id: str, spread: float = 0.0, holder: str | None = None
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        return self.store.execute_plan_chunk(plan_id, actor=self._who(plan_id), spread=spread, holder=holder)

    def _plan_open(
        self,
        action: str,
        *,
        ids: list[str] | None,
        flt: Any,
        edits: dict[str, dict[str, Any]] | None,
        max_jobs: int | None,
        chunk_size: int,
        label: str | None,
        spec: dict[str, str] | None,
        new: bool,
        renew: bool,
        rate: float | None,
    ) -> tuple[dict[str, Any], bool]:
        create = {"ids": ids, "flt": flt, "edits": edits, "max_jobs": max_jobs, "chunk_size": chunk_size}
        create |= {"renew": renew, "rate": rate}
        return self.store.open_plan(action, actor=self._who(), label=label, spec=spec, new=new, **create)

    def _plan_lease(self, plan_id: str, holder: str, ttl: float, take_from: str | None) -> dict[str, Any]:
        return self.store.lease_plan(
            plan_id, holder=holder, actor=self._who(plan_id), ttl=ttl, take_from=take_from
        )

    def _plan_release(self, plan_id: str, holder: str) -> None:
        self.store.release_plan(plan_id, holder=holder, actor=self._who(plan_id))

    def _plan_pace(self, plan_id: str, rate: float | None) -> dict[str, Any]:
        return self.store.pace_plan(plan_id, rate, actor=self._who(plan_id))

    def _plan_note(self, plan_id: str, event: str, details: dict[str, Any]) -> None:
        self.store.note_plan(plan_id, event, actor=self._who(plan_id), details=details)

    def _plan_orphans(self) -> list[dict[str, Any]]:
        return self.store.list_orphans()

    def _job_types(self) -> list[dict[str, Any]]:
        return self.store.job_types()

    def _plan_items(self, plan_id: str) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        page = 1
        while True:
            got = self.store.plan_items(plan_id, page=page, page_size=50_000)
            rows.extend(got)
            if len(got) < 50_000:
                return rows
            page += 1

    def _plan_approve(self, plan_id: str) -> dict[str, Any]:
        return self.store.approve_plan(plan_id, actor=self._who(plan_id))

    def _plan_discard(self, plan_id: str) -> dict[str, Any]:
        return self.store.discard_plan(plan_id, actor=self._who(plan_id))

    def _plan_outcomes(self, plan_id: str, from_chunk: int | None, to_chunk: int | None) -> dict[str, Any]:
        return self.store.plan_outcomes(plan_id, from_chunk=from_chunk, to_chunk=to_chunk)

    def _plan_list(
        self, *, state: str | None, action: str | None, limit: int, label: str | None = None
    ) -> list[dict[str, Any]]:
        rows, _ = self.store.list_plans(state=state, action=action, label=label, page_size=min(limit, 1000))
        return rows
