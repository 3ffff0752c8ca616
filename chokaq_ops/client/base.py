"""What DbClient and HttpClient share: argument parsing (filters, selections, edits) and plan building."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pandas as pd

from chokaq_ops import errors
from chokaq_ops.analysis.plans import Plan
from chokaq_ops.models import DlqFilter, FailureReason, HotFilter, Status

DLQ_FILTER_FIELDS = tuple(DlqFilter.__dataclass_fields__)
HOT_FILTER_FIELDS = tuple(HotFilter.__dataclass_fields__)
ARCHIVE_FILTER_FIELDS = (
    "queue",
    "type",
    "search",
    "tag",
    "finished_from",
    "finished_to",
    "created_from",
    "created_to",
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


def parse_time(value: Any, field: str) -> datetime | None:
    """A point in time from a datetime, date, pandas Timestamp, ISO 8601 text, or a timedelta meaning
    "that long ago". Times without a zone are taken as UTC (as the API does)."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        return datetime.now(UTC) - value
    if isinstance(value, pd.Timestamp):
        value = value.to_pydatetime()
    elif isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise errors.ValidationError(f"{field} is not an ISO 8601 time: {value!r}", field=field) from None
    elif isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    if not isinstance(value, datetime):
        raise errors.ValidationError(f"{field} must be a time, got {type(value).__name__}", field=field)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _check_fields(filters: Mapping[str, Any], allowed: Sequence[str], what: str) -> None:
    unknown = sorted(set(filters) - set(allowed))
    if unknown:
        raise errors.ValidationError(
            f"unknown {what} filter {unknown[0]!r}; use {', '.join(allowed)}", field=unknown[0]
        )


def dlq_filter(filters: Mapping[str, Any] | DlqFilter | None = None, **more: Any) -> DlqFilter:
    """A DlqFilter from keyword filters: reason by name or number, times as for `parse_time`."""
    if isinstance(filters, DlqFilter):
        if more:
            raise errors.ValidationError("give a DlqFilter or keyword filters, not both", field="filter")
        return filters
    values = {**(filters or {}), **more}
    values = {k: v for k, v in values.items() if v is not None}
    _check_fields(values, DLQ_FILTER_FIELDS, "DLQ")
    if "reason" in values and not isinstance(values["reason"], FailureReason):
        try:
            values["reason"] = FailureReason.parse(values["reason"])
        except ValueError as exc:
            raise errors.ValidationError(str(exc), field="reason") from None
    for key in ("failed_from", "failed_to", "created_from", "created_to"):
        if key in values:
            values[key] = parse_time(values[key], key)
    return DlqFilter(**values)


def hot_filter(filters: Mapping[str, Any] | HotFilter | None = None, **more: Any) -> HotFilter:
    if isinstance(filters, HotFilter):
        return filters
    values = {k: v for k, v in {**(filters or {}), **more}.items() if v is not None}
    _check_fields(values, HOT_FILTER_FIELDS, "hot-job")
    if "status" in values and not isinstance(values["status"], Status):
        try:
            values["status"] = Status[str(values["status"]).strip().lower()]
        except KeyError:
            raise errors.ValidationError(
                f"status must be one of {', '.join(s.name for s in Status)}", field="status"
            ) from None
    return HotFilter(**values)


def archive_filter(filters: Mapping[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    values = {k: v for k, v in {**(filters or {}), **more}.items() if v is not None}
    _check_fields(values, ARCHIVE_FILTER_FIELDS, "archive")
    for key in ("finished_from", "finished_to", "created_from", "created_to"):
        if key in values:
            values[key] = parse_time(values[key], key)
    return values


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
    rows: list[dict[str, Any]], columns: Sequence[str], times: Sequence[str] = ()
) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(columns))
    for col in times:
        frame[col] = pd.to_datetime(frame[col], utc=True, format="ISO8601")
    return frame


def audit_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Audit rows as a frame: id (int64), at (UTC), actor, action, job_id, plan_id, count (int64), details
    (parsed JSON: dict, list or None)."""
    frame = records_frame(rows, AUDIT_COLUMNS, ("at",))
    frame["details"] = [json.loads(d) if isinstance(d, str) and d else d for d in frame["details"]]
    return frame.astype({"id": "int64", "count": "int64"})


class BaseClient:
    """The methods both clients implement the same way on top of their transport."""

    def plan(self, plan_id: str) -> Plan:
        """An existing plan by id (to inspect, execute or resume it)."""
        return Plan(self, self._plan_get(plan_id))  # type: ignore[arg-type]

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
        data = self._plan_create(  # type: ignore[attr-defined]
            action, ids=ids, flt=flt, edits=plan_edits or None, max_jobs=max_jobs, chunk_size=chunk_size
        )
        return Plan(self, data)  # type: ignore[arg-type]

    def plans(self, *, state: str | None = None, action: str | None = None, limit: int = 100) -> pd.DataFrame:
        """Recent plans, newest first. Columns: id, action, actor, state, total, done, skipped, remaining,
        chunks, chunks_done, created_at, finished_at (UTC)."""
        rows = self._plan_list(state=state, action=action, limit=limit)  # type: ignore[attr-defined]
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
