"""Typed, immutable job and audit records: what the store returns and the engine, API and toolkit read.

A record is a frozen dataclass, read by attribute (``job.failed_at``). It is also a read-only mapping
over its fields (``job["queue"]``, ``job.get("tags")``, ``dict(job)``) so that JSON, marshmallow and
DataFrame edges take it as they take a row, and it compares equal to a dict of the same fields. A record
is never edited in place: ``dataclasses.replace`` or ``to_dict()`` make a new value.

``status`` holds the contract names (pending, fetched, processing, succeeded, dead) and
``failure_reason`` the reason's name, as every view shows them (docs/lifecycle.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any, ClassVar, Self, cast

from chokaq_ops.models import FailureReason, Status

# A stored status as its name. Claims and hot-job pages decode one per row: a dict, not an enum call.
_STATUS_NAME = {int(s): s.name for s in Status}

# Per record class: its keys in order, and the same as a set (a schema dumping a page of 1,000 jobs
# looks every field up by name).
_KEYS: dict[type, tuple[tuple[str, ...], frozenset[str]]] = {}


def _shape(cls: type[Record]) -> tuple[tuple[str, ...], frozenset[str]]:
    shape = _KEYS.get(cls)
    if shape is None:
        keys = tuple(f.name for f in dataclasses.fields(cast(Any, cls))) + cls.derived_keys
        shape = _KEYS[cls] = (keys, frozenset(keys))
    return shape


def _keys(cls: type[Record]) -> tuple[str, ...]:
    return _shape(cls)[0]


class Record(Mapping[str, Any]):
    """The mapping view shared by every record: its fields in declaration order, then `derived_keys`
    (class-level values every row of the kind shows, such as a job's `location`)."""

    __slots__ = ()
    derived_keys: ClassVar[tuple[str, ...]] = ()

    def __getitem__(self, key: str) -> Any:
        if key in _shape(type(self))[1]:
            return getattr(self, key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(_keys(type(self)))

    def __len__(self) -> int:
        return len(_keys(type(self)))

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={getattr(self, k)!r}" for k in _keys(type(self)))
        return f"{type(self).__name__}({shown})"

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _keys(type(self))}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Self:
        """Build from a database row. A column the record does not declare is an error (a schema change
        must be reflected here); a declared column the row lacks takes the field's default."""
        build = _BUILDERS[cls] if cls in _BUILDERS else _builder(cls)
        if build is not None and build.fits(row):
            record = _new(cls)
            for put, name, default in build.fields:
                put(record, row.get(name, default))
            return record
        try:
            return cls(**row)
        except TypeError as exc:
            unknown = sorted(set(row) - set(_keys(cls)))
            raise TypeError(f"{cls.__name__}: row does not fit ({exc}); unknown columns: {unknown}") from exc


class _Builder:
    """How `Record.from_row` fills a record without its generated `__init__`: a frozen dataclass's sets
    every field through `object.__setattr__` from keyword arguments, 2.6 us for a claimed job against
    1.2 here (a claim of 8 built them in a third of its client-side time). Each field is set through its
    slot, which is what that `__init__` does too; a row that lacks a required field or carries one the
    record does not declare takes `__init__` instead, for its error."""

    __slots__ = ("fields", "known", "required")

    def __init__(self, cls: type[Record]) -> None:
        declared = dataclasses.fields(cast(Any, cls))
        self.fields = tuple(
            (getattr(cls, f.name).__set__, f.name, None if f.default is dataclasses.MISSING else f.default)
            for f in declared
        )
        self.known = frozenset(f.name for f in declared)
        self.required = frozenset(f.name for f in declared if f.default is dataclasses.MISSING)

    def fits(self, row: Mapping[str, Any]) -> bool:
        keys = row.keys()
        return keys <= self.known and self.required <= keys


_BUILDERS: dict[type, _Builder | None] = {}
_new = object.__new__


def _builder(cls: type[Record]) -> _Builder | None:
    # Only plain slotted dataclasses qualify: a factory default or a __post_init__ needs the real __init__.
    fields = dataclasses.fields(cast(Any, cls))
    plain = "__slots__" in cls.__dict__ and not hasattr(cls, "__post_init__")
    plain = plain and all(f.default_factory is dataclasses.MISSING for f in fields)
    build = _BUILDERS[cls] = _Builder(cls) if plain else None
    return build


# Equality and repr come from Record (a record equals a dict of its fields); kw_only lets subclasses add
# required fields after defaulted ones.
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class JobRecord(Record):
    """What every stored job has, wherever it lives; `location` says where (hot, archive, dlq)."""

    location: ClassVar[str] = ""
    derived_keys: ClassVar[tuple[str, ...]] = ("location",)

    id: str
    queue: str
    type: str
    status: str
    payload: str | None = None
    tags: str | None = None
    idempotency_key: str | None = None
    priority: int = 10
    attempt_count: int = 0
    worker_id: str | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None
    created_by: str | None = None
    last_modified_by: str | None = None
    # The producer's W3C trace context (JSON: traceparent, tracestate), kept through every move
    # (docs/tracing.md); None when it was enqueued outside a trace.
    trace_context: str | None = None

    @classmethod
    def from_stored(cls, row: Mapping[str, Any]) -> Self:
        """From a stored row (its `location` column, if any, dropped): storage numbers become names."""
        values = dict(row)
        values.pop("location", None)
        cls._decode(values)
        return cls.from_row(values)

    @staticmethod
    def _decode(values: dict[str, Any]) -> None:
        raise NotImplementedError


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class HotJob(JobRecord):
    """A job in the hot table: pending, fetched or processing."""

    location: ClassVar[str] = "hot"

    heartbeat_at: datetime | None = None
    scheduled_at: datetime | None = None
    due_at: datetime | None = None
    updated_at: datetime | None = None
    last_error: str | None = None
    # When a resurrect that renewed the job's retry budget restarted its lifetime clock (Retry.MaxJobAge);
    # None: the clock runs from created_at.
    renewed_at: datetime | None = None

    @staticmethod
    def _decode(values: dict[str, Any]) -> None:
        values["status"] = _STATUS_NAME[int(values["status"])]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class ArchivedJob(JobRecord):
    """A job that succeeded; `failure_count` counts its failed attempts before that."""

    location: ClassVar[str] = "archive"

    finished_at: datetime | None = None
    duration_ms: float | None = None
    failure_count: int = 0

    @staticmethod
    def _decode(values: dict[str, Any]) -> None:
        values["status"] = "succeeded"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class DeadJob(JobRecord):
    """A job in the dead-letter queue, with why it died and the evidence."""

    location: ClassVar[str] = "dlq"

    failure_reason: str = FailureReason.MaxRetriesExceeded.name
    error_details: str | None = None
    fingerprint: str | None = None
    heartbeat_at: datetime | None = None
    failed_at: datetime | None = None
    duration_ms: float | None = None

    @staticmethod
    def _decode(values: dict[str, Any]) -> None:
        values["status"] = "dead"
        values["failure_reason"] = FailureReason(int(values["failure_reason"])).name

    def evidence(self) -> dict[str, float | None]:
        """The two numbers every view (API, CLI, the zombie message) shows for a dead job, in seconds to
        the ms. ``runtime_seconds``: how long the handler ran: ``duration_ms`` (for a zombie, from its
        start to its last heartbeat, the "runtime" of its error message), else failed_at - started_at.
        ``heartbeat_age_seconds``: failed_at - heartbeat_at, how long the job had been silent when it
        was declared dead (the message's "before detection")."""

        def between(later: datetime | None, earlier: datetime | None) -> float | None:
            return None if later is None or earlier is None else round((later - earlier).total_seconds(), 3)

        return {
            "runtime_seconds": round(self.duration_ms / 1000, 3)
            if self.duration_ms is not None
            else between(self.failed_at, self.started_at),
            "heartbeat_age_seconds": between(self.failed_at, self.heartbeat_at),
        }


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class ClaimedJob(Record):
    """A job a worker's claim returned: fetched, or already processing when claimed and started at once."""

    id: str
    queue: str
    type: str
    status: str
    priority: int
    due_at: datetime
    payload: str | None = None
    tags: str | None = None
    attempt_count: int = 0
    created_at: datetime | None = None
    scheduled_at: datetime | None = None
    idempotency_key: str | None = None
    created_by: str | None = None
    started_at: datetime | None = None
    trace_context: str | None = None  # the producer's trace (docs/tracing.md), for the consumer span's link
    renewed_at: datetime | None = None  # the lifetime clock's restart by a renewing resurrect, if any

    def sort_key(self) -> tuple[int, datetime, str]:
        """Claim order: priority first, then due time, then id."""
        return (-self.priority, self.due_at, self.id)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class Started(Record):
    """A start the store recorded: the attempt it counted and its start on the database clock."""

    id: str
    attempt_count: int
    started_at: datetime | None = None

    @classmethod
    def of(cls, job: ClaimedJob) -> Started:
        """The start of a job its claim started (claim-and-start)."""
        return cls(id=job.id, attempt_count=job.attempt_count, started_at=job.started_at)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class AuditEntry(Record):
    """One audit-log row: who did what to which job (or plan), how many rows, and the details JSON."""

    id: int
    at: datetime
    actor: str
    action: str
    job_id: str | None = None
    plan_id: str | None = None
    count: int = 1
    details: str | None = None


def _reason_name(value: Any) -> str | None:
    return None if value is None else FailureReason(int(value)).name


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class ScheduleRecord(Record):
    """A recurring schedule (the `schedules` table, docs/schedules.md) and where its newest job is now:
    `last_outcome` pending, fetched, processing, succeeded, dead or gone (purged), with the reason of a
    dead one in `last_failure_reason`."""

    name: str
    type: str
    cron: str
    tz: str
    queue: str
    priority: int
    misfire: str
    catch_up_max: int
    paused: bool
    source: str
    payload: str | None = None
    tags: str | None = None
    misfire_grace_seconds: float | None = None
    next_run_at: datetime | None = None
    last_tick_at: datetime | None = None
    last_run_at: datetime | None = None
    last_job_id: str | None = None
    runs_total: int = 0
    missed_total: int = 0
    created_at: datetime | None = None
    created_by: str | None = None
    updated_at: datetime | None = None
    updated_by: str | None = None
    last_outcome: str | None = None
    last_failure_reason: str | None = None

    @classmethod
    def from_stored(cls, row: Mapping[str, Any]) -> Self:
        values = dict(row)
        values["last_failure_reason"] = _reason_name(values.get("last_failure_reason"))
        values["paused"] = bool(values["paused"])
        return cls.from_row(values)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class ScheduleRun(Record):
    """One row of a schedule's tick ledger (`schedule_runs`): a cron tick that ran (`late` when the
    misfire policy ran it after its grace) or a trigger-now (`kind` manual), its job, and where that job
    is now (`outcome`, as ScheduleRecord.last_outcome)."""

    schedule: str
    tick_at: datetime
    kind: str
    late: bool = False
    job_id: str | None = None
    fired_at: datetime | None = None
    fired_by: str | None = None
    outcome: str | None = None
    failure_reason: str | None = None

    @classmethod
    def from_stored(cls, row: Mapping[str, Any]) -> Self:
        values = dict(row)
        values["failure_reason"] = _reason_name(values.get("failure_reason"))
        values["late"] = bool(values["late"])
        return cls.from_row(values)


_BY_LOCATION: dict[str, type[JobRecord]] = {"hot": HotJob, "archive": ArchivedJob, "dlq": DeadJob}


def job_record(row: Mapping[str, Any]) -> JobRecord:
    """A stored row with its `location` column as the record of that location."""
    return _BY_LOCATION[row["location"]].from_stored(row)


def job_from_view(view: Mapping[str, Any]) -> JobRecord:
    """A job from a view that may carry more than the record (the API's JSON with its evidence or worker
    state, times already parsed): the record of its `location`, from the fields that record declares."""
    cls = _BY_LOCATION[view["location"]]
    return cls.from_row({k: view[k] for k in _keys(cls) if k in view and k != "location"})


def claimed_job(row: dict[str, Any]) -> ClaimedJob:
    """A claim's row: fetched, or processing when the claim also started it (claim-and-start). The row
    is the claim's own: its status number is replaced by the name in place."""
    row["status"] = _STATUS_NAME[int(row["status"])]
    return ClaimedJob.from_row(row)
