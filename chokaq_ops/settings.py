"""Typed, frozen configuration: defaults < TOML file < environment < overrides (command-line flags).

Every duration is stored as float seconds. Keys match case-insensitively and ignore `_` and `-`, so the
.NET spelling (`FetchedJobTimeout`), the TOML spelling (`fetched_job_timeout`) and the environment
spelling (`FETCHED_JOB_TIMEOUT`) are one key. Errors name the canonical PascalCase dotted key.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple, get_type_hints

from chokaq_ops import errors

_DAY = 86400.0
# A zombie timeout must exceed this many Execution.HeartbeatIntervalMax: within a few heartbeats a live job
# would be declared dead and sent to the DLQ (docs/configuration.md). Settings.min_zombie_timeout applies it.
ZOMBIE_HEARTBEATS = 3


def _limit(low: float, high: float | None = None, kind: str | None = None) -> dict[str, Any]:
    """Field metadata: inclusive bounds (durations without one must simply be positive) and a parse kind."""
    return {"limit": (low, high)} | ({"kind": kind} if kind else {})


@dataclass(frozen=True, slots=True)
class StorageSettings:
    url: str = "sqlite:///./chokaq.db"
    cleanup_batch_size: int = field(default=1000, metadata=_limit(1, 100_000))
    # Chunks of one bulk DLQ resurrect or purge in flight at once, each its own transaction on a
    # connection of its own (PostgreSQL; SQLite has one writer, so one). docs/configuration.md.
    bulk_streams: int = field(default=2, metadata=_limit(1, 16))
    max_transient_retries: int = field(default=3, metadata=_limit(0))
    transient_retry_base_delay: float = 0.2
    # Bounds on every database call (docs/configuration.md "Timeouts"); 0 turns one off.
    command_timeout: float = field(default=30.0, metadata=_limit(0, 86_400))
    lock_timeout: float = field(default=5.0, metadata=_limit(0, 3_600))
    connect_timeout: float = field(default=10.0, metadata=_limit(0, 600))
    pool_size: int = field(default=16, metadata=_limit(1))
    # SQLite: the write-ahead log is cut back to this once no reader needs it (storage/wal.py).
    wal_limit_mb: int = field(default=64, metadata=_limit(1, 1_000_000))
    # PostgreSQL: vacuum the churning tables and rebuild jobs_hot's indexes after a long snapshot
    # (engine/upkeep.py, docs/endurance.md "Upkeep").
    upkeep: bool = True


@dataclass(frozen=True, slots=True)
class RecoverySettings:
    fetched_job_timeout: float = 600.0
    processing_zombie_timeout: float = 600.0
    scan_interval: float = 60.0
    lease: bool = True  # one rescuer at a time across processes


@dataclass(frozen=True, slots=True)
class ExecutionSettings:
    default_timeout: float = 900.0
    heartbeat_interval_min: float = 8.0
    heartbeat_interval_max: float = 12.0
    heartbeat_failure_threshold: int = field(default=10, metadata=_limit(1))
    cancel_on_heartbeat_failure: bool = False


@dataclass(frozen=True, slots=True)
class RetrySettings:
    max_attempts: int = field(default=3, metadata=_limit(1))  # total executions, the first included
    base_delay: float = 3.0
    max_delay: float = 3600.0
    backoff_multiplier: float = field(default=2.0, metadata=_limit(1, kind="number"))  # a factor, not seconds
    jitter_max_delay: float = field(default=1.0, metadata=_limit(0))
    max_job_age: float | None = _DAY  # None: no lifetime budget
    circuit_breaker_delay: float = 5.0  # a job met by an open circuit runs again this much later


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    handlers: tuple[str, ...] = ()
    concurrency: int = field(default=10, metadata=_limit(1, 1024))
    prefetch: int = field(default=100, metadata=_limit(1))
    fetch_batch_size: int = field(default=20, metadata=_limit(1))
    polling_interval: float = 1.0
    # Wake idle workers at once when jobs become claimable (NOTIFY on PostgreSQL, PRAGMA data_version on
    # SQLite, and in-process); off, they are found by polling alone (engine/wakeup.py).
    instant_pickup: bool = True
    # SQLite: how often the worker process looks for commits of other processes (a PRAGMA, no I/O).
    change_check_interval: float = field(default=0.002, metadata=_limit(0.0005, 10))
    no_queues_sleep_interval: float = 5.0
    shutdown_grace_period: float = 30.0
    queues: tuple[str, ...] = ()  # empty: every queue
    worker_id: str | None = None  # None: generated at start


@dataclass(frozen=True, slots=True)
class RetentionSettings:
    archive: float | None = 30 * _DAY
    dlq: float | None = None  # the DLQ waits for a human unless told otherwise
    metric_buckets: float = 7 * _DAY
    events: float = 7 * _DAY  # the live stream's outbox; readers reconnect within minutes, not weeks
    workers: float = _DAY  # registry rows of workers not seen this long (crashed or killed) are deleted
    # Failed attempts outlive their job's DLQ row (a resurrect deletes it): long enough for a post-mortem.
    failure_history: float = 30 * _DAY
    interval: float = 3600.0


@dataclass(frozen=True, slots=True)
class CircuitSettings:
    """The circuit breaker per job type (docs/circuits.md); `@job(circuit=CircuitPolicy(...))` overrides
    a type's numbers."""

    enabled: bool = True
    failure_threshold: int = field(default=5, metadata=_limit(1))  # counted failures within the window...
    failure_window: float = 60.0  # ...(a tumbling window from the first of them) open the circuit
    break_duration: float = 30.0  # open this long, then half-open
    half_open_max_calls: int = field(default=1, metadata=_limit(1))  # probes at once; as many successes close
    half_open_probe_timeout: float = 30.0  # a probe not resolved by then frees its permit
    refresh_interval: float = 1.0  # how often a worker re-reads the circuits that are not closed


@dataclass(frozen=True, slots=True)
class HealthSettings:
    worker_heartbeat_timeout: float = 30.0
    queue_lag_degraded: float = 5.0
    queue_lag_unhealthy: float = 10.0
    # /health/ready's `horizon` check turns degraded (a warning: the queue still works) once a snapshot,
    # a prepared transaction or a pinned SQLite log has been held this long (docs/endurance.md).
    horizon_degraded: float = 120.0


@dataclass(frozen=True, slots=True)
class SchedulesSettings:
    """Recurring schedules (docs/schedules.md): every `chokaq serve` and `chokaq worker` process checks
    for due ticks; one transaction per tick wins, so any number may."""

    enabled: bool = True  # this process fires due schedules (`--no-schedules` turns it off for one)
    # How often a process looks for due ticks: a tick runs at most this late while a process runs.
    check_interval: float = field(default=1.0, metadata=_limit(0.05, 60))
    # A tick found due later than this was missed (no process ran): the schedule's misfire policy
    # decides whether it runs. A schedule's misfire_grace_seconds overrides it.
    misfire_grace: float = field(default=60.0, metadata=_limit(0.1, 7 * _DAY))
    # The tick ledger keeps each run this long (what the runs list shows); older rows are pruned.
    run_history: float = 7 * _DAY


@dataclass(frozen=True, slots=True)
class ApiSettings:
    host: str = "127.0.0.1"
    port: int = field(default=8080, metadata=_limit(0, 65535))  # 0: any free port
    max_body_bytes: int = field(default=2_000_000, metadata=_limit(1))
    metrics_open: bool = False
    threads: int = field(default=8, metadata=_limit(1))
    sse_keepalive: float = 15.0  # a comment line on idle event streams, so proxies keep them open
    sse_poll_interval: float = 1.0  # how often an event stream reads the events table
    sse_max_streams: int = field(default=4, metadata=_limit(1))  # each open stream holds a server thread
    sse_max_duration: float = 600.0  # streams end after this; EventSource reconnects with Last-Event-ID
    # One token holds at most this many of the Api.SseMaxStreams slots, so one client cannot take them all.
    sse_max_streams_per_token: int = field(default=2, metadata=_limit(1))
    # An open stream re-reads its token this often and ends once the token is revoked.
    sse_token_recheck: float = 5.0
    # waitress: a connection idle (no bytes either way) this long is closed, finished request or not.
    channel_timeout: float = 30.0
    # waitress: connections accepted at once; unfinished requests hold no thread, only a socket.
    connection_limit: int = field(default=1000, metadata=_limit(1))
    # Distinct queues the API lets producers create by enqueueing (existing queues keep working).
    max_queues: int = field(default=1000, metadata=_limit(1))
    # Four-eyes: plans freezing this many jobs or more run through the API only once a second token has
    # approved them (POST /plans/{id}/approve). 0 turns it off.
    plan_approval_min_jobs: int = field(default=0, metadata=_limit(0))


@dataclass(frozen=True, slots=True)
class AlertSettings:
    """The rule loop of `chokaq serve` and the delivery of notifications (docs/alerts.md). Timings are
    Alertmanager's: group_wait before a new group's first message, group_interval between messages about
    a changed group, repeat_interval between repeats of an unchanged one (a rule may set its own)."""

    enabled: bool = True
    evaluation_interval: float = 30.0
    group_wait: float = field(default=30.0, metadata=_limit(0, _DAY))
    group_interval: float = 300.0
    repeat_interval: float = 4 * 3600.0
    queue: str = "chokaq.alerts"  # the deliveries' queue (jobs of type chokaq.alert.deliver.v1)
    delivery_max_attempts: int = field(default=8, metadata=_limit(1, 100))
    external_url: str = ""  # shown as externalURL in notifications (e.g. the Deck's address)


@dataclass(frozen=True, slots=True)
class AlertReceiverSettings:
    """`AlertReceivers.<name>.*`: a receiver of the configuration file (read-only over the API). The URL
    and secret are credentials: no repr, no message quotes them."""

    kind: str = "webhook"
    url: str | None = field(default=None, repr=False)
    secret: str | None = field(default=None, repr=False)
    send_resolved: bool = True
    timeout: float = 10.0
    max_alerts: int = field(default=0, metadata=_limit(0, 10_000))


@dataclass(frozen=True, slots=True)
class AlertRuleSettings:
    """`AlertRules.<name>.*`: a rule of the configuration file (read-only over the API)."""

    kind: str = ""
    receivers: tuple[str, ...] = ()
    severity: str = "warning"
    threshold: float | None = field(default=None, metadata={"kind": "optional_number"})
    window: float | None = None
    pending_for: float | None = None  # Prometheus' `for`: the condition holds this long before firing
    repeat_interval: float | None = None
    group_by: tuple[str, ...] = ()
    queues: tuple[str, ...] = ()
    by: str | None = None
    inhibited_by: tuple[str, ...] = ()
    inhibit_equal: tuple[str, ...] = ()
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class DeckSettings:
    """The web console (chokaq_api/deck). It is a client of the REST API, so it has no security knobs."""

    enabled: bool = True
    route_prefix: str = "/deck"  # where the console lives; `/` redirects there
    queue_lag_warning_threshold: float = 5.0  # the Overview colours a queue's lag from here ...
    queue_lag_critical_threshold: float = 10.0  # ... and as critical from here


@dataclass(frozen=True, slots=True)
class SerializationSettings:
    max_payload_bytes: int = field(default=1_000_000, metadata=_limit(1))


@dataclass(frozen=True, slots=True)
class QueueSettings:
    zombie_timeout_seconds: float | None = None
    execution_timeout: float | None = None


@dataclass(frozen=True, slots=True)
class CircuitOverride:
    """`Circuits.<type>.*`: one job type's circuit-breaker numbers; None takes the handler's policy, else
    `Circuit.*` (docs/circuits.md)."""

    failure_threshold: int | None = field(default=None, metadata=_limit(1))
    failure_window: float | None = None
    break_duration: float | None = None
    half_open_max_calls: int | None = field(default=None, metadata=_limit(1))
    half_open_probe_timeout: float | None = None


@dataclass(frozen=True, slots=True)
class Settings:
    storage: StorageSettings = field(default_factory=StorageSettings)
    recovery: RecoverySettings = field(default_factory=RecoverySettings)
    execution: ExecutionSettings = field(default_factory=ExecutionSettings)
    retry: RetrySettings = field(default_factory=RetrySettings)
    worker: WorkerSettings = field(default_factory=WorkerSettings)
    retention: RetentionSettings = field(default_factory=RetentionSettings)
    health: HealthSettings = field(default_factory=HealthSettings)
    circuit: CircuitSettings = field(default_factory=CircuitSettings)
    api: ApiSettings = field(default_factory=ApiSettings)
    serialization: SerializationSettings = field(default_factory=SerializationSettings)
    deck: DeckSettings = field(default_factory=DeckSettings)
    alerts: AlertSettings = field(default_factory=AlertSettings)
    schedules: SchedulesSettings = field(default_factory=SchedulesSettings)
    circuits: Mapping[str, CircuitOverride] = field(default_factory=lambda: MappingProxyType({}))
    queues: Mapping[str, QueueSettings] = field(default_factory=lambda: MappingProxyType({}))
    alert_receivers: Mapping[str, AlertReceiverSettings] = field(default_factory=lambda: MappingProxyType({}))
    alert_rules: Mapping[str, AlertRuleSettings] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        for name in _MAPS:
            if not isinstance(getattr(self, name), MappingProxyType):
                object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    def __reduce__(self):
        # A mappingproxy cannot be pickled, and settings travel to worker processes by pickle.
        values = (getattr(self, f.name) for f in fields(self))
        return (type(self), tuple(dict(v) if isinstance(v, MappingProxyType) else v for v in values))

    def min_zombie_timeout(self) -> float:
        """The bound every zombie timeout must exceed, in seconds: ZOMBIE_HEARTBEATS x
        Execution.HeartbeatIntervalMax. The one home of that rule: validation here, `chokaq queues set`,
        the client and PATCH /queues all ask this method."""
        return ZOMBIE_HEARTBEATS * self.execution.heartbeat_interval_max

    def zombie_timeout_for(self, queue: str) -> float:
        q = _queue_lookup(self.queues, queue)
        if q is not None and q.zombie_timeout_seconds is not None:
            return q.zombie_timeout_seconds
        return self.recovery.processing_zombie_timeout

    def execution_timeout_for(self, queue: str) -> float:
        q = _queue_lookup(self.queues, queue)
        if q is not None and q.execution_timeout is not None:
            return q.execution_timeout
        return self.execution.default_timeout

    def with_overrides(self, overrides: Mapping[str, object] | None = None, /, **kwargs: object) -> Settings:
        """A validated copy; dotted keys as in load_settings, or keywords like `recovery__scan_interval=1`."""
        merged = {**(overrides or {}), **{k.replace("__", "."): v for k, v in kwargs.items()}}
        values = _flatten(self)
        _merge(values, _override_layer(merged))
        return _build(values).validate()

    def validate(self) -> Settings:
        """Raise ConfigError naming the first offending key; return self so calls can chain."""
        values = _flatten(self)
        for key, value in values.items():
            name, spec = _display(key), _FIELD_OF[(key[0], key[-1])]
            low, high = spec.metadata.get("limit", (None, None))
            if low is not None and value is not None:  # None: a per-type override left to the default
                bounds = f"at least {low}" if high is None else f"between {low} and {high}"
                ok = low <= value <= (math.inf if high is None else high)
                _require(ok, name, f"must be {bounds} (got {_show(key, value)})")
            elif spec.type.startswith("float"):  # a duration: None means disabled
                _require(value is None or value > 0, name, f"must be positive (got {_fmt(value)})")
        for big, small in _ORDERED:
            a, b = values[big], values[small]
            problem = f"({_show(big, a)}) must be at least {_display(small)} ({_show(small, b)})"
            _require(a >= b, _display(big), problem)
        url = self.storage.url  # only the scheme goes into the message: the rest may hold a password
        scheme = url.split(":", 1)[0]
        _require(
            url.lower().startswith(_URL_SCHEMES),
            "Storage.Url",
            f"scheme {scheme!r} is not one of {_URL_SCHEMES}"
            + (" (SQL Server is not supported)" if scheme.lower() in ("mssql", "odbc") else ""),
        )
        _require(
            self.schedules.misfire_grace >= 2 * self.schedules.check_interval,
            "Schedules.MisfireGrace",
            f"({_fmt(self.schedules.misfire_grace)}) must be at least 2 \N{MULTIPLICATION SIGN} "
            f"Schedules.CheckInterval ({_fmt(self.schedules.check_interval)}): a tick seen at the next "
            "check must never count as missed",
        )
        prefix = self.deck.route_prefix
        _require(
            bool(_ROUTE_PREFIX.fullmatch(prefix)) and prefix.split("/")[1].lower() != "api",
            "Deck.RoutePrefix",
            f"must be a path like /deck (letters, digits, . _ ~ -), not under /api (got {prefix!r})",
        )
        zombies: dict[str, float | None] = {
            "Recovery.ProcessingZombieTimeout": self.recovery.processing_zombie_timeout
        }
        for name, q in self.queues.items():
            _require(
                bool(name.strip()) and len(name) <= 255, "Queues", f"bad queue name {name!r} (1-255 chars)"
            )
            zombies[f"Queues.{name}.ZombieTimeoutSeconds"] = q.zombie_timeout_seconds
        hb = self.execution.heartbeat_interval_max
        times = f"{ZOMBIE_HEARTBEATS} \N{MULTIPLICATION SIGN}"
        for name, value in zombies.items():
            _require(
                value is None or value > self.min_zombie_timeout(),
                name,
                f"({_fmt(value)}) must exceed {times} Execution.HeartbeatIntervalMax "
                f"({times} {_fmt(hb)} = {_fmt(self.min_zombie_timeout())})",
            )
        self._validate_alerts()
        return self

    def _validate_alerts(self) -> None:
        """Receivers and rules of the file pass the checks the API applies (chokaq_ops/alert_model.py)."""
        from chokaq_ops import alert_model
        from chokaq_ops.alert_config import config_receiver, config_rule

        checks: list[tuple[str, str, Any]] = [
            *(
                ("AlertReceivers", n, lambda n=n, r=r: config_receiver(n, r))
                for n, r in self.alert_receivers.items()
            ),
            *(("AlertRules", n, lambda n=n, r=r: config_rule(n, r)) for n, r in self.alert_rules.items()),
        ]
        for section, name, build in checks:
            try:
                build()
            except errors.ValidationError as exc:
                key = f"{section}.{name}.{_pascal(exc.field or 'name')}"
                raise errors.ConfigError(f"{key}: {exc}", field=key) from None
        _require(
            bool(alert_model.NAME.fullmatch(self.alerts.queue)),
            "Alerts.Queue",
            "must be 1-100 letters, digits, '.', '_' or '-'",
        )


_URL_SCHEMES = ("sqlite://", "postgresql://", "postgres://")
_ORDERED = (  # (must be >=, than)
    (("execution", "heartbeat_interval_max"), ("execution", "heartbeat_interval_min")),
    (("retry", "max_delay"), ("retry", "base_delay")),
    (("worker", "prefetch"), ("worker", "fetch_batch_size")),
    (("health", "queue_lag_unhealthy"), ("health", "queue_lag_degraded")),
    (("deck", "queue_lag_critical_threshold"), ("deck", "queue_lag_warning_threshold")),
)
# One or more path segments of URL-safe characters; the API owns /api and the root only redirects.
_ROUTE_PREFIX = re.compile(r"(/[A-Za-z0-9._~-]+)+")


def _require(ok: bool, key: str, problem: str) -> None:
    if not ok:
        raise errors.ConfigError(f"{key} {problem}", field=key)


def _fmt(seconds: float | None) -> str:
    return "none" if seconds is None else f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"


def _show(key: _Key, value: Any) -> str:
    spec = _FIELD_OF[(key[0], key[-1])]
    is_duration = spec.type.startswith("float") and "kind" not in spec.metadata
    return _fmt(value) if is_duration else str(value)


def _queue_lookup(queues: Mapping[str, QueueSettings], name: str) -> QueueSettings | None:
    # Environment variable names are conventionally upper case, so fall back to a case-insensitive match.
    if name in queues:
        return queues[name]
    folded = name.casefold()
    return next((q for n, q in queues.items() if n.casefold() == folded), None)


# ---------------------------------------------------------------------------------------------- values

_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": _DAY}
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_UNIT_PART = re.compile(rf"({_NUMBER})\s*(ms|s|m|h|d)")
_UNITS = re.compile(rf"(?:{_UNIT_PART.pattern}\s*)+")
_TIMESPAN = re.compile(r"(?:(\d+)\.)?(\d+):(\d{1,2})(?::(\d{1,2})(\.\d+)?)?")  # .NET [d.]hh:mm[:ss[.fff]]
_NONE_WORDS = {"none", "null", "off", ""}
_BOOLS = dict.fromkeys(("true", "1", "yes", "on"), True) | dict.fromkeys(("false", "0", "no", "off"), False)


def parse_duration(value: object, field: str | None = None) -> float:
    """Seconds from 90, 1.5, "90", "90s", "500ms", "10m", "2h", "1d", "1h30m", "hh:mm:ss[.fff]", "d.hh:mm:ss".

    Raises ConfigError (not ValueError), naming `field` when given.
    """
    try:
        return _duration(value)
    except ValueError as exc:
        raise errors.ConfigError(f"{field}: {exc}" if field else str(exc), field=field)


def _duration(value: object) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    text = value.strip().lower() if isinstance(value, str) else ""
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-").strip()
    if re.fullmatch(_NUMBER, body):
        return sign * float(body)
    if _UNITS.fullmatch(body):
        return sign * sum(float(n) * _UNIT_SECONDS[u] for n, u in _UNIT_PART.findall(body))
    match = _TIMESPAN.fullmatch(body)
    if match:
        days, hours, minutes, seconds, fraction = match.groups()
        if int(minutes) < 60 and int(seconds or 0) < 60 and (days is None or int(hours) < 24):
            whole = int(days or 0) * _DAY + int(hours) * 3600 + int(minutes) * 60 + int(seconds or 0)
            return sign * (whole + float(fraction or 0))
    raise ValueError(f"invalid duration {value!r} (use seconds, 90s, 500ms, 10m, 2h, 1d or hh:mm:ss)")


def _integer(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"[+-]?\d+", value.strip()):
        return int(value)
    raise ValueError(f"expected an integer, got {value!r}")


def _number(value: object) -> float:
    if isinstance(value, str) and re.fullmatch(rf"[+-]?{_NUMBER}", value.strip()):
        value = float(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    raise ValueError(f"expected a number, got {value!r}")


def _boolean(value: object) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower() if isinstance(value, (str, int)) else None
    if word in _BOOLS:
        return _BOOLS[word]
    raise ValueError(f"expected true/false, got {value!r}")


def _string(value: object) -> str:
    if isinstance(value, str):
        return value.strip()
    raise ValueError(f"expected a string, got {value!r}")


def _names(value: object) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) for i in items):
        raise ValueError(f"expected a list of names or a comma-separated string, got {value!r}")
    return tuple(i.strip() for i in items if i.strip())


def _optional(convert: Callable[[object], Any]) -> Callable[[object], Any]:
    def convert_or_none(value: object) -> Any:
        if value is None or (isinstance(value, str) and value.strip().lower() in _NONE_WORDS):
            return None
        return convert(value)

    return convert_or_none


# Keyed by the field's annotation (a string, thanks to `from __future__ import annotations`) or its kind.
_CONVERTERS = {
    "float": _duration,
    "float | None": _optional(_duration),
    "number": _number,
    "int": _integer,
    "bool": _boolean,
    "str": _string,
    "str | None": _optional(_string),
    "int | None": _optional(_integer),
    "tuple[str, ...]": _names,
    "optional_number": _optional(_number),
}

# ---------------------------------------------------------------------------------------------- keys

_Key = tuple[str, ...]  # ("recovery", "scan_interval") or ("queues", "<name>", "zombie_timeout_seconds")
# Sections that are maps of a name (a queue, a job type) to a table of settings.
_MAPS: dict[str, type] = {
    "queues": QueueSettings,
    "circuits": CircuitOverride,
    "alert_receivers": AlertReceiverSettings,
    "alert_rules": AlertRuleSettings,
}

_SECTION_CLASSES: dict[str, type] = {
    name: cls for name, cls in get_type_hints(Settings).items() if name not in _MAPS
} | _MAPS
_FIELD_OF = {(s, f.name): f for s, cls in _SECTION_CLASSES.items() for f in fields(cls)}


def _norm(key: str) -> str:
    return key.lower().replace("_", "").replace("-", "")


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


# Per section: accepted name -> field. The extra names are the .NET options' names for the same field.
_NAMES: dict[str, dict[str, _Key]] = {
    s: {_pascal(f.name): (s, f.name) for f in fields(cls)} for s, cls in _SECTION_CLASSES.items()
}
_NAMES["storage"]["Database"] = ("storage", "url")
_NAMES["health"]["QueueLagDegradedThreshold"] = ("health", "queue_lag_degraded")
_NAMES["health"]["QueueLagUnhealthyThreshold"] = ("health", "queue_lag_unhealthy")
_NAMES["health"]["HorizonDegradedThreshold"] = ("health", "horizon_degraded")
# The original's CircuitPolicy spells its durations in seconds.
_NAMES["circuit"]["FailureWindowSeconds"] = ("circuit", "failure_window")
_NAMES["circuit"]["BreakDurationSeconds"] = ("circuit", "break_duration")
_NAMES["circuit"]["HalfOpenProbeTimeoutSeconds"] = ("circuit", "half_open_probe_timeout")
_NAMES["circuits"]["FailureWindowSeconds"] = ("circuits", "failure_window")
_NAMES["circuits"]["BreakDurationSeconds"] = ("circuits", "break_duration")
_NAMES["circuits"]["HalfOpenProbeTimeoutSeconds"] = ("circuits", "half_open_probe_timeout")
_NAMES["alert_rules"]["For"] = ("alert_rules", "pending_for")
_NAMES["sqlserver"] = {
    "CleanupBatchSize": ("storage", "cleanup_batch_size"),
    "MaxTransientRetries": ("storage", "max_transient_retries"),
    "PollingInterval": ("worker", "polling_interval"),
    "NoQueuesSleepInterval": ("worker", "no_queues_sleep_interval"),
    "WorkerShutdownGracePeriod": ("worker", "shutdown_grace_period"),
}
_FIELDS = {s: {_norm(n): key for n, key in names.items()} for s, names in _NAMES.items()}
_SECTION_NAMES = {s: _pascal(s) for s in _SECTION_CLASSES} | {"sqlserver": "SqlServer"}
# A written section name (any case, `_` or `-` ignored) -> the section: `AlertRules` is `alert_rules`.
_SECTION_OF = {_norm(s): s for s in _SECTION_NAMES}


def _section_of(written: str) -> str:
    return _SECTION_OF.get(_norm(written), _norm(written))


_TOP_ALIASES = {  # legacy flat names (file top level, CHOKAQ_<NAME>)
    "FetchedJobTimeoutSeconds": ("recovery", "fetched_job_timeout"),
    "ZombieTimeoutSeconds": ("recovery", "processing_zombie_timeout"),
    "MaxRetries": ("retry", "max_attempts"),
    "RetryDelaySeconds": ("retry", "base_delay"),
    "Database": ("storage", "url"),
    "Db": ("storage", "url"),
}
_TOP_FIELDS = {_norm(name): key for name, key in _TOP_ALIASES.items()}


def _display(key: _Key) -> str:
    if key[0] in _MAPS:
        return f"{_pascal(key[0])}.{key[1]}.{_pascal(key[2])}"
    return f"{_pascal(key[0])}.{_pascal(key[1])}"


def _unknown(written: list[str], candidates: list[str]) -> errors.ConfigError:
    key = ".".join(written)
    by_norm = {_norm(c.rsplit(".", 1)[-1]): c for c in candidates}
    close = difflib.get_close_matches(_norm(written[-1]), list(by_norm), n=1, cutoff=0.6)
    hint = f"; did you mean {by_norm[close[0]]!r}?" if close else ""
    return errors.ConfigError(f"unknown setting {key!r}{hint}", field=key)


def _resolve(parts: list[str]) -> tuple[_Key, bool] | None:
    """The field a written key names and whether the name is an alias; None if the key is not ours."""
    head = _section_of(parts[0])
    if len(parts) == 1:
        return (_TOP_FIELDS[head], True) if head in _TOP_FIELDS else None
    if head not in _FIELDS:
        return None
    if head in _MAPS:
        # The name may hold dots (a job type like "payments.charge.v1" in a dotted override key).
        if len(parts) >= 3:
            parts = [parts[0], ".".join(parts[1:-1]), parts[-1]]
        name_at = 2
    else:
        name_at = 1
    section = _SECTION_NAMES[head] + (f".{parts[1]}" if head in _MAPS else "")
    if len(parts) != name_at + 1 or _norm(parts[name_at]) not in _FIELDS[head]:
        raise _unknown(parts, [f"{section}.{name}" for name in _NAMES[head]])
    target = _FIELDS[head][_norm(parts[name_at])]
    if head in _MAPS:
        return (head, parts[1], target[1]), False
    return target, (head, _norm(parts[1])) != (target[0], _norm(target[1]))


# ---------------------------------------------------------------------------------------------- sources


class _Entry(NamedTuple):
    raw: object
    origin: str
    alias: bool


_Layer = dict[_Key, _Entry]


def _add(layer: _Layer, parts: list[str], raw: object, origin: str, strict: bool) -> None:
    resolved = _resolve(parts)
    if resolved is None:
        if strict:
            raise _unknown(parts, list(_SECTION_NAMES.values()) + list(_TOP_ALIASES))
        return
    key, alias = resolved
    # Within one source the canonical name wins over a legacy alias, whatever their order.
    if not (alias and key in layer and not layer[key].alias):
        layer[key] = _Entry(raw, origin, alias)


def _file_layer(path: Path) -> _Layer:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise errors.ConfigError(f"cannot read configuration file {path}: {exc}")
    # A [ChokaQ] table mirrors the .NET appsettings section; its contents win over bare top-level keys.
    wrappers = [k for k, v in data.items() if _norm(k) == "chokaq" and isinstance(v, dict)]
    items = [(k, v) for k, v in data.items() if k not in wrappers]
    items += [(k, v) for w in wrappers for k, v in data[w].items()]
    layer: _Layer = {}
    for top, value in items:
        head = _section_of(top)
        if head not in _FIELDS:
            _add(layer, [top], value, f"{path}: {top}", strict=True)
            continue
        if not isinstance(value, dict):
            raise errors.ConfigError(f"{path}: {top!r} must be a table", field=_SECTION_NAMES[head])
        for name, inner in value.items():
            if head not in _MAPS:
                _add(layer, [top, name], inner, f"{path}: {top}.{name}", strict=True)
                continue
            section = _SECTION_NAMES[head]
            if not isinstance(inner, dict):
                raise errors.ConfigError(f"{path}: {section}.{name} must be a table", field=section)
            for k, v in inner.items():
                _add(layer, [top, name, k], v, f"{path}: {top}.{name}.{k}", strict=True)
    return layer


def _env_layer(env: Mapping[str, str]) -> _Layer:
    layer: _Layer = {}
    for name, value in sorted(env.items()):
        if not name.upper().startswith("CHOKAQ_") or name.upper() == "CHOKAQ_CONFIG":
            continue
        # Other tools own CHOKAQ_API_URL, CHOKAQ_TEST_* ...: only sections (with `__`) and aliases are ours.
        _add(layer, name[len("CHOKAQ_") :].split("__"), value, name, strict=False)
    return layer


def _override_layer(overrides: Mapping[str, object]) -> _Layer:
    layer: _Layer = {}
    for key, value in overrides.items():
        if value is not None:  # an unset command-line flag
            _add(layer, key.split("."), value, f"override {key!r}", strict=True)
    return layer


def _merge(values: dict[_Key, Any], layer: _Layer, fold_queue_case: bool = False) -> None:
    for key, entry in layer.items():
        if fold_queue_case and key[0] == "queues":
            # Env names are upper case by habit: CHOKAQ_QUEUES__SMS__... means the file's "sms" (or "sms").
            known = {k[1].casefold(): k[1] for k in values if k[0] == "queues"}
            key = ("queues", known.get(key[1].casefold(), key[1].lower()), key[2])
        spec = _FIELD_OF[(key[0], key[-1])]
        try:
            values[key] = _CONVERTERS[spec.metadata.get("kind", spec.type)](entry.raw)
        except ValueError as exc:
            name = _display(key)
            raise errors.ConfigError(f"{name}: {exc} (from {entry.origin})", field=name)


def _flatten(settings: Settings) -> dict[_Key, Any]:
    values: dict[_Key, Any] = {}
    for section in _SECTION_CLASSES:
        if section not in _MAPS:
            obj = getattr(settings, section)
            values.update({(section, f.name): getattr(obj, f.name) for f in fields(obj)})
    for section in _MAPS:
        for name, q in getattr(settings, section).items():
            values.update({(section, name, f.name): getattr(q, f.name) for f in fields(q)})
    return values


def _build(values: Mapping[_Key, Any]) -> Settings:
    kwargs: dict[str, dict[str, Any]] = {s: {} for s in _SECTION_CLASSES}
    maps: dict[str, dict[str, dict[str, Any]]] = {m: {} for m in _MAPS}
    for key, value in values.items():
        if key[0] in _MAPS:
            maps[key[0]].setdefault(key[1], {})[key[2]] = value
        else:
            kwargs[key[0]][key[1]] = value
    sections: dict[str, Any] = {s: _SECTION_CLASSES[s](**kw) for s, kw in kwargs.items() if s not in _MAPS}
    built: dict[str, Any] = {m: {name: cls(**kw) for name, kw in maps[m].items()} for m, cls in _MAPS.items()}
    return Settings(**sections, **built)


def _config_path(config_file: str | os.PathLike[str] | None, env: Mapping[str, str]) -> Path | None:
    explicit = config_file if config_file is not None else env.get("CHOKAQ_CONFIG") or None
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise errors.ConfigError(f"configuration file not found: {path}")
        return path
    default = Path("chokaq.toml")
    if not default.is_file():
        return None
    _require_trusted(default)
    return default


def _require_trusted(path: Path) -> None:
    """`./chokaq.toml` is read without being named, from wherever a command starts: it must belong to the
    user running chokaq (or root) and be writable by nobody else, or a file planted in a shared directory
    could point the server at another database or handler modules. An explicit --config / CHOKAQ_CONFIG is
    the operator's own choice and is not second-guessed."""
    if not hasattr(os, "getuid"):
        return  # no POSIX owners (Windows)
    st = path.stat()
    if st.st_uid not in (os.getuid(), 0) or st.st_mode & 0o022:
        raise errors.ConfigError(
            f"refusing to read {path.resolve()}: it is owned by another user or writable by group/others; "
            "fix its owner and mode (chmod go-w), or name a configuration file with --config",
            field="config",
        )


def load_settings(
    config_file: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> Settings:
    """Defaults < TOML file < environment (`CHOKAQ_<SECTION>__<KEY>`) < overrides (dotted keys); validated."""
    env = os.environ if env is None else env
    values: dict[_Key, Any] = {}
    path = _config_path(config_file, env)
    if path is not None:
        _merge(values, _file_layer(path))
    _merge(values, _env_layer(env), fold_queue_case=True)
    _merge(values, _override_layer(overrides or {}))
    return _build(values).validate()
