"""Enumerations and value objects shared by storage, engine, API and analysis."""

from __future__ import annotations

import enum
from dataclasses import MISSING, dataclass, field, fields
from datetime import datetime
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Status(enum.IntEnum):
    """Stored hot-job status; terminal states are the table a row lives in."""

    pending = 0
    fetched = 1
    processing = 2


class FailureReason(enum.IntEnum):
    """Why a job is in the dead-letter queue; numbers match the original ChokaQ."""

    MaxRetriesExceeded = 0
    Cancelled = 1
    Zombie = 2
    CircuitBreakerOpen = 3
    Rejected = 4
    Throttled = 5
    Fatal = 6
    Timeout = 7
    Transient = 8
    HeartbeatFailure = 9
    RetryLifetimeExpired = 10

    @classmethod
    def parse(cls, value: str | int) -> FailureReason:
        """Accept a name (case-insensitive) or a number; raise ValueError otherwise."""
        if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
            return cls(int(value))
        for member in cls:
            if member.name.lower() == str(value).strip().lower():
                return member
        raise ValueError(
            f"unknown failure reason {value!r}; expected one of {', '.join(m.name for m in cls)}"
        )


class Location(enum.StrEnum):
    hot = "hot"
    archive = "archive"
    dlq = "dlq"


DEFAULT_QUEUE = "default"
DEFAULT_PRIORITY = 10


_C = TypeVar("_C")


def _dict_init(cls: type[_C]) -> type[_C]:
    """Gives a frozen dataclass an __init__ that fills the instance's dict in one go. The generated one
    stores each field by object.__setattr__: 1.3 us for NewJob's eleven fields against 0.5, and an
    enqueue_many builds one NewJob and one EnqueueResult per job (docs/benchmarks.md "enqueue_many").
    Same parameters, defaults and order; for classes with plain defaults and no __post_init__."""
    params = list(fields(cls))  # type: ignore[arg-type]
    if any(f.default_factory is not MISSING or not f.init for f in params) or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: _dict_init takes plain fields only")
    signature = ", ".join(f.name if f.default is MISSING else f"{f.name}=_default_{f.name}" for f in params)
    body = "\n".join(f"    d[{f.name!r}] = {f.name}" for f in params)
    scope: dict[str, Any] = {f"_default_{f.name}": f.default for f in params}
    exec(f"def __init__(self, {signature}):\n    d = self.__dict__\n{body}\n", scope)
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


@dataclass(frozen=True)
class Actor:
    """Who performs an operator mutation; `plan_id` links the audit rows of one bulk plan."""

    name: str
    plan_id: str | None = None


@_dict_init
@dataclass(frozen=True)
class NewJob:
    """A job to enqueue. `payload` is JSON text; it may be invalid JSON, which the worker fails as Fatal."""

    type: str
    payload: str = "{}"
    queue: str = DEFAULT_QUEUE
    priority: int = DEFAULT_PRIORITY
    tags: str | None = None
    idempotency_key: str | None = None
    id: str | None = None
    delay_seconds: float | None = None
    scheduled_at: datetime | None = None
    created_by: str | None = None
    # The W3C trace context to store (docs/tracing.md); None: the producer's current span, when
    # OpenTelemetry is installed. The API passes the one its request's headers carried.
    trace_context: str | None = None


@_dict_init
@dataclass(frozen=True)
class EnqueueResult:
    """`status`: new, duplicate (an active job holds the idempotency key; `id` is that job) or conflict
    (the id is already used by another job; nothing was inserted)."""

    id: str
    created: bool
    status: str = "new"


@dataclass(frozen=True)
class DlqFilter:
    """Filter over dead jobs; every field narrows the match (AND). Time windows are half-open:
    failed_from <= failed_at < failed_to. The tuple fields are the filter grammar's lists ("any of") and
    exclusions (chokaq_ops/filters.py builds them; a single value goes to the plain field)."""

    queue: str | None = None
    type: str | None = None
    reason: FailureReason | None = None
    fingerprint: str | None = None
    search: str | None = None
    tag: str | None = None
    failed_from: datetime | None = None
    failed_to: datetime | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None
    ids: tuple[str, ...] | None = None
    queues: tuple[str, ...] | None = None
    not_queues: tuple[str, ...] | None = None
    types: tuple[str, ...] | None = None
    not_types: tuple[str, ...] | None = None
    reasons: tuple[FailureReason, ...] | None = None
    not_reasons: tuple[FailureReason, ...] | None = None
    fingerprints: tuple[str, ...] | None = None

    def is_empty(self) -> bool:
        return all(getattr(self, f) is None for f in self.__dataclass_fields__)


@dataclass(frozen=True)
class ArchiveFilter:
    queue: str | None = None
    type: str | None = None
    search: str | None = None
    tag: str | None = None
    finished_from: datetime | None = None
    finished_to: datetime | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None


@dataclass(frozen=True)
class HotFilter:
    status: Status | None = None
    queue: str | None = None
    type: str | None = None
    tag: str | None = None
    search: str | None = None


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a listing (records, chokaq_ops/records.py); `total` counts every match, not just
    this page."""

    items: list[T]
    total: int
    page: int
    page_size: int


@dataclass(frozen=True)
class BulkResult:
    """Rows changed by a chunked bulk operation and the number of committed transactions."""

    count: int
    batches: int
    skipped: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RescueReport:
    recovered: int
    archived: int
    recovered_ids: list[str] = field(default_factory=list)
    archived_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class FailureFilter:
    """Which failure-history rows to read. Tuples are "any of"; `not_*` tuples exclude. Times are
    timezone-aware and half-open: failed_from <= failed_at < failed_to."""

    ids: tuple[str, ...] | None = None
    queues: tuple[str, ...] | None = None
    not_queues: tuple[str, ...] | None = None
    types: tuple[str, ...] | None = None
    not_types: tuple[str, ...] | None = None
    reasons: tuple[FailureReason, ...] | None = None
    not_reasons: tuple[FailureReason, ...] | None = None
    fingerprints: tuple[str, ...] | None = None
    outcome: str | None = None
    failed_from: datetime | None = None
    failed_to: datetime | None = None
