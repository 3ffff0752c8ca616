"""What each alert rule kind watches (docs/alerts.md): `evaluate(rule, ...)` returns the rule's active
alerts now, each a set of labels (its identity: one alert per distinct set), annotations (what a person
reads) and a value. Reads only; the rule loop (engine/alerting.py) keeps the state."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chokaq_ops.alert_model import KINDS, Rule
from chokaq_ops.models import FailureReason
from chokaq_ops.storage.horizon import SnapshotHolder, oldest_snapshot

if TYPE_CHECKING:
    from chokaq_ops.settings import Settings
    from chokaq_ops.storage import Store


@dataclass(frozen=True)
class Active:
    labels: dict[str, str]
    annotations: dict[str, str] = field(default_factory=dict)
    value: float | None = None


def evaluate(rule: Rule, store: Store, settings: Settings) -> list[Active]:
    spec = KINDS[rule.kind]
    threshold = rule.threshold if rule.threshold is not None else spec.threshold
    window = rule.window_s if rule.window_s is not None else spec.window_s
    found = _KINDS[rule.kind](rule, store, settings, threshold, window)
    base = {"alertname": rule.name, "severity": rule.severity}
    return [Active({**base, **a.labels}, a.annotations, a.value) for a in found]


def _minutes(seconds: float | None) -> str:
    s = float(seconds or 0)
    return f"{s / 60:g} min" if s >= 120 else f"{s:g} s"


def _dlq_growth(rule: Rule, store: Store, settings: Settings, threshold: Any, window: Any) -> list[Active]:
    by = rule.by or "fingerprint"
    rows = store.dead_groups(
        window_s=window, by=by, threshold=threshold, skip_queue=settings.alerts.queue, queues=rule.queues
    )
    return [
        Active(
            {by: r["key"]},
            {
                "summary": f"{int(r['n']):,} jobs dead-lettered in the last {_minutes(window)} "
                f"({by} {r['key']})",
                "description": f"last error: {r['sample'] or '-'}; queues: {r['queues']}; "
                f"types: {r['types']}",
                "queues": r["queues"] or "",
                "types": r["types"] or "",
            },
            float(r["n"]),
        )
        for r in rows
    ]


def _zombies(rule: Rule, store: Store, settings: Settings, threshold: Any, window: Any) -> list[Active]:
    rows = store.dead_groups(
        window_s=window,
        by="all",
        threshold=threshold,
        skip_queue=settings.alerts.queue,
        reasons=[int(FailureReason.Zombie)],
        queues=rule.queues,
    )
    return [
        Active(
            {},
            {
                "summary": f"{int(r['n']):,} zombies moved to the DLQ in the last {_minutes(window)}",
                "description": f"queues: {r['queues']}; workers: {r['workers']}; a human decides whether to "
                "resurrect them (chokaq dlq resurrect --reason Zombie)",
                "queues": r["queues"] or "",
            },
            float(r["n"]),
        )
        for r in rows
    ]


def _circuit_open(rule: Rule, store: Store, settings: Settings, threshold: Any, window: Any) -> list[Active]:
    return [
        Active(
            {"type": c["type"]},
            {
                "summary": f"circuit of {c['type']} is {c['state']}" + (" (forced)" if c["forced"] else ""),
                "description": f"{c['failures']} failures; jobs of this type are deferred until it closes",
            },
            float(c["failures"] or 0),
        )
        for c in store.circuit_states()
        if c["state"] != "closed"
    ]


def _queues(rule: Rule, store: Store, settings: Settings) -> list[dict[str, Any]]:
    queues = store.queue_stats(worker_gone_s=settings.health.worker_heartbeat_timeout)
    return [q for q in queues if not rule.queues or q["name"] in rule.queues]


def _queue_lag(rule: Rule, store: Store, settings: Settings, threshold: Any, window: Any) -> list[Active]:
    return [
        Active(
            {"queue": q["name"]},
            {"summary": f"queue {q['name']}: the oldest due job has waited {q['max_lag_seconds']:.0f} s"},
            float(q["max_lag_seconds"]),
        )
        for q in _queues(rule, store, settings)
        if q["name"] != settings.alerts.queue and (q["max_lag_seconds"] or 0) >= threshold
    ]


def _queue_depth(rule: Rule, store: Store, settings: Settings, threshold: Any, window: Any) -> list[Active]:
    return [
        Active(
            {"queue": q["name"]},
            {"summary": f"queue {q['name']}: {int(q['pending']):,} jobs pending"},
            float(q["pending"]),
        )
        for q in _queues(rule, store, settings)
        if (q["pending"] or 0) >= threshold
    ]


def _worker_lost(rule: Rule, store: Store, settings: Settings, threshold: Any, window: Any) -> list[Active]:
    gone = settings.health.worker_heartbeat_timeout
    return [
        Active(
            {"worker_id": w["worker_id"]},
            {
                "summary": f"worker {w['worker_id']} on {w['host']} (pid {w['pid']}) silent for "
                f"{w['seen_s']:.0f} s",
                "description": "its fetched jobs go back to pending at the next sweep; its running jobs "
                "reach the DLQ as Zombie after the zombie timeout",
                "host": str(w["host"]),
            },
            float(w["seen_s"]),
        )
        for w in store.list_registry()
        if w["seen_s"] >= gone
    ]


def describe_holder(h: SnapshotHolder) -> str:
    who = ", ".join(
        f"{k} {v}"
        for k, v in (("pid", h.pid), ("application", h.application), ("user", h.user), ("client", h.client))
        if v
    )
    return f"{who}; state {h.state}; {h.xid_age} transactions old; query: {(h.query or '-')[:120]}"


def _horizon_held(rule: Rule, store: Store, settings: Settings, threshold: Any, window: Any) -> list[Active]:
    holder = oldest_snapshot(store)
    if holder is None or holder.age_s < threshold:
        return []
    return [
        Active(
            {},
            {
                "summary": f"a session has held the oldest snapshot for {_minutes(holder.age_s)}",
                "description": describe_holder(holder),
            },
            holder.age_s,
        )
    ]


def _plan_halted(rule: Rule, store: Store, settings: Settings, threshold: Any, window: Any) -> list[Active]:
    out = []
    for p in store.halted_plans():
        try:
            reason = str(json.loads(p["details"] or "{}").get("reason") or "")
        except ValueError:
            reason = ""
        by = "canary" if "canary" in reason else "failure guard"
        out.append(
            Active(
                {"plan_id": p["plan_id"]},
                {
                    "summary": f"plan {p['plan_id']} ({p['action']}, {int(p['done']):,} of "
                    f"{int(p['total']):,} done) was halted by its {by}",
                    "description": reason[:500],
                    "label": p["label"] or "",
                },
                float(p["done"] or 0),
            )
        )
    return out


_KINDS: dict[str, Callable[[Rule, Any, Any, Any, Any], list[Active]]] = {
    "dlq_growth": _dlq_growth,
    "zombies": _zombies,
    "circuit_open": _circuit_open,
    "queue_lag": _queue_lag,
    "queue_depth": _queue_depth,
    "worker_lost": _worker_lost,
    "horizon_held": _horizon_held,
    "plan_halted": _plan_halted,
}
