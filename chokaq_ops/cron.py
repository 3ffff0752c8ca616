"""Cron expressions: parsed into APScheduler 3 triggers, whose fire times (time zones and DST included)
are the ticks of a recurring schedule (docs/schedules.md).

Accepted forms, each checked here so a bad one is refused naming the field (`cron` or `tz`):

- five fields, `minute hour day-of-month month day-of-week`, as crontab(5) reads them;
- six fields, `second minute hour day-of-month month day-of-week` (seconds first, as Quartz, Hangfire and
  node-cron write it): `* * * * * *` is every second;
- `@yearly` (`@annually`), `@monthly`, `@weekly`, `@daily` (`@midnight`), `@hourly`.

Two places where APScheduler 3 reads a crontab differently from cron, fixed here so an expression means
what it means in every crontab:

- day-of-week numbers: cron's 0 (and 7) is Sunday, APScheduler 3's 0 is Monday (its `from_crontab`
  warns about it). The field is expanded to the set of days cron means and handed over as names
  (`1-5` -> `mon,tue,wed,thu,fri`; `*/2` -> `sun,tue,thu,sat`);
- day-of-month and day-of-week both restricted (neither starts with `*`): cron fires when **either**
  matches, APScheduler when both do. Such an expression becomes an OrTrigger of the two.

Every other field goes to APScheduler's CronTrigger as written (its extras, such as `last` in the
day-of-month, work too).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from chokaq_ops import errors

MAX_CRON = 200
MAX_TZ = 64
_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_DOW_TOKEN = re.compile(r"^(\*|[a-z]{3}|\d{1,2})(?:-([a-z]{3}|\d{1,2}))?(?:/(\d{1,2}))?$")
_TICK = timedelta(microseconds=1)


def zone(tz: Any) -> ZoneInfo:
    """An IANA time zone (`Europe/Berlin`, `UTC`); anything else is a ValidationError naming `tz`."""
    if not isinstance(tz, str) or not tz.strip() or len(tz) > MAX_TZ:
        raise errors.ValidationError(f"tz must be an IANA time zone name, got {tz!r}", field="tz")
    try:
        return ZoneInfo(tz.strip())
    except (ZoneInfoNotFoundError, ValueError, OSError, TypeError):
        raise errors.ValidationError(
            f"unknown time zone {tz!r} (use an IANA name such as UTC or Europe/Berlin)", field="tz"
        ) from None


def _dow_value(text: str) -> int:
    if text.isdigit():
        value = int(text)
        if value > 7:
            raise ValueError(f"day of week {value} is not 0-7")
        return value % 7
    if text not in _DAY_NAMES:
        raise ValueError(f"unknown day name {text!r}")
    return _DAY_NAMES.index(text)


def _day_of_week(text: str) -> str:
    """cron's day-of-week field as APScheduler day names (see the module docstring)."""
    days: set[int] = set()
    for token in text.lower().split(","):
        m = _DOW_TOKEN.match(token)
        if not m:
            raise ValueError(f"bad day-of-week {token!r}")
        first, last, step = m.group(1), m.group(2), int(m.group(3) or 1)
        if step < 1:
            raise ValueError(f"bad step in {token!r}")
        if first == "*":
            if last:
                raise ValueError(f"bad day-of-week {token!r}")
            low, high = 0, 6
        else:
            low = _dow_value(first)
            # `7` closes a range as Sunday (`5-7`); `N/S` runs from N to the end of the week.
            high = (7 if last == "7" else _dow_value(last)) if last else (6 if m.group(3) else low)
            if last and high < low:
                raise ValueError(f"day-of-week range {token!r} runs backwards")
        days.update(d % 7 for d in range(low, high + 1, step))
    if days == set(range(7)):
        return "*"
    return ",".join(_DAY_NAMES[d] for d in sorted(days))


@dataclass(frozen=True, eq=False)
class Cron:
    """A parsed expression in a zone. Times in and out are timezone-aware; ticks come out in UTC."""

    expression: str
    tz: str
    trigger: Any = field(repr=False)

    def at_or_after(self, when: datetime) -> datetime | None:
        """The first tick at or after `when` (None: the expression never fires again)."""
        fire = self.trigger.get_next_fire_time(None, when.astimezone(UTC))
        return None if fire is None else fire.astimezone(UTC)

    def next_after(self, when: datetime) -> datetime | None:
        """The first tick strictly after `when`."""
        return self.at_or_after(when + _TICK)

    def upcoming(self, after: datetime, count: int) -> list[datetime]:
        """The next `count` ticks after `after`."""
        out: list[datetime] = []
        tick = self.next_after(after)
        while tick is not None and len(out) < count:
            out.append(tick)
            tick = self.next_after(tick)
        return out

    def latest(self, start: datetime, end: datetime, count: int) -> list[datetime]:
        """The newest `count` ticks in [start, end), oldest first, without walking every tick since
        `start` (a schedule of every second, down for a day, has 86,400): a window ending at `end` grows
        until it holds `count` ticks or reaches back to `start`."""
        if count <= 0 or start >= end:
            return []
        span = timedelta(seconds=1)
        while True:
            begin = max(start, end - span)
            found: list[datetime] = []
            tick = self.at_or_after(begin)
            while tick is not None and tick < end:
                found.append(tick)
                found = found[-count:]
                tick = self.next_after(tick)
            if len(found) >= count or begin == start:
                return found
            span *= 4


def parse(expression: Any, tz: Any = "UTC") -> Cron:
    """Parse a cron expression in a time zone; a ValidationError names `cron` or `tz`."""
    if not isinstance(expression, str) or not expression.strip():
        raise errors.ValidationError("cron must be a cron expression such as '*/5 * * * *'", field="cron")
    text = " ".join(expression.split())
    if len(text) > MAX_CRON:
        raise errors.ValidationError(f"cron must be at most {MAX_CRON} characters", field="cron")
    where = zone(tz)
    fields_ = _ALIASES.get(text.lower(), text).split()
    if len(fields_) == 5:
        fields_ = ["0", *fields_]
    if len(fields_) != 6:
        raise errors.ValidationError(
            f"cron {text!r} has {len(fields_) if text.lower() not in _ALIASES else 5} fields; write five "
            "(minute hour day-of-month month day-of-week), six (seconds first) or an alias like @daily",
            field="cron",
        )
    second, minute, hour, dom, month, dow = fields_
    from apscheduler.triggers.combining import OrTrigger
    from apscheduler.triggers.cron import CronTrigger

    try:
        names = _day_of_week(dow)
        common = {"second": second, "minute": minute, "hour": hour, "month": month, "timezone": where}
        if dom.startswith("*") or dow.startswith("*"):
            trigger: Any = CronTrigger(day=dom, day_of_week=names, **common)
        else:  # cron fires when either day field matches
            trigger = OrTrigger(
                [
                    CronTrigger(day=dom, day_of_week="*", **common),
                    CronTrigger(day="*", day_of_week=names, **common),
                ]
            )
    except (ValueError, TypeError, IndexError, KeyError) as exc:  # APScheduler's parse errors
        raise errors.ValidationError(f"cron {text!r}: {exc}", field="cron") from None
    cron = Cron(text, where.key, trigger)
    try:
        fires = cron.next_after(datetime.now(UTC)) is not None
    except (ValueError, OverflowError):
        fires = False
    if not fires:
        raise errors.ValidationError(f"cron {text!r} never fires", field="cron")
    return cron
