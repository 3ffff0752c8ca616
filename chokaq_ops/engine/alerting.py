"""The rule loop of `chokaq serve` (docs/alerts.md): every Alerts.EvaluationInterval, under the database
lease "alerts" (one evaluator per interval across processes; the state lives in the database, so another
process takes over where the last one stopped), it

1. evaluates each enabled rule (engine/alert_rules.py); a rule that fails keeps its alerts as they were;
2. moves each alert through Prometheus' states: pending until it has held for the rule's `for`, then
   firing; an alert no longer found is resolved;
3. mutes firing alerts inhibited by a firing alert of a rule named in `inhibited_by` with the same values
   of the `inhibit_equal` labels (Alertmanager's inhibition);
4. groups alerts per receiver by the rule's `group_by` labels and decides, with Alertmanager's timings
   (group_wait, group_interval, repeat_interval), which groups to notify: firing alerts, and resolved ones
   for receivers with send_resolved;
5. writes the new state and the notifications in one transaction, each notification a job of the built-in
   type `chokaq.alert.deliver.v1` (engine/alert_delivery.py), delivered by any worker with retries and
   the DLQ. The loop never waits on HTTP.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from chokaq_ops.alert_catalog import AlertCatalog
from chokaq_ops.alert_jobs import delivery_job
from chokaq_ops.alert_model import Receiver, Rule
from chokaq_ops.alert_payloads import NEVER, notification
from chokaq_ops.engine.alert_rules import Active, evaluate
from chokaq_ops.engine.rescue import default_holder, lease_ttl

if TYPE_CHECKING:
    from chokaq_ops.engine.metrics import Metrics
    from chokaq_ops.models import NewJob
    from chokaq_ops.settings import Settings
    from chokaq_ops.storage import Store

log = logging.getLogger("chokaq.alerts")

LEASE = "alerts"


def alert_key(labels: Mapping[str, str]) -> str:
    """An alert's identity: a hash of its label set (Alertmanager's fingerprint)."""
    text = json.dumps(dict(sorted(labels.items())), separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _iso(at: datetime | None) -> str:
    return NEVER if at is None else at.isoformat().replace("+00:00", "Z")


@dataclass
class Cycle:
    """What one evaluation changes (saved in one transaction)."""

    states: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    drop_states: list[dict[str, Any]] = field(default_factory=list)
    groups: list[dict[str, Any]] = field(default_factory=list)
    drop_groups: list[dict[str, Any]] = field(default_factory=list)
    deliveries: list[NewJob] = field(default_factory=list)


class Alerter:
    def __init__(
        self, store: Store, settings: Settings, metrics: Metrics | None = None, holder: str | None = None
    ) -> None:
        self.store = store
        self.settings = settings
        self.metrics = metrics
        self.catalog = AlertCatalog(settings, store)
        self.holder = (holder or default_holder())[:100]
        self.evaluations = 0
        self.last_error: str | None = None
        self._lock = threading.Lock()

    def run(self) -> int | None:
        """One evaluation unless another process holds the lease (then None); the number of notifications
        enqueued. Without rules (and no alert state left from deleted ones) it writes nothing at all.
        Never raises: the schedule goes on."""
        try:
            if not self.catalog.rules() and not self.store.alert_states() and not self.store.alert_groups():
                return 0  # nothing configured, nothing left over: no lease, no write
            ttl = lease_ttl(self.settings.alerts.evaluation_interval)
            if not self.store.try_lease(LEASE, self.holder, ttl):
                return None
            return self.evaluate()
        except Exception as exc:
            self.last_error = str(exc)
            log.error("alert evaluation failed; the next one runs on schedule: %s", exc)
            if self.metrics is not None:
                self.metrics.alert_evaluation_failures.labels("-").inc()
            return None

    def evaluate(self) -> int:
        with self._lock:
            self.evaluations += 1
            rules = [r for r in self.catalog.rules() if r.enabled]
            receivers = {r.name: r for r in self.catalog.receivers()}
            found: dict[str, list[Active] | None] = {}
            for rule in rules:
                try:
                    found[rule.name] = evaluate(rule, self.store, self.settings)
                except Exception as exc:  # one failing rule keeps its alerts as they were
                    found[rule.name] = None
                    log.error("alert rule %s failed: %s", rule.name, exc)
                    if self.metrics is not None:
                        self.metrics.alert_evaluation_failures.labels(rule.name).inc()
            now = self.store.now()
            cycle = plan_cycle(
                now,
                rules,
                receivers,
                found,
                self.store.alert_states(),
                self.store.alert_groups(),
                self.settings,
            )
            self.store.save_alert_cycle(
                states=list(cycle.states.values()),
                drop_states=cycle.drop_states,
                groups=cycle.groups,
                drop_groups=cycle.drop_groups,
                deliveries=cycle.deliveries,
            )
            self._count(cycle)
            self.last_error = None
            return len(cycle.deliveries)

    def _count(self, cycle: Cycle) -> None:
        if self.metrics is None:
            return
        firing: dict[str, int] = {}
        for s in cycle.states.values():
            if s["status"] == "firing":
                firing[s["rule"]] = firing.get(s["rule"], 0) + 1
        for rule in self.catalog.rules():
            self.metrics.alerts_firing.labels(rule.name).set(firing.get(rule.name, 0))
        for job in cycle.deliveries:
            payload = json.loads(job.payload)
            self.metrics.alert_notifications.labels(
                payload["receiver"], payload["notification"]["status"]
            ).inc()


def plan_cycle(
    now: datetime,
    rules: list[Rule],
    receivers: Mapping[str, Receiver],
    found: Mapping[str, list[Active] | None],
    stored_states: Iterable[Mapping[str, Any]],
    stored_groups: Iterable[Mapping[str, Any]],
    settings: Settings,
) -> Cycle:
    """The state machine, pure: the new alert states and groups, and the notifications to send."""
    cycle = Cycle()
    by_name = {r.name: r for r in rules}
    states = {(s["rule"], s["alert_key"]): dict(s) for s in stored_states}
    # 1-2: alerts through pending -> firing -> resolved.
    for key, s in list(states.items()):
        if key[0] not in by_name:  # the rule was deleted or disabled: its alerts go without a message
            cycle.drop_states.append(s)
            del states[key]
    for rule in rules:
        active = found.get(rule.name)
        if active is None:
            continue
        seen = set()
        for alert in active:
            k = alert_key(alert.labels)
            seen.add(k)
            old = states.get((rule.name, k))
            st: dict[str, Any] = (
                old
                if old is not None and old["status"] != "resolved"
                else {"rule": rule.name, "alert_key": k, "status": "pending", "active_at": now,
                      "firing_at": None, "resolved_at": None}
            )  # fmt: skip
            if st["status"] == "pending" and (now - st["active_at"]).total_seconds() >= rule.for_s:
                st.update(status="firing", firing_at=now)
            st.update(labels=alert.labels, annotations=alert.annotations, value=alert.value)
            states[(rule.name, k)] = st
            cycle.states[(rule.name, k)] = st
        for (r, k), s in list(states.items()):
            if r != rule.name or k in seen:
                continue
            if s["status"] == "pending":
                cycle.drop_states.append(s)
                del states[(r, k)]
            elif s["status"] == "firing":
                s.update(status="resolved", resolved_at=now)
                cycle.states[(r, k)] = s
    # 3: inhibition.
    firing = [s for s in states.values() if s["status"] == "firing"]
    muted = {
        (s["rule"], s["alert_key"])
        for s in firing
        if any(
            t["rule"] in by_name[s["rule"]].inhibited_by
            and all(t["labels"].get(e) == s["labels"].get(e) for e in by_name[s["rule"]].inhibit_equal)
            for t in firing
        )
    }
    for s in states.values():
        s["inhibited"] = (s["rule"], s["alert_key"]) in muted
    # 4: groups per receiver.
    timings = settings.alerts
    old_groups = {(g["receiver"], g["group_key"]): dict(g) for g in stored_groups}
    kept: set[tuple[str, str]] = set()
    for rule in rules:
        members: dict[tuple[str, str], list[dict[str, Any]]] = {}
        labels_of: dict[tuple[str, str], dict[str, str]] = {}
        for (r, _), s in states.items():
            if r != rule.name:
                continue
            values = {g: s["labels"].get(g, "") for g in rule.group_by}
            for receiver in rule.receivers:
                gk = (receiver, group_key(receiver, rule.name, values))
                members.setdefault(gk, []).append(s)
                labels_of[gk] = values
        for gk in {*members, *(k for k, g in old_groups.items() if g["rule"] == rule.name)}:
            target = receivers.get(gk[0])
            if target is None:
                log.warning("alert rule %s names receiver %s, which does not exist", rule.name, gk[0])
                if gk in old_groups:
                    kept.add(gk)
                continue
            g = old_groups.get(gk) or {
                "receiver": gk[0], "group_key": gk[1], "rule": rule.name,
                "group_labels": labels_of.get(gk, {}), "sent_keys": [], "seq": 0, "created_at": now,
                "last_sent_at": None,
            }  # fmt: skip
            decide(g, members.get(gk, []), rule, target, now, timings, cycle)
            if g.get("_drop"):
                if gk in old_groups:
                    cycle.drop_groups.append(g)
            else:
                kept.add(gk)
                cycle.groups.append({k: v for k, v in g.items() if not k.startswith("_")})
    for gk, g in old_groups.items():
        if g["rule"] not in by_name and gk not in kept:
            cycle.drop_groups.append(g)
    # Resolved alerts are kept while a group still has them as sent (its resolve is not out yet).
    sent = {(g["rule"], k) for g in cycle.groups for k in g["sent_keys"]}
    for key, s in list(states.items()):
        if s["status"] == "resolved" and key not in sent:
            cycle.drop_states.append(s)
            cycle.states.pop(key, None)
    for s in cycle.states.values():
        s.pop("inhibited", None)
    return cycle


def group_key(receiver: str, rule: str, values: Mapping[str, str]) -> str:
    text = json.dumps([receiver, rule, sorted(values.items())], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def decide(
    g: dict[str, Any],
    members: list[dict[str, Any]],
    rule: Rule,
    receiver: Receiver,
    now: datetime,
    timings: Any,
    cycle: Cycle,
) -> None:
    """Alertmanager's flush decision for one group: notify after group_wait (new group), group_interval
    (changed group) or repeat_interval (unchanged, still firing)."""
    firing = sorted(s["alert_key"] for s in members if s["status"] == "firing" and not s["inhibited"])
    by_key = {s["alert_key"]: s for s in members}
    resolved = [
        k
        for k in g["sent_keys"]
        if k not in firing and (k not in by_key or by_key[k]["status"] == "resolved")
    ]
    last = g["last_sent_at"]
    since_created = (now - g["created_at"]).total_seconds()
    if last is None:
        if not firing:
            g["_drop"] = True
            return
        due = since_created >= timings.group_wait
    else:
        since = (now - last).total_seconds()
        changed = firing != sorted(g["sent_keys"])
        if not firing and not resolved:
            g["_drop"] = True  # every alert sent is muted now; nothing resolved to say
            return
        repeat = rule.repeat_interval_s if rule.repeat_interval_s is not None else timings.repeat_interval
        due = since >= timings.group_interval if changed else (bool(firing) and since >= repeat)
    if not due:
        return
    alerts = [_alert(by_key[k], "firing") for k in firing]
    if receiver.send_resolved:
        alerts += [_alert(by_key[k], "resolved") for k in resolved if k in by_key]
    g["seq"] += 1
    g["last_sent_at"] = now
    g["sent_keys"] = firing
    if alerts:
        note = notification(
            receiver=receiver.name,
            group_key=g["group_key"],
            group_labels=g["group_labels"],
            alerts=alerts,
            max_alerts=receiver.max_alerts,
            external_url=timings.external_url,
        )
        cycle.deliveries.append(
            delivery_job(receiver.name, note, f"{g['group_key']}:{g['seq']}", timings.queue)
        )
    if not firing:
        g["_drop"] = True


def _alert(s: Mapping[str, Any], status: str) -> dict[str, Any]:
    return {
        "status": status,
        "labels": dict(s["labels"]),
        "annotations": dict(s["annotations"]),
        "startsAt": _iso(s["firing_at"] or s["active_at"]),
        "endsAt": _iso(s["resolved_at"]) if status == "resolved" else NEVER,
        "generatorURL": "",
        "fingerprint": s["alert_key"][:16],
        "value": s.get("value"),
    }
