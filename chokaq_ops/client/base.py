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
from chokaq_ops.analysis.plans import Plan
from chokaq_ops.filters import dlq_filter, failure_filter, hot_filter, parse_time
from chokaq_ops.models import (
    DEFAULT_PRIORITY,
    DEFAULT_QUEUE,
    DlqFilter,
    FailureFilter,
    HotFilter,
    NewJob,
)

EDIT_FIELDS = ("payload", "tags", "priority")
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

    def _plan_chunk(self, plan_id: str, spread: float = 0.0) -> tuple[dict[str, Any], dict[str, Any] | None]:
        raise NotImplementedError

    def _plan_items(self, plan_id: str) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _plan_approve(self, plan_id: str) -> dict[str, Any]:
        raise NotImplementedError

    def _plan_discard(self, plan_id: str) -> dict[str, Any]:
        raise NotImplementedError

    def _plan_outcomes(self, plan_id: str, from_chunk: int | None, to_chunk: int | None) -> dict[str, Any]:
        raise NotImplementedError

    def _plan_list(self, *, state: str | None, action: str | None, limit: int) -> list[dict[str, Any]]:
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

    def plans(self, *, state: str | None = None, action: str | None = None, limit: int = 100) -> pd.DataFrame:
        """Recent plans, newest first. Columns: id, action, actor, state, total, done, skipped, remaining,
        chunks, chunks_done, created_at, finished_at (UTC)."""
        rows = self._plan_list(state=state, action=action, limit=limit)
        cols = [
            "id",
            "action",
            "actor",
            "state",
            "total",
            "done",
            "skipped",
            "remaining",
            "chunks",
            "chunks_done",
            "created_at",
            "finished_at",
        ]
        return records_frame(rows, cols, ("created_at", "finished_at"))
