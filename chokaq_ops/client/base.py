"""What DbClient and HttpClient share: argument parsing (filters, selections, edits) and plan building."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pandas as pd

from chokaq_ops import errors
from chokaq_ops.analysis import columns
from chokaq_ops.analysis.plans import Plan
from chokaq_ops.client.runs import run_plan
from chokaq_ops.filters import (
    dlq_filter,
    dlq_query,
    failure_filter,
    hot_filter,
    parse_time,
    safe_type_filter,
    selection_spec,
)
from chokaq_ops.models import (
    DEFAULT_PRIORITY,
    DEFAULT_QUEUE,
    DlqFilter,
    FailureFilter,
    HotFilter,
    NewJob,
)

EDIT_FIELDS = ("payload", "tags", "priority")
# What a labelled resurrect / purge passes on to its run (chokaq_ops.client.runs.run_plan).
RUN_OPTIONS = ("new", "rate", "canary", "watch", "max_failure_rate", "spread", "wait", "chunk_size", "poll")
AUDIT_COLUMNS = ["id", "at", "actor", "action", "job_id", "plan_id", "count", "details"]
QUEUE_COLUMNS = [
    "name",
    "paused",
    "active",
    "zombie_timeout_seconds",
    "max_workers",
    "pending",
    "fetched",
    "processing",
    "due_pending",
    "max_lag_seconds",
    "avg_lag_seconds",
    "enqueued_total",
    "succeeded_total",
    "failed_total",
    "retried_total",
    "updated_at",
]


ENQUEUE_FIELDS = ("type", "payload", "queue", "priority", "tags", "delay", "at", "idempotency_key", "id")


def new_job(
    type: str,
    payload: Any = None,
    *,
    queue: str = DEFAULT_QUEUE,
    priority: int = DEFAULT_PRIORITY,
    tags: str | Sequence[str] | None = None,
    delay: float | timedelta | None = None,
    at: Any = None,
    idempotency_key: str | None = None,
    id: str | None = None,
) -> NewJob:
    """A producer's arguments as a NewJob. `payload`: a string is stored exactly as given (JSON text, or
    anything the handler parses itself); any other value is stored as its JSON; None is ``{}``. `tags`: a
    comma-separated string or a list of tags. `delay` (seconds or a timedelta) or `at` (a time, as for
    `parse_time`; a time without a zone is UTC) schedules the job; give one of them."""
    if delay is not None and at is not None:
        raise errors.ValidationError("give delay or at, not both", field="delay")
    if isinstance(delay, timedelta):
        delay = delay.total_seconds()
    if delay is not None and (isinstance(delay, bool) or not isinstance(delay, int | float)):
        raise errors.ValidationError(f"delay must be seconds or a timedelta, got {delay!r}", field="delay")
    if isinstance(at, timedelta):
        raise errors.ValidationError("at is a point in time; use delay= for a timedelta", field="at")
    if not isinstance(tags, str | None):
        tags = ",".join(str(t) for t in tags)
    if payload is None:
        payload = "{}"
    elif not isinstance(payload, str):
        try:
            payload = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise errors.ValidationError(f"payload is not a JSON value: {exc}", field="payload") from None
    return NewJob(
        type=type,
        payload=payload,
        queue=queue,
        priority=priority,
        tags=tags,
        idempotency_key=idempotency_key,
        id=id,
        delay_seconds=None if delay is None else float(delay),
        scheduled_at=parse_time(at, "at"),
    )


def new_jobs(jobs: Iterable[Mapping[str, Any] | NewJob]) -> list[NewJob]:
    """`enqueue_many`'s items: mappings with `enqueue`'s argument names (``type`` required), or NewJobs."""
    out = []
    for n, item in enumerate(jobs):
        if isinstance(item, NewJob):
            out.append(item)
            continue
        if not isinstance(item, Mapping):
            raise errors.ValidationError(f"jobs[{n}] must be a mapping or a NewJob", field=f"jobs[{n}]")
        unknown = sorted(set(item) - set(ENQUEUE_FIELDS))
        if unknown:
            raise errors.ValidationError(
                f"jobs[{n}] has unknown field {unknown[0]!r}; use {', '.join(ENQUEUE_FIELDS)}",
                field=unknown[0],
            )
        if "type" not in item:
            raise errors.ValidationError(f"jobs[{n}] has no type", field="type")
        out.append(new_job(**item))
    return out


def ids_or_conflict(results: Sequence[Any]) -> list[str]:
    """Enqueue results as ids; items refused because their id is used by another job raise Conflict."""
    used = [r.id for r in results if r.status == "conflict"]
    if used:
        shown = ", ".join(used[:10]) + (f" and {len(used) - 10} more" if len(used) > 10 else "")
        raise errors.Conflict(f"job id(s) used by another job already: {shown}", field="id")
    return [r.id for r in results]


def filter_words(flt: HotFilter) -> dict[str, Any]:
    """The set fields of a hot-job filter, by name."""
    return {k: getattr(flt, k) for k in flt.__dataclass_fields__ if getattr(flt, k) is not None}


def ids_of(selection: Any) -> list[str] | None:
    """Job ids from a frame (its `id` column, else an index named id), a Series, or a list; None when
    `selection` is not one of those (a filter)."""
    if isinstance(selection, pd.DataFrame):
        if "id" in selection.columns:
            return [str(v) for v in selection["id"]]
        if selection.index.name == "id":
            return [str(v) for v in selection.index]
        raise errors.ValidationError("the frame has no `id` column", field="ids")
    if isinstance(selection, pd.Series | pd.Index):
        return [str(v) for v in selection]
    if isinstance(selection, str):
        return [selection]
    if isinstance(selection, Iterable) and not isinstance(selection, Mapping | DlqFilter | HotFilter):
        return [str(v) for v in selection]
    return None


def _clean(value: Any) -> Any:
    """NaN/NA -> None; numpy scalars -> Python; payload dicts/lists stay (the store serialises them)."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    try:
        if pd.isna(value) is True:
            return None
    except (TypeError, ValueError):
        pass
    if hasattr(value, "item") and not isinstance(value, str | bytes | dict | list):
        return value.item()
    return value


def edits_of(edits: Any, selection: Any) -> dict[str, dict[str, Any]]:
    """Per-job edits as {id: {payload?, tags?, priority?}}.

    `edits` may be such a mapping; a DataFrame with an `id` column (or index) and any of the columns
    payload, tags, priority; or a list of those column names, taken from the `selection` frame (edit the
    frame, then plan with ``edits=["payload"]``). Missing values (NaN) leave a field unchanged."""
    if edits is None:
        return {}
    if isinstance(edits, str):
        edits = [edits]
    if isinstance(edits, list | tuple) and all(isinstance(e, str) for e in edits):
        if not isinstance(selection, pd.DataFrame):
            raise errors.ValidationError("edit columns need the selection to be a DataFrame", field="edits")
        bad = [e for e in edits if e not in EDIT_FIELDS]
        if bad:
            raise errors.ValidationError(
                f"edit columns must be among {', '.join(EDIT_FIELDS)}", field="edits"
            )
        edits = selection[["id", *edits]] if "id" in selection.columns else selection[list(edits)]
    if isinstance(edits, pd.DataFrame):
        frame = edits if "id" in edits.columns else edits.reset_index()
        if "id" not in frame.columns:
            raise errors.ValidationError("the edits frame has no `id` column", field="edits")
        cols = [c for c in EDIT_FIELDS if c in frame.columns]
        if not cols:
            raise errors.ValidationError(
                f"the edits frame has none of {', '.join(EDIT_FIELDS)}", field="edits"
            )
        edits = {str(r["id"]): {c: r[c] for c in cols} for r in frame[["id", *cols]].to_dict("records")}
    if not isinstance(edits, Mapping):
        raise errors.ValidationError("edits must be a mapping, a DataFrame or column names", field="edits")
    out: dict[str, dict[str, Any]] = {}
    for job_id, fields in edits.items():
        if not isinstance(fields, Mapping):
            raise errors.ValidationError(f"edits for {job_id} must be a mapping", field="edits")
        clean = {k: _clean(v) for k, v in fields.items()}
        if "priority" in clean and clean["priority"] is not None:
            clean["priority"] = int(clean["priority"])
        clean = {k: v for k, v in clean.items() if v is not None}
        if clean:
            out[str(job_id)] = clean
    return out


def records_frame(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str], times: Sequence[str] = ()
) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(columns))
    for col in times:
        frame[col] = pd.to_datetime(frame[col], utc=True, format="ISO8601")
    return frame


def parsed_details(row: dict[str, Any]) -> dict[str, Any]:
    """An audit row with its `details` as an object (the store keeps JSON text)."""
    details = row.get("details")
    if isinstance(details, str) and details:
        row["details"] = json.loads(details)
    return row


def audit_frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Audit rows as a frame: id (int64), at (UTC), actor, action, job_id, plan_id, count (int64), details
    (parsed JSON: dict, list or None)."""
    frame = records_frame(rows, AUDIT_COLUMNS, ("at",))
    frame["details"] = [json.loads(d) if isinstance(d, str) and d else d for d in frame["details"]]
    return frame.astype({"id": "int64", "count": "int64"})


FAILURE_COLUMNS = [
    "seq",
    "job_id",
    "queue",
    "type",
    "attempt",
    "outcome",
    "failure_reason",
    "fingerprint",
    "error_line",
    "error_details",
    "worker_id",
    "failed_at",
]


def failures_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = records_frame(rows, FAILURE_COLUMNS, ("failed_at",))
    return frame.astype({"seq": "int64", "attempt": "int64"})


PLAN_COLUMNS = [
    "id",
    "action",
    "actor",
    "state",
    "label",
    "total",
    "done",
    "skipped",
    "remaining",
    "chunks",
    "chunks_done",
    "rate",
    "lease_holder",
    "created_at",
    "finished_at",
]
ORPHAN_COLUMNS = ["plan_id", "actor", "state", "started_at", "beat_at", "items", "abandoned"]
IDS_PER_REQUEST = 200
LOCATE_COLUMNS = ["id", "location", "status", "failure_reason", "finished_at"]


class BaseClient:
    """The methods both clients implement the same way on top of their transport.

    The underscore methods first are what each transport provides (DbClient: the store, HttpClient: the
    API); a Plan holds the client as its backend (analysis.plans.PlanBackend)."""

    def _enqueue(self, jobs: list[NewJob], connection: Any) -> list[str]:
        raise NotImplementedError

    def _locate(self, ids: list[str]) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _failure_rows(self, flt: FailureFilter, limit: int, after: int | None) -> list[dict[str, Any]]:
        raise NotImplementedError

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
        raise NotImplementedError

    def _plan_get(self, plan_id: str) -> dict[str, Any]:
        raise NotImplementedError

    def _plan_chunk(
        self, plan_id: str, spread: float = 0.0, holder: str | None = None
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        raise NotImplementedError

    def _plan_items(self, plan_id: str) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _plan_approve(self, plan_id: str) -> dict[str, Any]:
        raise NotImplementedError

    def _plan_discard(self, plan_id: str) -> dict[str, Any]:
        raise NotImplementedError

    def _plan_outcomes(self, plan_id: str, from_chunk: int | None, to_chunk: int | None) -> dict[str, Any]:
        raise NotImplementedError

    def _plan_list(
        self, *, state: str | None, action: str | None, limit: int, label: str | None = None
    ) -> list[dict[str, Any]]:
        raise NotImplementedError

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
        raise NotImplementedError

    def _plan_lease(self, plan_id: str, holder: str, ttl: float, take_from: str | None) -> dict[str, Any]:
        raise NotImplementedError

    def _plan_release(self, plan_id: str, holder: str) -> None:
        raise NotImplementedError

    def _plan_pace(self, plan_id: str, rate: float | None) -> dict[str, Any]:
        raise NotImplementedError

    def _plan_note(self, plan_id: str, event: str, details: dict[str, Any]) -> None:
        raise NotImplementedError

    def _plan_orphans(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _job_types(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def preview(
        self,
        ids: Sequence[str] | None = None,
        *,
        sample: int = 10,
        max_jobs: int | None = None,
        renew: bool | None = None,
        **filters: Any,
    ) -> dict[str, Any]:
        raise NotImplementedError

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
        """Audit rows, newest first (each client documents its columns)."""
        raise NotImplementedError

    def enqueue(self, type: str, payload: Any = None, *, connection: Any = None, **options: Any) -> str:
        """Enqueue one job; returns its id. `options`: queue, priority, tags, delay or at,
        idempotency_key, id (see `new_job`). With an `idempotency_key` an active job already holds,
        nothing is inserted and that job's id is returned. An `id` already used by another job raises
        Conflict. `connection` (database clients only): the application's own open sqlite3 / pyodbc
        connection; the job is inserted in its open transaction and exists only if the application
        commits it."""
        return self.enqueue_many([{**options, "type": type, "payload": payload}], connection=connection)[0]

    def enqueue_many(
        self, jobs: Iterable[Mapping[str, Any] | NewJob], *, connection: Any = None
    ) -> list[str]:
        """Enqueue jobs given as mappings with `enqueue`'s argument names (``type`` required) or NewJobs;
        returns their ids in order (an active duplicate's id for a repeated idempotency key). Items whose
        `id` is used by another job raise Conflict naming them; the other items are enqueued."""
        return self._enqueue(new_jobs(jobs), connection)

    def plan(self, plan_id: str) -> Plan:
        """An existing plan by id (to inspect, execute or resume it)."""
        return Plan(self, self._plan_get(plan_id))

    def plan_resurrect(
        self,
        selection: Any = None,
        *,
        edits: Any = None,
        max_jobs: int | None = None,
        chunk_size: int = 1000,
        **filters: Any,
    ) -> Plan:
        """Freeze dead jobs for a resurrect: a frame of them (its ``id`` column), ids, a DlqFilter, or
        keyword filters (queue, type, reason, fingerprint, search, tag, failed_from/to, created_from/to).
        `edits` replaces payload/tags/priority per job (see `edits_of`). Nothing moves until
        ``plan.execute()``."""
        return self._make_plan(
            "resurrect", selection, filters, edits=edits, max_jobs=max_jobs, chunk_size=chunk_size
        )

    def plan_purge(
        self, selection: Any = None, *, max_jobs: int | None = None, chunk_size: int = 1000, **filters: Any
    ) -> Plan:
        """Freeze dead jobs for deletion; arguments as for `plan_resurrect` (no edits)."""
        return self._make_plan("purge", selection, filters, max_jobs=max_jobs, chunk_size=chunk_size)

    def plan_cancel(
        self, selection: Any = None, *, max_jobs: int | None = None, chunk_size: int = 1000, **filters: Any
    ) -> Plan:
        """Freeze pending or fetched hot jobs for cancellation: a hot frame, ids, a HotFilter or keyword
        filters (status, queue, type, tag, search). Running jobs are skipped when their chunk runs."""
        return self._make_plan("cancel", selection, filters, max_jobs=max_jobs, chunk_size=chunk_size)

    def _make_plan(
        self,
        action: str,
        selection: Any,
        filters: Mapping[str, Any],
        *,
        edits: Any = None,
        max_jobs: int | None = None,
        chunk_size: int = 1000,
    ) -> Plan:
        ids = ids_of(selection)
        flt: DlqFilter | HotFilter | None = None
        if ids is None:
            if selection is None and not filters:
                raise errors.ValidationError(
                    "a plan needs a selection: a frame, ids or a filter (use DlqFilter() for everything)",
                    field="ids",
                )
            if action == "cancel":
                flt = hot_filter(selection if isinstance(selection, Mapping | HotFilter) else None, **filters)
            else:
                flt = dlq_filter(selection if isinstance(selection, Mapping | DlqFilter) else None, **filters)
        elif filters:
            raise errors.ValidationError("give a selection or filters, not both", field="filter")
        elif not ids:
            raise errors.ValidationError("the selection is empty", field="ids")
        plan_edits = edits_of(edits, selection)
        data = self._plan_create(
            action, ids=ids, flt=flt, edits=plan_edits or None, max_jobs=max_jobs, chunk_size=chunk_size
        )
        return Plan(self, data)

    def failure_history(self, selection: Any = None, *, limit: int = 100_000, **filters: Any) -> pd.DataFrame:
        """Every failed attempt (retried or dead-lettered) of the selected jobs, oldest first, kept after
        a resurrect and a success (until Retention.FailureHistory). `selection`: a frame (its `id`
        column), a Series or a list of ids; or keyword filters of `chokaq_ops.filters`: ``ids``,
        ``queue``, ``type``, ``reason``, ``fingerprint`` (lists, ``!`` excludes), ``outcome`` (retry or
        dead), ``failed_from``/``failed_to`` (half-open).

        Columns: seq (int64, the history's order), job_id, queue, type, attempt (int64, the attempt that
        failed), outcome, failure_reason (Transient for a retried attempt), fingerprint, error_line (the
        first line), error_details, worker_id, failed_at (UTC)."""
        ids = ids_of(selection)
        if ids is not None:
            if "ids" in filters:
                raise errors.ValidationError("give a selection or ids=, not both", field="ids")
            filters = {**filters, "ids": ids}
        elif selection is not None:
            raise errors.ValidationError("the selection must be a frame, a Series or ids", field="ids")
        flt = failure_filter(filters)
        if flt.ids is None:
            return failures_frame(self._failure_pages(flt, limit))
        rows: list[dict[str, Any]] = []
        # Ids go in chunks: an API query string holds a few hundred of them, not a frame's worth.
        for start in range(0, len(flt.ids), IDS_PER_REQUEST):
            part = replace(flt, ids=flt.ids[start : start + IDS_PER_REQUEST])
            rows.extend(self._failure_pages(part, limit - len(rows)))
            if len(rows) >= limit:
                break
        rows.sort(key=lambda r: int(r["seq"]))
        return failures_frame(rows)

    def locate(self, ids: Any) -> pd.DataFrame:
        """Where jobs are now: a frame (its `id` column), a Series or ids. Columns: id, location (hot,
        archive, dlq or gone), status (pending, fetched, processing, succeeded, dead), failure_reason
        (dead jobs), finished_at (UTC: archived or dead-lettered at). One row per id, in the given order."""
        wanted = ids_of(ids)
        if wanted is None:
            raise errors.ValidationError("locate takes a frame, a Series or ids", field="ids")
        rows: list[dict[str, Any]] = []
        for start in range(0, len(wanted), IDS_PER_REQUEST):
            rows.extend(self._locate(wanted[start : start + IDS_PER_REQUEST]))
        return records_frame(rows, LOCATE_COLUMNS, ("finished_at",))

    def _failure_pages(self, flt: FailureFilter, limit: int) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        after: int | None = None
        while len(rows) < limit:
            size = min(5000, limit - len(rows))
            got = self._failure_rows(flt, size, after)
            rows.extend(got)
            if len(got) < size:
                break
            after = int(got[-1]["seq"])
        return rows

    def plans(
        self,
        *,
        state: str | None = None,
        action: str | None = None,
        label: str | None = None,
        limit: int = 100,
    ) -> pd.DataFrame:
        """Recent plans, newest first. Columns: id, action, actor, state, label, total, done, skipped,
        remaining, chunks, chunks_done, rate (float64, jobs/s; NaN: unpaced), lease_holder, created_at,
        finished_at (UTC)."""
        frame = records_frame(
            self.plan_rows(state=state, action=action, label=label, limit=limit),
            PLAN_COLUMNS,
            ("created_at", "finished_at"),
        )
        frame["rate"] = pd.to_numeric(frame["rate"]).astype("float64")
        return frame

    def plan_rows(
        self,
        *,
        state: str | None = None,
        action: str | None = None,
        label: str | None = None,
        limit: int = 100,
    ) -> list[dict[str, Any]]:
        """`plans()` as records (dicts with every field of a plan), for scripts and the CLI."""
        return self._plan_list(state=state, action=action, limit=limit, label=label)

    def plan_record(self, plan_id: str) -> dict[str, Any]:
        """One plan as a record (every field, as `GET /plans/{id}` answers it)."""
        return self._plan_get(plan_id)

    def orphan_rows(self) -> list[dict[str, Any]]:
        """`orphans()` as records."""
        return self._plan_orphans()

    def orphans(self) -> pd.DataFrame:
        """Freezes of plans in the making and abandoned ones not reclaimed yet (docs/notebooks.md,
        "No orphans"). Columns: plan_id, actor, state (freezing, reclaiming), started_at, beat_at (UTC),
        items (int64: rows held), abandoned (bool)."""
        frame = records_frame(self.orphan_rows(), ORPHAN_COLUMNS, ("started_at", "beat_at"))
        return frame.astype({"items": "int64", "abandoned": "bool"})

    def job_types(self) -> pd.DataFrame:
        """The job types workers declared when they started (their registry, recorded per type): type,
        idempotent (bool: `@job(idempotent=True)`, safe to run again), updated_at (UTC: last said)."""
        frame = records_frame(self._job_types(), ["type", "idempotent", "updated_at"], ("updated_at",))
        return frame.astype({"idempotent": "bool"})

    def retryable(self, selection: Any = None, **filters: Any) -> Any:
        """The safe retries: of a frame of jobs, the rows whose type a worker declared idempotent (the
        server's job-type registry, no handler code imported); without a frame, the dead jobs matching
        `filters` narrowed that way (a DataFrame, as `load_dlq`). A type no worker declared is not safe."""
        safe = set(self._idempotent_types())
        if isinstance(selection, pd.DataFrame):
            if filters:
                raise errors.ValidationError("give a frame or filters, not both", field="filter")
            if "type" not in selection.columns:
                raise errors.ValidationError("the frame has no `type` column", field="type")
            return selection[selection["type"].astype("object").isin(safe)]
        if selection is not None:
            raise errors.ValidationError("retryable takes a DataFrame or keyword filters", field="selection")
        narrowed = safe_type_filter(filters.get("type"), sorted(safe))
        if narrowed is None:
            return columns.empty_jobs("dlq", heavy=bool(filters.get("heavy", True)))
        return self.load_dlq(**{**filters, "type": narrowed})

    def load_dlq(self, filters: DlqFilter | None = None, **kw: Any) -> pd.DataFrame:
        """Dead jobs as a DataFrame (each client documents its options)."""
        raise NotImplementedError

    def _idempotent_types(self) -> list[str]:
        return [r["type"] for r in self._job_types() if r["idempotent"]]

    def run_plan(self, action: str, selection: Any = None, **options: Any) -> dict[str, Any]:
        """One run of a bulk plan: find or freeze it (a `label` resumes its unfinished plan), hold its
        lease, pace it, execute it, audit how it ended; returns the final event. See
        `chokaq_ops.client.runs.run_plan` for the options; `chokaq dlq resurrect` is this call."""
        return run_plan(self, action, selection, **options)

    def _labelled_run(self, action: str, ids: Any, filters: dict[str, Any], **options: Any) -> dict[str, Any]:
        """`resurrect(..., label=)` / `purge(..., label=)`: a labelled run, as the CLI's; the run options
        among `filters` (RUN_OPTIONS) go to it. A halt raises PlanHalted and an interrupt
        KeyboardInterrupt once audited; the final event is returned."""
        run = {k: filters.pop(k) for k in RUN_OPTIONS if k in filters}
        final = run_plan(self, action, ids, **options, **run, **filters)
        if final["event"] == "halted":
            raise errors.PlanHalted(
                final["message"], plan=self.plan(final["plan_id"]), outcomes=final["outcomes"]
            )
        if final["event"] == "interrupted":
            raise KeyboardInterrupt
        return final

    def _resurrect_first(
        self, ids: Any, filters: dict[str, Any], *, label: str | None, safe_only: bool, **options: Any
    ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """What both clients' `resurrect` does first: a labelled run (its final event), or nothing when
        `safe_only` leaves no type (a zero result), else (None, the filters to resurrect by)."""
        if label is not None:
            return self._labelled_run(
                "resurrect", ids, filters, label=label, safe_only=safe_only, **options
            ), {}
        if not safe_only:
            return None, filters
        _, _, words = self._selection("resurrect", ids, filters, safe_only=True)
        if words is None:
            return {"resurrected": 0, "batches": 0}, {}
        return None, words

    def _labelled_plan(self, action: str, label: str) -> Plan | None:
        for state in ("running", "ready"):
            rows = self._plan_list(state=state, action=action, limit=1, label=label)
            if rows:
                return Plan(self, self._plan_get(rows[0]["id"]))
        return None

    def _selection(
        self, action: str, selection: Any, filters: Mapping[str, Any], *, safe_only: bool
    ) -> tuple[list[str] | None, dict[str, Any], dict[str, Any] | None]:
        """A run's selection: (ids, the filter words as given, the words to match). The last is None when
        `safe_only` leaves no job type to match (nothing can)."""
        ids = ids_of(selection)
        words = dict(filters)
        if isinstance(selection, DlqFilter):
            words = {**dlq_query(selection), **words}
        elif isinstance(selection, HotFilter):
            words = {**filter_words(selection), **words}
        elif isinstance(selection, Mapping):
            words = {**selection, **words}
        if ids is not None and words:
            raise errors.ValidationError("give ids or filters, not both", field="ids")
        if not safe_only:
            return ids, words, words
        if ids is not None:
            raise errors.ValidationError("safe_only goes with filters, not ids", field="safe_only")
        narrowed = safe_type_filter(words.get("type"), self._idempotent_types())
        return ids, words, None if narrowed is None else {**words, "type": narrowed}

    def _resolve(
        self,
        action: str,
        selection: Any,
        filters: Mapping[str, Any],
        *,
        label: str | None,
        new: bool,
        edits: Any,
        max_jobs: int | None,
        chunk_size: int,
        renew: bool,
        safe_only: bool,
        rate: float | None,
    ) -> tuple[Plan, bool] | None:
        """The plan a run works and whether it resumed it; None when nothing matches (no plan is made).
        A label that names an unfinished plan resumes it (the store checks the selection against the one
        it froze); a label alone, without a selection, resumes it or says there is none."""
        ids, given, words = self._selection(action, selection, filters, safe_only=safe_only)
        chose = ids is not None or bool(given) or selection is not None or safe_only
        spec = (
            selection_spec(ids=ids, filters=given, max_jobs=max_jobs, safe_only=safe_only) if chose else None
        )
        common: dict[str, Any] = {"edits": None, "max_jobs": max_jobs, "chunk_size": chunk_size}
        common |= {"label": label, "renew": renew, "rate": rate}
        if label is not None and not new and (not chose or self._labelled_plan(action, label) is not None):
            data, resumed = self._plan_open(action, ids=None, flt=None, spec=spec, new=False, **common)
            return Plan(self, data), resumed
        if not chose:
            raise errors.ValidationError(
                f"{action} needs ids, a filter, or everything (DlqFilter())", field="ids"
            )
        if words is None:
            return None  # safe_only, and no job type is declared idempotent
        flt: Any = None
        if ids is None:
            flt = hot_filter(words) if action == "cancel" else dlq_filter(words)
            words_of: dict[str, Any] = dict(dlq_query(flt)) if isinstance(flt, DlqFilter) else {}
            if action != "cancel" and self.preview(None, sample=0, **words_of)["matched"] == 0:
                return None
        elif not ids:
            raise errors.ValidationError("the selection is empty", field="ids")
        common["edits"] = edits_of(edits, selection) or None
        data, resumed = self._plan_open(action, ids=ids, flt=flt, spec=spec or {}, new=new, **common)
        return Plan(self, data), resumed
