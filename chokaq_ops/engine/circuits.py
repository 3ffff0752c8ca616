"""The circuit breaker per job type, worker side (docs/circuits.md).

The state lives in the database (`circuits`, one row per type, shared by every worker). This object
keeps a cached copy of the circuits that are not closed, re-read once per Circuit.RefreshInterval, and:

- `gate(runs)`: splits jobs about to start into those that may run and those an open circuit meets.
  A circuit past its break (or half-open with a free slot) gives out probe permits, asked for in one
  statement for every type of the batch; the met jobs are deferred by Retry.CircuitBreakerDelay
  without consuming an attempt.
- `record(kind, outcomes)`: after the completer wrote a group, counted failures (transient handler
  failures: not fatal ones, not timeouts by the job's own limit, not shutdowns or lost jobs) go to the
  database in one statement, and successes of half-open circuits in another.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from chokaq_ops.engine.execution import DEAD, OK, RETRY, Outcome, Run
from chokaq_ops.engine.handlers import CircuitPolicy, Handler, Registry
from chokaq_ops.engine.metrics import Metrics
from chokaq_ops.engine.serial_writes import SerialWrites
from chokaq_ops.settings import Settings
from chokaq_ops.storage import Store

log = logging.getLogger("chokaq.worker")

STATE_VALUE = {"closed": 0, "open": 1, "half_open": 2}


class Circuits:
    def __init__(
        self, store: Store, db: SerialWrites, settings: Settings, registry: Registry, metrics: Metrics
    ) -> None:
        self.store = store
        self.db = db
        self.settings = settings
        self.registry = registry
        self.metrics = metrics
        self._lock = threading.Lock()
        self._open: dict[str, dict[str, Any]] = {}  # type -> row (not closed), as last read
        self._read_at = float("-inf")
        self._seen: set[str] = set()  # types whose gauge this process exported

    # ------------------------------------------------------------------ policy

    def policy(self, type_key: str) -> dict[str, Any] | None:
        """The numbers for a type, or None when its handler turned the breaker off. Each number comes from
        `Circuits.<type>.*` in the configuration, else the handler's `@job(circuit=CircuitPolicy(...))`,
        else `Circuit.*`: an operator can tune one type without a deploy."""
        return _policy(self.settings, self.registry.get(type_key), type_key)

    # ------------------------------------------------------------------ the gate

    def refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._read_at < self.settings.circuit.refresh_interval:
            return
        try:
            rows = self.db.call(self.store.circuit_states)
        except Exception as exc:  # the gate keeps its last view; the claim loop reports database trouble
            log.warning("circuit states not read: %s", exc)
            return
        with self._lock:
            self._open = {r["type"]: r | {"_mono": now} for r in rows}
            self._read_at = now
        self._export(rows)

    def gate(self, runs: Sequence[Run]) -> tuple[list[Run], list[Run]]:
        """(may run, met by an open circuit)."""
        if not runs or not self.settings.circuit.enabled:
            return list(runs), []
        self.refresh()
        with self._lock:
            view = dict(self._open)
        if not view:
            return list(runs), []
        now = time.monotonic()
        allowed: list[Run] = []
        denied: list[Run] = []
        wants: dict[str, list[Run]] = {}
        probe_timeout: dict[str, Any] = {}
        for r in runs:
            row = view.get(r.type)
            policy = None if row is None else self.policy(r.type)
            if row is None or policy is None:
                allowed.append(r)
            elif row["state"] == "open" and (row["forced"] or _left(row, now) > 0):
                denied.append(r)
            else:  # open past its break, or half-open: a probe permit decides
                wants.setdefault(r.type, []).append(r)
                probe_timeout[r.type] = policy["probe_timeout_s"]
        if wants:
            items = [{"type": t, "probe_timeout_s": probe_timeout[t]} for t in sorted(wants)]
            try:
                granted = self.db.call(self.store.circuit_probe, items)
            except Exception as exc:
                log.warning("circuit probe permits not obtained (%s): deferring those jobs", exc)
                granted = set()
            for t, rs in wants.items():
                if t in granted:
                    allowed.append(rs[0])  # one probe per permit
                    denied.extend(rs[1:])
                    log.info("circuit half-open: probing with job_id=%s type=%s", rs[0].id, t)
                else:
                    denied.extend(rs)
            if granted:
                self.refresh(force=True)
        return allowed, denied

    # ------------------------------------------------------------------ outcomes

    def record(self, kind: str, items: Iterable[Outcome]) -> None:
        if not self.settings.circuit.enabled:
            return
        if kind == OK:
            with self._lock:
                watched = set(self._open)
            n = Counter(o.run.type for o in items if o.run.type in watched)
            if n:
                rows = self.db.call(
                    self.store.circuit_successes, [{"type": t, "n": k} for t, k in sorted(n.items())]
                )
                self._changed(rows)
            return
        if kind not in (RETRY, DEAD):
            return
        n = Counter(o.run.type for o in items if o.counts_for_circuit)
        payload = []
        for t, k in sorted(n.items()):
            p = self.policy(t)
            if p is not None:
                payload.append(
                    {
                        "type": t,
                        "n": k,
                        **{key: p[key] for key in ("threshold", "window_s", "break_s", "half_open")},
                    }
                )
        if payload:
            self._changed(self.db.call(self.store.circuit_failures, payload))

    def _changed(self, rows: list[dict[str, Any]]) -> None:
        now = time.monotonic()
        with self._lock:
            for r in rows:
                if r["state"] == "closed":
                    self._open.pop(r["type"], None)
                else:
                    self._open[r["type"]] = r | {"_mono": now}
        for r in rows:
            if r["state"] != r["prev_state"]:
                self.metrics.circuit_transitions.labels(self.metrics.type_label(r["type"]), r["state"]).inc()
                log.warning(
                    "circuit %s -> %s type=%s failures=%s",
                    r["prev_state"],
                    r["state"],
                    r["type"],
                    r["failures"],
                )
        self._export(rows, partial=True)

    def _export(self, rows: list[dict[str, Any]], partial: bool = False) -> None:
        gauge = self.metrics.circuit_state
        states = {r["type"]: STATE_VALUE[r["state"]] for r in rows}
        if not partial:
            for t in self._seen - set(states):
                gauge.labels(t).set(0)
        for t, v in states.items():
            label = self.metrics.type_label(t)
            gauge.labels(label).set(v)
            self._seen.add(label)


def _policy(settings: Settings, handler: Handler | None, type_key: str) -> dict[str, Any] | None:
    c = settings.circuit
    own = handler.circuit if handler is not None else True
    if not c.enabled or own is False:
        return None
    code = own if isinstance(own, CircuitPolicy) else CircuitPolicy()
    configured = settings.circuits.get(type_key)

    def pick(name: str) -> Any:
        for layer in (configured, code):
            value = getattr(layer, name, None) if layer is not None else None
            if value is not None:
                return value
        return getattr(c, name)

    return {
        "threshold": pick("failure_threshold"),
        "window_s": pick("failure_window"),
        "break_s": pick("break_duration"),
        "half_open": pick("half_open_max_calls"),
        "probe_timeout_s": pick("half_open_probe_timeout"),
    }


def _left(row: dict[str, Any], now: float) -> float:
    """Seconds of the break still to run, from the database's count when the row was read."""
    return (row.get("open_for_s") or 0.0) - (now - row["_mono"])
