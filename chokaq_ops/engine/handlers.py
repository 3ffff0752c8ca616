"""The user's side of the worker: `@job("type.key")` registers a handler, `JobContext` is what it gets.

```python
from chokaq_ops import job, JobContext

@job("email.send.v1", timeout=30, max_attempts=5, fatal=(InvalidAddress,))
def send_email(payload, ctx: JobContext):
    ...
```

A worker imports the modules named by `Worker.Handlers` (or `--handlers mod1,mod2`); importing them runs
the decorators, which register into the module-level `registry`. Tests and embedders build their own
`Registry()` and pass it to the worker, so nothing leaks between them.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from chokaq_ops import errors
from chokaq_ops.engine.cancellation import Cancellation
from chokaq_ops.schedules import Schedule

__all__ = [
    "CircuitPolicy",
    "Handler",
    "JobCancelled",
    "JobContext",
    "Producer",
    "Registry",
    "job",
    "load_handler_modules",
    "registry",
]

HandlerFn = Callable[[Any, "JobContext"], Any]


class JobCancelled(errors.ChokaqError):
    """The job was cancelled while it ran (timeout, lost lease, heartbeat failure or shutdown)."""

    def __init__(self, message: str | None = None, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class CircuitPolicy:
    """A job type's own circuit-breaker numbers (`@job(..., circuit=CircuitPolicy(failure_threshold=3))`);
    a field left None takes the `Circuit.*` setting. `@job(..., circuit=False)` turns the breaker off for
    the type."""

    failure_threshold: int | None = None
    failure_window: float | None = None
    break_duration: float | None = None
    half_open_max_calls: int | None = None
    half_open_probe_timeout: float | None = None

    def __post_init__(self) -> None:
        for name in ("failure_threshold", "half_open_max_calls"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise errors.ConfigError(f"circuit {name} must be 1 or more, got {value!r}", field=name)
        for name in ("failure_window", "break_duration", "half_open_probe_timeout"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
            ):
                raise errors.ConfigError(
                    f"circuit {name} must be positive seconds, got {value!r}", field=name
                )


@dataclass(frozen=True, slots=True)
class Handler:
    """A registered handler and its options. `None` options fall back to the configuration."""

    type: str
    fn: HandlerFn
    timeout: float | None = None  # seconds; else Queues.<q>.ExecutionTimeout, else Execution.DefaultTimeout
    max_attempts: int | None = None  # total executions; else Retry.MaxAttempts
    # (`builtins.type`: the field `type` above shadows the builtin in this class body.)
    fatal: tuple[builtins.type[BaseException], ...] = ()  # also fatal for this handler (DLQ Fatal, no retry)
    retry_on: tuple[builtins.type[BaseException], ...] = ()  # always retried, even when classified fatal
    idempotent: bool = False  # informs operators deciding whether resurrecting a zombie is safe
    circuit: CircuitPolicy | bool = True  # False: no circuit breaker for this type; a policy: its numbers
    schedules: tuple[Schedule, ...] = ()  # recurring schedules declared with the handler (docs/schedules.md)

    @property
    def name(self) -> str:
        fn = self.fn
        return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


@dataclass(eq=False, slots=True)
class JobContext:
    """What a running handler knows about its job, and how it learns it should stop.

    `cancelled` is set when the job's execution timeout passes, when the worker lost the job (a rescue
    sweep declared it a zombie), on a heartbeat failure with `Execution.CancelOnHeartbeatFailure`, and
    when a shutdown's grace period ends. Python cannot stop a thread from outside: long handlers should
    call `check_cancelled()` (or test `cancelled.is_set()`) between steps."""

    job_id: str
    attempt: int
    queue: str
    type: str
    worker_id: str = ""
    priority: int = 10
    tags: str | None = None
    max_attempts: int = 1
    timeout: float | None = None
    cancelled: threading.Event = field(default_factory=Cancellation)
    cancel_reason: str | None = None

    @property
    def is_last_attempt(self) -> bool:
        return self.attempt >= self.max_attempts

    def cancel(self, reason: str) -> None:
        if self.cancel_reason is None:
            self.cancel_reason = reason
        self.cancelled.set()

    def check_cancelled(self) -> None:
        """Raise JobCancelled if the job should stop."""
        if self.cancelled.is_set():
            reason = self.cancel_reason or "cancelled"
            raise JobCancelled(f"job {self.job_id} cancelled: {reason}", reason=reason)


class Producer:
    """`handler.enqueue(payload, ...)`: enqueue jobs of one handler's type.

    `using` is a client (``chokaq_ops.connect(...)``); without it, the process's default client, made
    once from the environment as ``connect()`` makes it (CHOKAQ_API_URL, else CHOKAQ_DB / the config
    file). The other arguments are those of the client's `enqueue`, `connection=` included."""

    def __init__(self, type_key: str) -> None:
        self.type = type_key

    def enqueue(self, payload: Any = None, *, using: Any = None, **options: Any) -> str:
        return (using or _default_client()).enqueue(self.type, payload, **options)

    def enqueue_many(
        self, payloads: Iterable[Any], *, using: Any = None, connection: Any = None, **options: Any
    ) -> list[str]:
        """One job per payload, every one with the same `options` (queue, priority, tags, delay...)."""
        jobs = [{**options, "type": self.type, "payload": p} for p in payloads]
        return (using or _default_client()).enqueue_many(jobs, connection=connection)


_default: list[Any] = []
_default_lock = threading.Lock()


def _default_client() -> Any:
    with _default_lock:
        if not _default:
            from chokaq_ops.client import connect

            _default.append(connect())
        return _default[0]


class Registry:
    """Job type -> Handler. Registering the same type twice with a different function is an error
    (two modules claiming one type key is a deployment bug); re-registering the same function, as a
    module reload does, replaces it."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}
        self._builtin: dict[str, str] = {}  # type -> queue of chokaq's own handlers (alert deliveries)
        self._lock = threading.Lock()

    def job(
        self,
        type_key: str,
        *,
        timeout: float | None = None,
        max_attempts: int | None = None,
        fatal: Iterable[type[BaseException]] = (),
        retry_on: Iterable[type[BaseException]] = (),
        idempotent: bool = False,
        circuit: CircuitPolicy | bool = True,
        schedule: str | None = None,
        tz: str = "UTC",
        schedules: Iterable[Schedule] = (),
    ) -> Callable[[HandlerFn], HandlerFn]:
        """Decorator registering `fn(payload, ctx)` as the handler of `type_key`."""
        spec = _options(type_key, timeout, max_attempts, fatal, retry_on)
        if not isinstance(circuit, bool | CircuitPolicy):
            raise errors.ConfigError(
                f"circuit must be True, False or a CircuitPolicy, got {circuit!r}", field="circuit"
            )
        declared = _schedules(spec[0], schedule, tz, schedules)

        def register(fn: HandlerFn) -> HandlerFn:
            if not callable(fn):
                raise errors.ConfigError(f"@job({type_key!r}) must decorate a function", field="type")
            self.add(
                Handler(spec[0], fn, spec[1], spec[2], spec[3], spec[4], bool(idempotent), circuit, declared)
            )
            # A callable that takes no attributes (a bound method) still registers; it just has no
            # `.enqueue` (Producer(type) gives the same). The ignores: a function's type has no such
            # attributes for mypy, though Python lets a function carry them.
            with contextlib.suppress(AttributeError, TypeError):
                fn.enqueue = Producer(spec[0]).enqueue  # type: ignore[attr-defined]
                fn.enqueue_many = Producer(spec[0]).enqueue_many  # type: ignore[attr-defined]
            return fn

        return register

    def add(self, handler: Handler) -> None:
        with self._lock:
            old = self._handlers.get(handler.type)
            if old is not None and _origin(old.fn) != _origin(handler.fn):
                raise errors.ConfigError(
                    f"job type {handler.type!r} is already handled by {old.name}; {handler.name} "
                    "cannot register it too",
                    field="type",
                )
            taken = {
                s.name: h for h in self._handlers.values() if h.type != handler.type for s in h.schedules
            }
            for declared in handler.schedules:
                if declared.name in taken:
                    raise errors.ConfigError(
                        f"schedule {declared.name!r} of {handler.name} is declared by "
                        f"{taken[declared.name].name} too: give one of them another name",
                        field="name",
                    )
            self._handlers[handler.type] = handler

    def add_builtin(self, handler: Handler, queue: str) -> None:
        """One of chokaq's own handlers, whose jobs live in `queue`: a worker with no handler of the user's
        claims from those queues only (engine/claiming.py)."""
        with self._lock:
            self._handlers[handler.type] = handler
            self._builtin[handler.type] = queue

    def has_user_handlers(self) -> bool:
        return len(self._handlers) > len(self._builtin)

    def builtin_queues(self) -> tuple[str, ...]:
        return tuple(sorted(set(self._builtin.values())))

    def get(self, type_key: str) -> Handler | None:
        return self._handlers.get(type_key)

    def __contains__(self, type_key: object) -> bool:
        return type_key in self._handlers

    def __len__(self) -> int:
        return len(self._handlers)

    def __iter__(self) -> Iterator[Handler]:
        return iter(list(self._handlers.values()))

    def types(self) -> list[str]:
        return sorted(self._handlers)

    def schedules(self) -> list[Schedule]:
        """The recurring schedules declared with the registered handlers (name and type filled in)."""
        return [s for h in self for s in h.schedules]

    def remove(self, type_key: str) -> None:
        with self._lock:
            self._handlers.pop(type_key, None)
            self._builtin.pop(type_key, None)


def _schedules(type_key: str, schedule: Any, tz: Any, schedules: Iterable[Schedule]) -> tuple[Schedule, ...]:
    """`schedule=` (a cron expression, with `tz=`) and `schedules=` of one handler, bound to its type."""
    items = list(schedules)
    if not all(isinstance(s, Schedule) for s in items):
        raise errors.ConfigError("schedules must be a list of chokaq_ops.Schedule", field="schedules")
    if schedule is not None:
        items.insert(0, Schedule(schedule, tz=tz))
    elif tz != "UTC":
        raise errors.ConfigError("tz= is the time zone of schedule=; give schedule= too", field="tz")
    bound = tuple(s.bound(type_key) for s in items)
    names = [s.name or "" for s in bound]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise errors.ConfigError(
            f"@job({type_key!r}) declares schedule {twice[0]!r} twice: name each one (Schedule(name=...))",
            field="name",
        )
    return bound


def _origin(fn: Any) -> tuple[str, str]:
    return getattr(fn, "__module__", ""), getattr(fn, "__qualname__", repr(fn))


def _options(
    type_key: Any,
    timeout: Any,
    max_attempts: Any,
    fatal: Iterable[Any],
    retry_on: Iterable[Any],
) -> tuple[str, float | None, int | None, tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    if not isinstance(type_key, str) or not type_key.strip() or len(type_key.strip()) > 255:
        raise errors.ConfigError(f"job type must be 1-255 characters, got {type_key!r}", field="type")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)):
        raise errors.ConfigError(f"timeout must be seconds, got {timeout!r}", field="timeout")
    if timeout is not None and timeout <= 0:
        raise errors.ConfigError(f"timeout must be positive, got {timeout!r}", field="timeout")
    if max_attempts is not None and (
        isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1
    ):
        problem = f"max_attempts must be 1 or more, got {max_attempts!r}"
        raise errors.ConfigError(problem, field="max_attempts")
    classes = []
    for name, group in (("fatal", fatal), ("retry_on", retry_on)):
        items = (group,) if isinstance(group, type) else tuple(group)
        if not all(isinstance(c, type) and issubclass(c, BaseException) for c in items):
            raise errors.ConfigError(f"{name} must be exception classes, got {items!r}", field=name)
        classes.append(items)
    return type_key.strip(), None if timeout is None else float(timeout), max_attempts, classes[0], classes[1]


registry = Registry()
"""The default registry `@job` writes to and `chokaq worker` reads."""


def job(
    type_key: str,
    *,
    timeout: float | None = None,
    max_attempts: int | None = None,
    fatal: Iterable[type[BaseException]] = (),
    retry_on: Iterable[type[BaseException]] = (),
    idempotent: bool = False,
    circuit: CircuitPolicy | bool = True,
    schedule: str | None = None,
    tz: str = "UTC",
    schedules: Iterable[Schedule] = (),
) -> Callable[[HandlerFn], HandlerFn]:
    """Register a handler in the default registry; see `Registry.job`.

    - `timeout`: seconds before the job is cancelled and dead-lettered as Timeout.
    - `max_attempts`: total executions before MaxRetriesExceeded (overrides Retry.MaxAttempts).
    - `fatal`: exception classes that go straight to the DLQ as Fatal.
    - `retry_on`: exception classes always retried, even those classified fatal (e.g. a library that
      raises ValueError for a transient condition).
    - `idempotent`: declares that running the job twice is safe (shown to operators reviewing zombies).
    - `circuit`: the type's circuit breaker (docs/circuits.md): a `CircuitPolicy` with its own numbers,
      or False to run the type without one.
    - `schedule`: a cron expression: a job of this type (payload `{}`) at each tick, in the time zone
      `tz` (default UTC), named after the type; `schedules`: a list of `Schedule` declarations with their
      own names, payloads and misfire policies (docs/schedules.md).
    """
    return registry.job(
        type_key,
        timeout=timeout,
        max_attempts=max_attempts,
        fatal=fatal,
        retry_on=retry_on,
        idempotent=idempotent,
        circuit=circuit,
        schedule=schedule,
        tz=tz,
        schedules=schedules,
    )


def load_handler_modules(names: str | Sequence[str]) -> list[str]:
    """Import the modules holding handlers (`Worker.Handlers`, `--handlers mod1,mod2`). A module that
    cannot be imported is a configuration error naming it.

    The current directory is importable, but searched last: appended to `sys.path` as an absolute path,
    never put first. A file in the directory the server happens to start from (`json.py`, `flask.py`,
    `chokaq_ops/`) therefore cannot shadow the standard library, chokaq or an installed package, and a
    later `chdir` does not change what is imported. Install handler packages, or set PYTHONPATH, to be
    explicit."""
    wanted = [n.strip() for n in (names.split(",") if isinstance(names, str) else names) if n.strip()]
    here = os.getcwd()
    if wanted and here not in sys.path:
        sys.path.append(here)
    loaded = []
    for name in wanted:
        try:
            importlib.import_module(name)
        except Exception as exc:
            raise errors.ConfigError(
                f"Worker.Handlers: cannot import handler module {name!r}: {type(exc).__name__}: {exc}",
                field="Worker.Handlers",
            ) from exc
        loaded.append(name)
    return loaded
