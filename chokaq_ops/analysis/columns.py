"""Canonical column names and dtypes of every DataFrame the toolkit returns, defined once.

Job frames (DLQ, archive and hot snapshots) use the field names of docs/storage-contract.md plus
`fingerprint`, in this order:

=================  ========================  ==============================================================
column             dtype                     meaning
=================  ========================  ==============================================================
id                 str                       job id
queue              category                  queue name
type               category                  job type (the handler key)
payload            str                       stored JSON text (may be invalid JSON); heavy, see below
tags               str                       comma-separated tags
priority           int64                     higher runs first
status             category                  pending/fetched/processing (hot), succeeded (archive), dead (DLQ)
attempt_count      int64                     executions started
worker_id          str                       last worker that held the job
idempotency_key    str                       dedupe key (cleared on resurrect)
heartbeat_at       datetime64[us, UTC]       last heartbeat (hot, DLQ)
scheduled_at       datetime64[us, UTC]       requested run time (hot)
created_at         datetime64[us, UTC]       enqueued
started_at         datetime64[us, UTC]       last execution started
finished_at        datetime64[us, UTC]       succeeded (archive)
failed_at          datetime64[us, UTC]       dead-lettered (DLQ)
duration_ms        float64                   handler run time [ms]
created_by         str                       producer
last_modified_by   str                       last operator to change the job
failure_reason     category                  one of the 11 FailureReason names (DLQ), else NaN
error_details      str                       full traceback or message; heavy, see below
fingerprint        str                       error group id (DLQ; see chokaq_ops.fingerprint)
location           category                  hot, archive or dlq
=================  ========================  ==============================================================

Missing values are NaN / NaT. `payload` and `error_details` are the heavy columns: loaders called with
``heavy=False`` leave them out, which is most of the memory at a million rows. Durations computed by the
analysis functions carry their unit in the name (`heartbeat_age_s`, `runtime_s`).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from chokaq_ops.models import FailureReason

ID = "id"
QUEUE = "queue"
TYPE = "type"
PAYLOAD = "payload"
TAGS = "tags"
PRIORITY = "priority"
STATUS = "status"
ATTEMPT_COUNT = "attempt_count"
WORKER_ID = "worker_id"
IDEMPOTENCY_KEY = "idempotency_key"
HEARTBEAT_AT = "heartbeat_at"
SCHEDULED_AT = "scheduled_at"
CREATED_AT = "created_at"
STARTED_AT = "started_at"
FINISHED_AT = "finished_at"
FAILED_AT = "failed_at"
DURATION_MS = "duration_ms"
CREATED_BY = "created_by"
LAST_MODIFIED_BY = "last_modified_by"
FAILURE_REASON = "failure_reason"
ERROR_DETAILS = "error_details"
FINGERPRINT = "fingerprint"
LOCATION = "location"

JOB_COLUMNS: tuple[str, ...] = (
    ID,
    QUEUE,
    TYPE,
    PAYLOAD,
    TAGS,
    PRIORITY,
    STATUS,
    ATTEMPT_COUNT,
    WORKER_ID,
    IDEMPOTENCY_KEY,
    HEARTBEAT_AT,
    SCHEDULED_AT,
    CREATED_AT,
    STARTED_AT,
    FINISHED_AT,
    FAILED_AT,
    DURATION_MS,
    CREATED_BY,
    LAST_MODIFIED_BY,
    FAILURE_REASON,
    ERROR_DETAILS,
    FINGERPRINT,
    LOCATION,
)
HEAVY_COLUMNS: tuple[str, ...] = (PAYLOAD, ERROR_DETAILS)
TIME_COLUMNS: tuple[str, ...] = (HEARTBEAT_AT, SCHEDULED_AT, CREATED_AT, STARTED_AT, FINISHED_AT, FAILED_AT)
INT_COLUMNS: tuple[str, ...] = (PRIORITY, ATTEMPT_COUNT)
FLOAT_COLUMNS: tuple[str, ...] = (DURATION_MS,)
STRING_COLUMNS: tuple[str, ...] = (
    ID,
    PAYLOAD,
    TAGS,
    WORKER_ID,
    IDEMPOTENCY_KEY,
    CREATED_BY,
    LAST_MODIFIED_BY,
    ERROR_DETAILS,
    FINGERPRINT,
)

REASONS: tuple[str, ...] = tuple(r.name for r in sorted(FailureReason))  # category code == stored number
STATUSES: tuple[str, ...] = ("pending", "fetched", "processing", "succeeded", "dead")  # code 0-2 == stored
LOCATIONS: tuple[str, ...] = ("hot", "archive", "dlq")
STATUS_OF_LOCATION = {"hot": None, "archive": "succeeded", "dlq": "dead"}
TIME_COLUMN_OF_LOCATION = {"hot": CREATED_AT, "archive": FINISHED_AT, "dlq": FAILED_AT}

TIME_DTYPE = pd.DatetimeTZDtype(unit="us", tz="UTC")
REASON_DTYPE = pd.CategoricalDtype(REASONS)
STATUS_DTYPE = pd.CategoricalDtype(STATUSES)
LOCATION_DTYPE = pd.CategoricalDtype(LOCATIONS)
# pandas 3 infers its own string dtype ("str"); pandas 2 keeps Python strings in object columns.
STRING_DTYPE: object = "str" if int(pd.__version__.split(".")[0]) >= 3 else object

# Columns of the other frames the toolkit returns (documented on the functions that return them).
COUNT = "count"
SHARE = "share"
FIRST_FAILED_AT = "first_failed_at"
LAST_FAILED_AT = "last_failed_at"
FIRST_SEEN = "first_seen"
LAST_SEEN = "last_seen"
EXAMPLE_ID = "example_id"
EXCEPTION_TYPE = "exception_type"
TEMPLATE = "template"
FRAME = "frame"
HEARTBEAT_AGE_S = "heartbeat_age_s"
RUNTIME_S = "runtime_s"
IDEMPOTENT = "idempotent"
PERIOD = "period"


def job_columns(*, heavy: bool = True) -> list[str]:
    """The job-frame columns in order; without the heavy ones when `heavy` is false."""
    return [c for c in JOB_COLUMNS if heavy or c not in HEAVY_COLUMNS]


def _times(values: pd.Series) -> pd.Series:
    if pd.api.types.is_numeric_dtype(values.dtype) and not pd.api.types.is_bool_dtype(values.dtype):
        # microseconds since the epoch (PostgreSQL pages); NaN stays NaT
        return pd.to_datetime(values, unit="us", utc=True).astype(TIME_DTYPE)
    if isinstance(values.dtype, pd.DatetimeTZDtype):
        return values.dt.tz_convert("UTC").astype(TIME_DTYPE)
    return pd.to_datetime(values, utc=True, format="ISO8601").astype(TIME_DTYPE)


def _coded(values: pd.Series, dtype: pd.CategoricalDtype) -> pd.Series:
    """Stored numbers (code == number) or names to a fixed categorical."""
    if pd.api.types.is_numeric_dtype(values.dtype) and not isinstance(values.dtype, pd.CategoricalDtype):
        codes = values.fillna(-1).astype("int64").to_numpy()
        bad = (codes < -1) | (codes >= len(dtype.categories))
        codes = np.where(bad, -1, codes)
        return pd.Series(pd.Categorical.from_codes(codes, dtype=dtype), index=values.index)
    if values.dtype == object or pd.api.types.is_string_dtype(values.dtype):
        numeric = pd.to_numeric(values, errors="coerce")
        if numeric.notna().sum() == values.notna().sum() and values.notna().any():
            return _coded(numeric, dtype)
    return values.astype(object).astype(dtype)


def normalise(raw: pd.DataFrame, location: str, *, heavy: bool = True) -> pd.DataFrame:
    """Give a frame of raw job rows the canonical columns, order and dtypes (see the module docstring).

    `raw` may hold stored numbers or contract names for `status` / `failure_reason`, and times as
    datetimes, ISO 8601 text or microseconds since the epoch; absent columns are added empty."""
    n = len(raw)
    out: dict[str, pd.Series] = {}
    index = pd.RangeIndex(n)
    raw = raw.reset_index(drop=True)
    for col in job_columns(heavy=heavy):
        values = raw[col] if col in raw.columns else pd.Series([np.nan] * n, index=index, dtype=object)
        if col in TIME_COLUMNS:
            out[col] = _times(values)
        elif col in INT_COLUMNS:
            out[col] = pd.to_numeric(values, errors="coerce").fillna(0).astype("int64")
        elif col in FLOAT_COLUMNS:
            out[col] = pd.to_numeric(values, errors="coerce").astype("float64")
        elif col == FAILURE_REASON:
            out[col] = _coded(values, REASON_DTYPE)
        elif col == STATUS:
            fixed = STATUS_OF_LOCATION.get(location)
            if fixed is not None:
                codes = np.full(n, STATUSES.index(fixed), dtype="int64")
                out[col] = pd.Series(pd.Categorical.from_codes(codes, dtype=STATUS_DTYPE), index=index)
            else:
                out[col] = _coded(values, STATUS_DTYPE)
        elif col == LOCATION:
            codes = np.full(n, LOCATIONS.index(location), dtype="int64")
            out[col] = pd.Series(pd.Categorical.from_codes(codes, dtype=LOCATION_DTYPE), index=index)
        elif col in (QUEUE, TYPE):
            out[col] = values if isinstance(values.dtype, pd.CategoricalDtype) else values.astype("category")
        else:
            out[col] = _strings(values)
    return pd.DataFrame(out, index=index)


def _strings(values: pd.Series) -> pd.Series:
    if STRING_DTYPE == "str":
        if values.dtype == "str":
            return values
        return values.astype(object).where(values.notna(), np.nan).astype("str")
    return values.astype(object).where(values.notna(), np.nan)


def empty_jobs(location: str, *, heavy: bool = True) -> pd.DataFrame:
    """A job frame with no rows but every column and dtype."""
    return normalise(pd.DataFrame(), location, heavy=heavy)


def concat_jobs(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate job frames, keeping `queue` and `type` categorical (their categories are unioned)."""
    frames = list(frames)
    if not frames:
        raise ValueError("no frames to concatenate")
    if len(frames) == 1:
        return frames[0]
    for col in (QUEUE, TYPE):
        cats = sorted(set().union(*(f[col].cat.categories for f in frames if col in f.columns)))
        frames = [
            f.assign(**{col: f[col].cat.set_categories(cats)}) if col in f.columns else f for f in frames
        ]
    return pd.concat(frames, ignore_index=True)
