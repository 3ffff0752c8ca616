"""What an alert receiver and an alert rule are (docs/alerts.md), checked once for every source: the
configuration file (`[AlertReceivers.<name>]`, `[AlertRules.<name>]`), the API and the CLI.

A receiver's URL and secret are credentials (a Slack webhook URL is its own secret): `view()` shows the
scheme and host of the URL and whether a secret is set, never either value, and no message here quotes
them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from chokaq_ops import errors

RECEIVER_KINDS = ("webhook", "slack")
BY = ("fingerprint", "reason")
SEVERITIES = ("info", "warning", "critical")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
LABEL = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
MAX_URL = 2000
MAX_SECRET = 500
MIN_SECRET = 16
MAX_LIST = 50
DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class Kind:
    """A rule kind: what it watches, its labels (one alert per distinct value set) and its defaults."""

    description: str
    labels: tuple[str, ...]
    threshold: float | None  # None: the kind takes no threshold
    window_s: float | None = None  # None: the kind takes no window
    threshold_unit: str = ""


KINDS: Mapping[str, Kind] = {
    "dlq_growth": Kind(
        "jobs dead-lettered within the window, per error fingerprint (or reason, with by = reason)",
        ("fingerprint",),
        10,
        600.0,
        "dead jobs",
    ),
    "zombies": Kind("zombies the rescue sweep moved to the DLQ within the window", (), 1, 600.0, "zombies"),
    "circuit_open": Kind("a job type's circuit breaker is open or half-open", ("type",), None),
    "queue_lag": Kind(
        "the oldest due job of a queue has waited this long", ("queue",), 60.0, None, "seconds"
    ),
    "queue_depth": Kind("due jobs waiting in a queue", ("queue",), 10_000, None, "jobs"),
    "worker_lost": Kind(
        "a registered worker stopped refreshing its row (Health.WorkerHeartbeatTimeout) without stopping",
        ("worker_id",),
        None,
    ),
    "horizon_held": Kind(
        "a database session has held the oldest snapshot this long (vacuum cannot clean behind it)",
        (),
        600.0,
        None,
        "seconds",
    ),
    "plan_halted": Kind("a paced bulk plan was halted by its canary or failure guard", ("plan_id",), None),
}


STAMPS = ("created_at", "created_by", "updated_at", "updated_by")


def _stamps(item: Any) -> dict[str, Any]:
    """Where an entry comes from and who made and last changed it (the end of every view)."""
    return {"source": item.source, **{k: getattr(item, k) for k in STAMPS}}


def url_hint(url: str | None) -> str | None:
    """What may be shown of a receiver's URL: scheme and host (a path or query may be the secret)."""
    if not url:
        return None
    parts = urlsplit(url)
    host = parts.hostname or "?"
    port = f":{parts.port}" if parts.port else ""
    rest = "/…" if (parts.path not in ("", "/") or parts.query) else "/"
    return f"{parts.scheme}://{host}{port}{rest}"


@dataclass(frozen=True, slots=True)
class Receiver:
    name: str
    kind: str
    url: str = field(repr=False)
    secret: str | None = field(default=None, repr=False)
    send_resolved: bool = True
    timeout_s: float = 10.0
    max_alerts: int = 0  # 0: every alert of the group in one message
    source: str = "api"  # api (stored in the database) or config (the configuration file)
    created_at: datetime | None = None
    created_by: str | None = None
    updated_at: datetime | None = None
    updated_by: str | None = None

    def view(self) -> dict[str, Any]:
        """The receiver as every response, table and audit row shows it: no URL path, no secret."""
        return {
            "name": self.name,
            "kind": self.kind,
            "url": url_hint(self.url),
            "secret_set": bool(self.secret),
            "send_resolved": self.send_resolved,
            "timeout_s": self.timeout_s,
            "max_alerts": self.max_alerts,
            **_stamps(self),
        }


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    kind: str
    receivers: tuple[str, ...]
    severity: str = "warning"
    threshold: float | None = None
    window_s: float | None = None
    for_s: float = 0.0
    repeat_interval_s: float | None = None  # None: Alerts.RepeatInterval
    group_by: tuple[str, ...] = ("alertname",)
    queues: tuple[str, ...] = ()  # empty: every queue
    by: str | None = None  # dlq_growth: fingerprint (default) or reason
    inhibited_by: tuple[str, ...] = ()
    inhibit_equal: tuple[str, ...] = ()
    enabled: bool = True
    source: str = "api"
    created_at: datetime | None = None
    created_by: str | None = None
    updated_at: datetime | None = None
    updated_by: str | None = None

    def view(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "receivers": list(self.receivers),
            "severity": self.severity,
            "threshold": self.threshold,
            "window_s": self.window_s,
            "for_s": self.for_s,
            "repeat_interval_s": self.repeat_interval_s,
            "group_by": list(self.group_by),
            "queues": list(self.queues),
            "by": self.by,
            "inhibited_by": list(self.inhibited_by),
            "inhibit_equal": list(self.inhibit_equal),
            "enabled": self.enabled,
            **_stamps(self),
        }

    def labels_of(self) -> tuple[str, ...]:
        """The labels this rule's alerts carry besides alertname and severity."""
        if self.kind == "dlq_growth":
            return (self.by or "fingerprint",)
        return KINDS[self.kind].labels


# ---------------------------------------------------------------------------------------------- checks


def _fail(field_name: str, problem: str) -> errors.ValidationError:
    return errors.ValidationError(f"{field_name} {problem}", field=field_name)


def check_name(value: Any, field_name: str = "name") -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise _fail(
            field_name, "must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return value


def _names(value: Any, field_name: str, pattern: re.Pattern[str] = NAME) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else value
    if items is None:
        return ()
    if not isinstance(items, list | tuple) or len(items) > MAX_LIST:
        raise _fail(field_name, f"must be a list of at most {MAX_LIST} names")
    out = []
    for item in items:
        if not isinstance(item, str) or not pattern.fullmatch(item.strip()):
            raise _fail(field_name, "holds a name that is not 1-100 letters, digits, '.', '_' or '-'")
        if item.strip() not in out:
            out.append(item.strip())
    return tuple(out)


def _seconds(value: Any, field_name: str, *, low: float = 0.0, high: float = 30 * DAY) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise _fail(field_name, f"must be seconds between {low:g} and {high:g}")
    return float(value)


def check_url(value: Any, field_name: str = "url") -> str:
    """An http(s) URL with a host. The message never repeats the value (it may be the secret)."""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_URL:
        raise _fail(field_name, f"must be an http or https URL of at most {MAX_URL} characters")
    value = value.strip()
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        raise _fail(field_name, "is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in value):
        raise _fail(field_name, "must be an http or https URL with a host")
    return value


def check_secret(value: Any, field_name: str = "secret") -> str | None:
    if value is None:
        return None
    if (
        not isinstance(value, str)
        or not MIN_SECRET <= len(value) <= MAX_SECRET
        or any(c.isspace() for c in value)
    ):
        raise _fail(field_name, f"must be {MIN_SECRET}-{MAX_SECRET} characters without spaces")
    return value


def make_receiver(values: Mapping[str, Any], *, source: str = "api") -> Receiver:
    """A checked Receiver from field values (name, kind, url, secret, send_resolved, timeout_s,
    max_alerts); ValidationError names the first bad field."""
    kind = values.get("kind", "webhook")
    if kind not in RECEIVER_KINDS:
        raise _fail("kind", f"must be one of {', '.join(RECEIVER_KINDS)}")
    secret = check_secret(values.get("secret"))
    if kind == "webhook" and secret is None:
        raise _fail("secret", "is required for a webhook receiver: every request is signed with it")
    send_resolved = values.get("send_resolved", True)
    if not isinstance(send_resolved, bool):
        raise _fail("send_resolved", "must be true or false")
    max_alerts = values.get("max_alerts", 0)
    if isinstance(max_alerts, bool) or not isinstance(max_alerts, int) or not 0 <= max_alerts <= 10_000:
        raise _fail("max_alerts", "must be a whole number from 0 (all) to 10000")
    return Receiver(
        name=check_name(values.get("name")),
        kind=kind,
        url=check_url(values.get("url")),
        secret=secret,
        send_resolved=send_resolved,
        timeout_s=_seconds(values.get("timeout_s", 10.0), "timeout_s", low=0.5, high=120),
        max_alerts=max_alerts,
        source=source,
        **{k: values.get(k) for k in STAMPS},
    )


def make_rule(values: Mapping[str, Any], *, source: str = "api") -> Rule:
    """A checked Rule from field values; ValidationError names the first bad field."""
    name = check_name(values.get("name"))
    kind = str(values.get("kind") or "")
    if kind not in KINDS:
        raise _fail("kind", f"must be one of {', '.join(KINDS)}")
    spec = KINDS[kind]
    receivers = _names(values.get("receivers"), "receivers")
    if not receivers:
        raise _fail("receivers", "must name at least one receiver")
    severity = values.get("severity", "warning")
    if severity not in SEVERITIES:
        raise _fail("severity", f"must be one of {', '.join(SEVERITIES)}")
    threshold = values.get("threshold")
    if threshold is not None:
        if spec.threshold is None:
            raise _fail("threshold", f"does not apply to a {kind} rule")
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 < threshold <= 1e12:
            raise _fail("threshold", "must be a positive number")
        threshold = float(threshold)
    window = values.get("window_s")
    if window is not None:
        if spec.window_s is None:
            raise _fail("window_s", f"does not apply to a {kind} rule")
        window = _seconds(window, "window_s", low=1)
    by = values.get("by")
    if by is not None and (kind != "dlq_growth" or by not in BY):
        raise _fail("by", f"applies to dlq_growth rules only and must be one of {', '.join(BY)}")
    repeat = values.get("repeat_interval_s")
    group_by = _names(values.get("group_by"), "group_by", LABEL) or ("alertname",)
    inhibited_by = _names(values.get("inhibited_by"), "inhibited_by")
    if name in inhibited_by:
        raise _fail("inhibited_by", "cannot name the rule itself")
    enabled = values.get("enabled", True)
    if not isinstance(enabled, bool):
        raise _fail("enabled", "must be true or false")
    return Rule(
        name=name,
        kind=kind,
        receivers=receivers,
        severity=severity,
        threshold=threshold,
        window_s=window,
        for_s=_seconds(values.get("for_s") or 0.0, "for_s"),
        repeat_interval_s=None if repeat is None else _seconds(repeat, "repeat_interval_s", low=1),
        group_by=group_by,
        queues=_queues(values.get("queues")),
        by=by,
        inhibited_by=inhibited_by,
        inhibit_equal=_names(values.get("inhibit_equal"), "inhibit_equal", LABEL),
        enabled=enabled,
        source=source,
        **{k: values.get(k) for k in STAMPS},
    )


def _queues(value: Any) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else value
    if not items:
        return ()
    if not isinstance(items, list | tuple) or len(items) > MAX_LIST:
        raise _fail("queues", f"must be a list of at most {MAX_LIST} queue names")
    if not all(isinstance(q, str) and 0 < len(q.strip()) <= 255 for q in items):
        raise _fail("queues", "holds a queue name that is not 1-255 characters")
    return tuple(dict.fromkeys(q.strip() for q in items))


def joined(values: Iterable[str]) -> str | None:
    """A list as its stored comma-separated text (None when empty)."""
    text = ",".join(values)
    return text or None
