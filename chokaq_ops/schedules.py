"""Recurring schedules (docs/schedules.md): what a schedule is, how its definition is checked, and which of
its ticks run when a process finds it due.

A schedule is stored in the `schedules` table, created over the API or the CLI, or declared in code:

```python
from chokaq_ops import Schedule, job

@job("report.daily.v1", schedule="0 6 * * *", tz="Europe/Berlin")
def daily_report(payload, ctx): ...

@job("invoice.remind.v1", schedules=[
    Schedule("0 9 * * 1-5", name="reminders.eu", tz="Europe/Berlin", payload={"region": "eu"}),
    Schedule("0 9 * * 1-5", name="reminders.us", tz="America/New_York", payload={"region": "us"}),
])
def remind(payload, ctx): ...
```

Misfire policy: a tick found due later than its grace (`misfire_grace_seconds`, else
`Schedules.MisfireGrace`) was missed, because no process ran (or none could reach the database). Ticks
within the grace always run. Of the missed ones, `skip` runs none, `once` runs the newest, `catch_up`
runs the newest `catch_up_max`. Everything here is pure (no database, no clock): the engine gives it
the due tick and the database's `now`.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from chokaq_ops import cron, errors, validation

MISFIRE_POLICIES = ("skip", "once", "catch_up")
MAX_CATCH_UP = 1000
MAX_GRACE_S = 7 * 86_400.0
MAX_NAME = 80
# A name is one URL path segment and part of each tick's idempotency key (schedule:<name>@<tick>).
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,79}")
# Ticks one check enqueues for one schedule at most; the rest wait for the next check.
MAX_TICKS_PER_CHECK = 1000
# Missed ticks counted per outage at most (for missed_total and the event); a schedule of every second
# down for a week has 604,800 and counting them all would hold up the check.
MAX_COUNTED_MISSES = 10_000
SOURCES = ("api", "code")
MAX_TAGS = validation.MAX_TAGS - len("schedule:") - MAX_NAME - 1


def tick_key(name: str, tick: datetime) -> str:
    """The idempotency key of a tick's job: two processes enqueueing the same tick name the same job."""
    return f"schedule:{name}@{tick.isoformat().replace('+00:00', 'Z')}"


def schedule_tag(name: str) -> str:
    """The tag every job of a schedule carries (`GET /jobs?tag=schedule:<name>`)."""
    return f"schedule:{name}"


def check_name(name: Any, field: str = "name") -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise errors.ValidationError(
            f"{field} must be 1-{MAX_NAME} characters of letters, digits and . _ : @ -, starting with a "
            f"letter or digit (got {name!r})",
            field=field,
        )
    return name


def check_definition(values: Mapping[str, Any], *, max_payload_bytes: int = 1_000_000) -> dict[str, Any]:
    """The definition fields of `values` that are present, validated and normalised (the stored form);
    a ValidationError names the first bad field. `cron` and `tz` are checked together when either is
    given (the caller passes the stored other half for an update). A payload must be valid JSON: a job
    that fails as Fatal at every tick helps nobody."""
    out: dict[str, Any] = {}
    if "name" in values:
        out["name"] = check_name(values["name"])
    if "type" in values:
        out["type"] = validation.text(values["type"], "type", max_len=validation.MAX_TYPE)
    if "cron" in values or "tz" in values:
        parsed = cron.parse(values.get("cron"), values.get("tz", "UTC"))
        out["cron"], out["tz"] = parsed.expression, parsed.tz
    if "payload" in values:
        out["payload"] = validation.payload(
            payload_text(values["payload"]), max_bytes=max_payload_bytes, require_json=True
        )
    if "queue" in values:
        out["queue"] = validation.queue(values["queue"])
    if "priority" in values:
        priority = validation.priority(values["priority"])
        out["priority"] = 10 if priority is None else priority
    if "tags" in values:
        # Room is left for the tag every job of the schedule gets (schedule_tag).
        out["tags"] = validation.tags(values["tags"])
        if out["tags"] is not None and len(out["tags"]) > MAX_TAGS:
            raise errors.ValidationError(f"tags must be at most {MAX_TAGS} characters", field="tags")
    if "misfire" in values:
        if values["misfire"] not in MISFIRE_POLICIES:
            raise errors.ValidationError(
                f"misfire must be one of {', '.join(MISFIRE_POLICIES)} (got {values['misfire']!r})",
                field="misfire",
            )
        out["misfire"] = values["misfire"]
    if "catch_up_max" in values:
        n = values["catch_up_max"]
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CATCH_UP:
            raise errors.ValidationError(
                f"catch_up_max must be a whole number from 1 to {MAX_CATCH_UP} (got {n!r})",
                field="catch_up_max",
            )
        out["catch_up_max"] = n
    if "misfire_grace_seconds" in values:
        g = values["misfire_grace_seconds"]
        if g is not None and (
            isinstance(g, bool) or not isinstance(g, int | float) or not 0 < g <= MAX_GRACE_S
        ):
            raise errors.ValidationError(
                f"misfire_grace_seconds must be positive seconds up to {MAX_GRACE_S:g}, or null for "
                f"Schedules.MisfireGrace (got {g!r})",
                field="misfire_grace_seconds",
            )
        out["misfire_grace_seconds"] = None if g is None else float(g)
    if "paused" in values:
        if not isinstance(values["paused"], bool):
            raise errors.ValidationError("paused must be true or false", field="paused")
        out["paused"] = values["paused"]
    return out


def payload_text(payload: Any) -> str | None:
    """A schedule's payload as stored: text as given, any other value as compact JSON, None as none
    (its jobs then get `{}`, as an enqueue without a payload does)."""
    if payload is None or isinstance(payload, str):
        return payload
    try:
        return json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise errors.ValidationError(f"payload is not JSON-serialisable: {exc}", field="payload") from None


@dataclass(frozen=True)
class Schedule:
    """A recurring schedule declared in code (`@job(schedules=[...])`, or `@job(schedule=...)` for one).

    Processes that import the declaring module write it to the `schedules` table when they start
    (`source = "code"`): the definition comes from the code, the state (paused, last run) from the
    table, so a pause survives restarts. `name` defaults to the job type; `type` to the decorated
    handler's. Checked when declared: a bad expression fails the import with a ConfigError naming it."""

    cron: str
    name: str | None = None
    type: str | None = None
    tz: str = "UTC"
    payload: Any = None
    queue: str = "default"
    priority: int = 10
    tags: str | None = None
    misfire: str = "once"
    catch_up_max: int = 1
    misfire_grace_seconds: float | None = None

    def __post_init__(self) -> None:
        try:
            self.definition()
        except errors.ValidationError as exc:
            raise errors.ConfigError(f"schedule {self.name or self.cron!r}: {exc}", field=exc.field) from None

    def bound(self, type_key: str) -> Schedule:
        """This declaration for the handler of `type_key` (its name and type filled in)."""
        if self.type is not None and self.type != type_key:
            raise errors.ConfigError(
                f"schedule {self.name!r} names type {self.type!r} but decorates the handler of {type_key!r}",
                field="type",
            )
        return Schedule(**{**self.__dict__, "type": type_key, "name": self.name or type_key})

    def definition(self) -> dict[str, Any]:
        """The stored definition (validated); name and type must be known by now."""
        values = {k: v for k, v in self.__dict__.items() if k not in ("name", "type") or v is not None}
        return check_definition(values)


NEXT_RUNS = 5  # the ticks a schedule is shown with (API, CLI, The Deck)


def with_next_runs(schedule: Mapping[str, Any]) -> dict[str, Any]:
    """A schedule as the API, both clients and the CLI show it: its fields and `next_runs`, its next
    ticks as the check will walk them from next_run_at (empty while paused)."""
    return {
        **schedule,
        "next_runs": next_ticks(schedule["cron"], schedule["tz"], schedule["next_run_at"], NEXT_RUNS),
    }


def next_ticks(expression: str, tz: str, first: datetime | None, count: int = 5) -> list[datetime]:
    """A schedule's next `count` ticks as the check will run them: its next_run_at and the chain after it
    (none while paused)."""
    if first is None:
        return []
    return [first, *cron.parse(expression, tz).upcoming(first, count - 1)]


@dataclass(frozen=True)
class TickPlan:
    """What one check does for a due schedule: the ticks to enqueue (oldest first), which of them are
    late (past their grace, run by the misfire policy), how many missed ticks the policy skipped, and
    the new `next_run_at` (the first tick not handled; None when the expression never fires again)."""

    fire: tuple[datetime, ...]
    late: frozenset[datetime]
    missed: int
    next_run_at: datetime | None


def plan_ticks(
    expression: cron.Cron,
    due: datetime,
    now: datetime,
    *,
    misfire: str,
    catch_up_max: int,
    grace_s: float,
) -> TickPlan:
    """The ticks in [due, now] that run now. `due` is the schedule's next_run_at, `now` the database's.

    The ticks are the chain APScheduler's own scheduler walks: `due`, then each next fire time after the
    last. Recomputed from an arbitrary instant, APScheduler 3 can name other ticks (from inside a
    spring-forward gap it does not see the shifted tick it names from before the gap), so a `due` still
    ahead of `now` is kept as it is, and the chain is walked from it."""
    if due > now:
        return TickPlan(fire=(), late=frozenset(), missed=0, next_run_at=due)
    boundary = now - timedelta(seconds=grace_s)
    keep = min({"skip": 0, "once": 1, "catch_up": catch_up_max}.get(misfire, 1), MAX_TICKS_PER_CHECK)
    late: deque[datetime] = deque(maxlen=keep)
    missed = 0
    tick: datetime | None = due
    while tick is not None and tick < boundary and missed < MAX_COUNTED_MISSES:
        missed += 1
        late.append(tick)
        tick = expression.next_after(tick)
    if tick is not None and tick < boundary:
        # A long outage: counted up to the cap (a floor), the newest missed ticks found from the boundary.
        late = deque(expression.latest(tick, boundary, keep), maxlen=keep)
        tick = expression.at_or_after(boundary)
    else:
        missed -= len(late)
    on_time: list[datetime] = []
    while tick is not None and tick <= now and len(late) + len(on_time) < MAX_TICKS_PER_CHECK:
        on_time.append(tick)
        tick = expression.next_after(tick)
    # The first tick not handled: after now, or the rest of a check that reached MAX_TICKS_PER_CHECK.
    return TickPlan(fire=(*late, *on_time), late=frozenset(late), missed=missed, next_run_at=tick)
