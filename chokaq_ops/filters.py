"""The one filter grammar of chokaq: the same words mean the same rows from Python, the CLI and the API.

- Lists: ``reason="Fatal,Timeout"``, ``reason=["Fatal", "Timeout"]`` (any of them).
- Exclusions: a value starting with ``!`` excludes it: ``reason="!Zombie"``, ``queue=["!bulk", "!slow"]``.
  Inclusions and exclusions combine: ``type="a,b,!b"`` is ``a``.
- ``ids``: job ids, as a list or comma-separated text.
- Times: an aware ``datetime``, a pandas ``Timestamp`` with a zone, a ``numpy.datetime64`` (numpy defines
  it as UTC), ISO 8601 text with a zone (``2026-01-01T00:00:00Z``, ``+02:00``), or relative: ``24h``,
  ``7d``, ``90m``, ``1h30m`` optionally followed by ``ago`` (that long before now), ``now``, ``today``
  and ``yesterday`` (midnight UTC that day); a ``date`` is its midnight UTC. A time without a zone
  (naive ``datetime``, ISO text without an offset) is refused: guessing its zone silently moves a window
  by hours.
- Windows are half-open: ``*_from <= t < *_to``. ``failed_from="yesterday", failed_to="today"`` is
  exactly one UTC day, so a job failing at midnight is in one night's window, never two.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from chokaq_ops import errors
from chokaq_ops.models import ArchiveFilter, DlqFilter, FailureFilter, FailureReason, HotFilter, Status
from chokaq_ops.settings import parse_duration

__all__ = [
    "TIME_HELP",
    "Choice",
    "archive_filter",
    "dlq_filter",
    "failure_filter",
    "hot_filter",
    "parse_choice",
    "parse_ids",
    "parse_reasons",
    "parse_time",
]

TIME_HELP = (
    "an ISO 8601 time with a zone (2026-01-01T00:00:00Z), or relative: 24h, 24h ago, 7d, 90m, now, today, "
    "yesterday"
)
_AGO = re.compile(r"\s+ago$", re.IGNORECASE)
# An unencoded "+" of an offset in a pasted URL arrives as a space: "2026-01-01T10:00:00 02:00".
_PLUS_AS_SPACE = re.compile(r"^(\d{4}-\d{2}-\d{2}T[\d:.]+) (\d{2}:?\d{2})$")


@dataclass(frozen=True, slots=True)
class Choice:
    """A list filter: rows whose value is any of `include` (all when None) and none of `exclude`."""

    include: tuple[Any, ...] | None = None
    exclude: tuple[Any, ...] | None = None

    def __bool__(self) -> bool:
        return self.include is not None or self.exclude is not None


def _items(value: Any, field: str) -> list[str]:
    if isinstance(value, str):
        parts = value.split(",")
    elif isinstance(value, Iterable) and not isinstance(value, (bytes, Mapping)):
        parts = []
        for item in value:
            if not isinstance(item, (str, int)) or isinstance(item, bool):
                raise errors.ValidationError(f"{field} items must be text, got {item!r}", field=field)
            parts.extend(str(item).split(","))
    elif isinstance(value, int) and not isinstance(value, bool):
        parts = [str(value)]
    else:
        raise errors.ValidationError(
            f"{field} must be text or a list, got {type(value).__name__}", field=field
        )
    parts = [p.strip() for p in parts]
    if not parts or any(not p or p == "!" for p in parts):
        raise errors.ValidationError(f"{field} has an empty item: {value!r}", field=field)
    return parts


def parse_choice(value: Any, field: str, convert: Any = None) -> Choice:
    """A list with `!` exclusions from text ("a,b,!c") or a list; None gives an empty Choice."""
    if value is None:
        return Choice()
    if isinstance(value, Choice):
        return value
    include: list[Any] = []
    exclude: list[Any] = []
    for part in _items(value, field):
        target, text = (exclude, part[1:].strip()) if part.startswith("!") else (include, part)
        target.append(convert(text) if convert else text)
    return Choice(tuple(dict.fromkeys(include)) or None, tuple(dict.fromkeys(exclude)) or None)


def _reason(text: str) -> FailureReason:
    try:
        return FailureReason.parse(text)
    except ValueError as exc:
        raise errors.ValidationError(str(exc), field="reason") from None


def parse_reasons(value: Any) -> Choice:
    """Failure reasons by name (any case) or number, with `!` exclusions."""
    if isinstance(value, FailureReason):
        return Choice((value,), None)
    return parse_choice(value, "reason", _reason)


def parse_ids(value: Any) -> tuple[str, ...] | None:
    """Job ids from a list or comma-separated text (no exclusions: an id list names rows)."""
    if value is None:
        return None
    if hasattr(value, "tolist") and not isinstance(value, str):  # a pandas Series / Index, a numpy array
        value = value.tolist()
    ids = _items(value, "ids")
    if any(i.startswith("!") for i in ids):
        raise errors.ValidationError("ids cannot be excluded with '!'", field="ids")
    return tuple(dict.fromkeys(ids))


def _midnight(now: datetime, days_back: int) -> datetime:
    return now.replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=days_back)


def parse_time(value: Any, field: str, *, now: datetime | None = None) -> datetime | None:
    """A point in time (UTC) from any of the forms the module docstring lists; naive times refused."""
    if value is None:
        return None
    now = now or datetime.now(UTC)
    if type(value).__name__ == "datetime64":  # numpy: no zone field, defined as UTC
        import pandas as pd

        return pd.Timestamp(value).tz_localize(UTC).to_pydatetime()
    if isinstance(value, timedelta):
        return _ago(now, value, field, repr(value))
    if isinstance(value, str):
        return _parse_text(value, field, now)
    if isinstance(value, date) and not isinstance(value, datetime):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)  # a day: its midnight UTC
    if hasattr(value, "to_pydatetime"):  # pandas Timestamp
        value = value.to_pydatetime()
    if not isinstance(value, datetime):
        raise errors.ValidationError(f"{field} must be a time ({TIME_HELP}), got {value!r}", field=field)
    if value.tzinfo is None or value.utcoffset() is None:
        raise errors.ValidationError(
            f"{field} has no timezone ({value.isoformat()}); give an aware time, e.g. with tzinfo=UTC",
            field=field,
        )
    return _as_utc(value, field)


def _as_utc(value: datetime, field: str) -> datetime:
    # 0001-01-01T00:00+01:00 is a valid ISO time whose UTC instant falls before year 1.
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise errors.ValidationError(
            f"{field} is out of range ({value.isoformat()}): years 1-9999 in UTC", field=field
        ) from None


def _ago(now: datetime, span: timedelta | float, field: str, given: str) -> datetime:
    # An age reaching past year 1 (or a number of seconds no timedelta holds) is bad input, not a 500.
    try:
        return now - (span if isinstance(span, timedelta) else timedelta(seconds=span))
    except (OverflowError, ValueError):
        raise errors.ValidationError(
            f"{field} is out of range ({given}): an age must end after year 1", field=field
        ) from None


def _parse_text(text: str, field: str, now: datetime) -> datetime:
    body = text.strip()
    word = body.lower()
    if word in ("now", "today", "yesterday"):
        return now if word == "now" else _midnight(now, 0 if word == "today" else 1)
    body = _PLUS_AS_SPACE.sub(r"\1+\2", body)
    try:
        value = datetime.fromisoformat(body.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        span = _AGO.sub("", body)
        try:
            seconds = parse_duration(span) if span and span[0] not in "+-" else None
        except errors.ConfigError:
            seconds = None
        if seconds is None:
            raise errors.ValidationError(
                f"{field}: expected {TIME_HELP}; got {text!r}", field=field
            ) from None
        return _ago(now, seconds, field, repr(text))
    if value.tzinfo is None:
        raise errors.ValidationError(
            f"{field} has no timezone ({text!r}); add Z or an offset such as +02:00", field=field
        )
    return _as_utc(value, field)


FAILURE_FIELDS = ("ids", "queue", "type", "reason", "fingerprint", "outcome", "failed_from", "failed_to")


def check_fields(values: Mapping[str, Any], allowed: Iterable[str], what: str) -> None:
    allowed = tuple(allowed)
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        raise errors.ValidationError(
            f"unknown {what} filter {unknown[0]!r}; use {', '.join(allowed)}", field=unknown[0]
        )


def failure_filter(values: Mapping[str, Any] | None = None, **more: Any) -> FailureFilter:
    """A FailureFilter from the grammar's words (see the module docstring)."""
    values = {k: v for k, v in {**(values or {}), **more}.items() if v is not None}
    check_fields(values, FAILURE_FIELDS, "failure-history")
    queue = parse_choice(values.get("queue"), "queue")
    type_ = parse_choice(values.get("type"), "type")
    reason = parse_reasons(values.get("reason"))
    fingerprint = parse_choice(values.get("fingerprint"), "fingerprint")
    if fingerprint.exclude:
        raise errors.ValidationError("fingerprint cannot be excluded with '!'", field="fingerprint")
    return FailureFilter(
        ids=parse_ids(values.get("ids")),
        queues=queue.include,
        not_queues=queue.exclude,
        types=type_.include,
        not_types=type_.exclude,
        reasons=reason.include,
        not_reasons=reason.exclude,
        fingerprints=fingerprint.include,
        outcome=values.get("outcome"),
        failed_from=parse_time(values.get("failed_from"), "failed_from"),
        failed_to=parse_time(values.get("failed_to"), "failed_to"),
    )


def _words(include: tuple[Any, ...] | None, exclude: tuple[Any, ...] | None) -> str | None:
    def name(v: Any) -> str:
        return v.name if isinstance(v, FailureReason) else str(v)

    parts = [name(v) for v in include or ()] + [f"!{name(v)}" for v in exclude or ()]
    return ",".join(parts) or None


def filter_query(flt: FailureFilter) -> dict[str, str]:
    """A FailureFilter as the grammar's text (API query parameters, CLI options): parsing it back gives
    the same filter."""
    out = {
        "ids": ",".join(flt.ids) if flt.ids is not None else None,
        "queue": _words(flt.queues, flt.not_queues),
        "type": _words(flt.types, flt.not_types),
        "reason": _words(flt.reasons, flt.not_reasons),
        "fingerprint": _words(flt.fingerprints, None),
        "outcome": flt.outcome,
        "failed_from": flt.failed_from.isoformat() if flt.failed_from else None,
        "failed_to": flt.failed_to.isoformat() if flt.failed_to else None,
    }
    return {k: v for k, v in out.items() if v is not None}


DLQ_FIELDS = (
    "ids",
    "queue",
    "type",
    "reason",
    "fingerprint",
    "search",
    "tag",
    "failed_from",
    "failed_to",
    "created_from",
    "created_to",
)


def _split(choice: Choice) -> tuple[Any, tuple[Any, ...] | None, tuple[Any, ...] | None]:
    """One plain value (the indexed, counted path) or the any-of list, and the exclusions."""
    if choice.include is not None and len(choice.include) == 1:
        return choice.include[0], None, choice.exclude
    return None, choice.include, choice.exclude


def dlq_filter(values: Mapping[str, Any] | DlqFilter | None = None, **more: Any) -> DlqFilter:
    """A DlqFilter from the grammar's words (see the module docstring); a DlqFilter passes through."""
    if isinstance(values, DlqFilter):
        if more:
            raise errors.ValidationError("give a DlqFilter or keyword filters, not both", field="filter")
        return values
    values = {k: v for k, v in {**(values or {}), **more}.items() if v is not None}
    check_fields(values, DLQ_FIELDS, "DLQ")
    queue, queues, not_queues = _split(parse_choice(values.get("queue"), "queue"))
    type_, types, not_types = _split(parse_choice(values.get("type"), "type"))
    reason, reasons, not_reasons = _split(parse_reasons(values.get("reason")))
    fingerprint, fingerprints, not_fingerprints = _split(
        parse_choice(values.get("fingerprint"), "fingerprint")
    )
    if not_fingerprints:
        raise errors.ValidationError("fingerprint cannot be excluded with '!'", field="fingerprint")
    return DlqFilter(
        queue=queue,
        type=type_,
        reason=reason,
        fingerprint=fingerprint,
        search=values.get("search"),
        tag=values.get("tag"),
        failed_from=parse_time(values.get("failed_from"), "failed_from"),
        failed_to=parse_time(values.get("failed_to"), "failed_to"),
        created_from=parse_time(values.get("created_from"), "created_from"),
        created_to=parse_time(values.get("created_to"), "created_to"),
        ids=parse_ids(values.get("ids")),
        queues=queues,
        not_queues=not_queues,
        types=types,
        not_types=not_types,
        reasons=reasons,
        not_reasons=not_reasons,
        fingerprints=fingerprints,
    )


HOT_FIELDS = tuple(HotFilter.__dataclass_fields__)
ARCHIVE_FIELDS = tuple(ArchiveFilter.__dataclass_fields__)
_ARCHIVE_TIMES = ("finished_from", "finished_to", "created_from", "created_to")


def hot_filter(values: Mapping[str, Any] | HotFilter | None = None, **more: Any) -> HotFilter:
    """A HotFilter from keyword filters (exact values; `status` by name); a HotFilter passes through."""
    if isinstance(values, HotFilter):
        return values
    values = {k: v for k, v in {**(values or {}), **more}.items() if v is not None}
    check_fields(values, HOT_FIELDS, "hot-job")
    if "status" in values and not isinstance(values["status"], Status):
        try:
            values["status"] = Status[str(values["status"]).strip().lower()]
        except KeyError:
            raise errors.ValidationError(
                f"status must be one of {', '.join(s.name for s in Status)}", field="status"
            ) from None
    return HotFilter(**values)


def archive_filter(values: Mapping[str, Any] | ArchiveFilter | None = None, **more: Any) -> ArchiveFilter:
    """An ArchiveFilter from keyword filters (exact values; times as `parse_time` reads them, half-open)."""
    if isinstance(values, ArchiveFilter):
        return values
    values = {k: v for k, v in {**(values or {}), **more}.items() if v is not None}
    check_fields(values, ARCHIVE_FIELDS, "archive")
    for key in _ARCHIVE_TIMES:
        if key in values:
            values[key] = parse_time(values[key], key)
    return ArchiveFilter(**values)


def dlq_query(flt: DlqFilter) -> dict[str, str]:
    """A DlqFilter as the grammar's text (API query parameters, CLI options); parsing it back gives the
    same filter."""
    out = {
        "ids": ",".join(flt.ids) if flt.ids is not None else None,
        "queue": _words((flt.queue,) if flt.queue else flt.queues, flt.not_queues),
        "type": _words((flt.type,) if flt.type else flt.types, flt.not_types),
        "reason": _words((flt.reason,) if flt.reason is not None else flt.reasons, flt.not_reasons),
        "fingerprint": _words((flt.fingerprint,) if flt.fingerprint else flt.fingerprints, None),
        "search": flt.search,
        "tag": flt.tag,
    }
    for key in ("failed_from", "failed_to", "created_from", "created_to"):
        value = getattr(flt, key)
        out[key] = value.isoformat() if value is not None else None
    return {k: v for k, v in out.items() if v is not None}


def spec_text(value: Any) -> str:
    """One filter value as given, in canonical text: what a label's selection is compared by. Text is
    kept as written (``24h`` stays ``24h``: a labelled re-run an hour later asks for the same thing),
    lists are joined, times are ISO 8601 in UTC, durations are seconds."""
    if isinstance(value, datetime):
        return _as_utc(value, "time").isoformat().replace("+00:00", "Z")
    if isinstance(value, timedelta):
        return f"{value.total_seconds():g}s ago"
    if isinstance(value, FailureReason | Status):
        return value.name
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, Iterable) and not isinstance(value, Mapping):
        return ",".join(spec_text(v) for v in value)
    if hasattr(value, "isoformat"):  # pandas Timestamp, date
        return str(value.isoformat())
    return str(value)


def selection_spec(
    *,
    ids: Iterable[str] | None = None,
    filters: Mapping[str, Any] | DlqFilter | HotFilter | None = None,
    max_jobs: int | None = None,
    safe_only: bool = False,
) -> dict[str, str]:
    """A bulk selection as its caller gave it (`{"queue": "billing", "reason": "Zombie"}`): a labelled
    plan is bound to it, and a labelled re-run asking for another selection is refused naming both. Ids
    are summarised by count and digest; filter objects by their set fields."""
    out: dict[str, str] = {}
    if ids is not None:
        listed = list(ids)
        digest = hashlib.sha256("\n".join(listed).encode()).hexdigest()[:16]
        out["ids"] = f"{len(listed)} id(s), sha256 {digest}"
    if isinstance(filters, DlqFilter):
        filters = dlq_query(filters)
    elif isinstance(filters, HotFilter):
        filters = {k: getattr(filters, k) for k in filters.__dataclass_fields__}
    for key, value in sorted((filters or {}).items()):
        if value is not None and (not isinstance(value, str) or value.strip()):
            out[key] = spec_text(value)
    if max_jobs is not None:
        out["max_jobs"] = str(max_jobs)
    if safe_only:
        out["safe_only"] = "true"
    return out


def safe_type_filter(type_value: Any, idempotent: Iterable[str]) -> list[str] | None:
    """The `type` filter narrowed to the job types workers declared idempotent (`@job(idempotent=True)`,
    recorded per type when a worker starts): those of `type_value` (a type filter in the grammar: list,
    `!` exclusions), or all of them without one. None when no type is left (nothing can match)."""
    chosen = parse_choice(type_value, "type")
    wanted = [t for t in idempotent if chosen.include is None or t in chosen.include]
    wanted = [t for t in wanted if t not in (chosen.exclude or ())]
    return wanted or None
