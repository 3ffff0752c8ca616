"""The alerts' storage (docs/alerts.md): receivers and rules made over the API or the CLI (each change
audited in its transaction, the secret and URL never in the audit row), the rule loop's state (active
alerts and notification groups), what the rules read, and one transaction per evaluation that writes the
new state together with the delivery jobs it decided to send."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from chokaq_ops import errors
from chokaq_ops.alert_model import STAMPS, Receiver, Rule, check_name, joined, make_receiver, make_rule
from chokaq_ops.models import Actor, NewJob
from chokaq_ops.storage.audit import audit_in, person
from chokaq_ops.storage.database import Database, Tx
from chokaq_ops.storage.producer import Producer

RECEIVER_FIELDS = ("kind", "url", "secret", "send_resolved", "timeout_s", "max_alerts")
RULE_FIELDS = (
    "kind",
    "receivers",
    "severity",
    "threshold",
    "window_s",
    "for_s",
    "repeat_interval_s",
    "group_by",
    "queues",
    "by",
    "inhibited_by",
    "inhibit_equal",
    "enabled",
)


def _audit_view(item: Receiver | Rule) -> dict[str, Any]:
    """A receiver or rule in an audit row: its view without the stamps (a receiver's has no URL path and
    no secret)."""
    return {k: v for k, v in item.view().items() if k not in STAMPS}


class AlertOps:
    def __init__(self, db: Database, producer: Producer) -> None:
        self.db = db
        self.producer = producer

    # ------------------------------------------------------------------ receivers

    def alert_receivers(self) -> list[Receiver]:
        """The receivers made over the API or the CLI, with their secrets (for the delivery only)."""
        return [_receiver(r) for r in self.db.run("alert_receivers_list", write=False)]

    def create_alert_receiver(self, values: Mapping[str, Any], *, actor: Actor) -> Receiver:
        actor = person(actor)
        receiver = make_receiver(values)

        def create(tx: Tx) -> None:
            if not tx.run("alert_receiver_insert", actor=actor.name, **_receiver_params(receiver)):
                raise errors.Conflict(f"a receiver named {receiver.name} exists already", field="name")
            audit_in(tx, actor, "alert_receiver_create", details={"after": _audit_view(receiver)})

        self.db.transaction(create)
        return self._stored_receiver(receiver.name)

    def update_alert_receiver(self, name: str, changes: Mapping[str, Any], *, actor: Actor) -> Receiver:
        """Change some fields; a field left out keeps its value (`secret` too: send it to rotate it)."""
        actor = person(actor)
        check_name(name)

        def update(tx: Tx) -> None:
            rows = tx.run("alert_receiver_lock", name=name)
            if not rows:
                raise errors.JobNotFound(f"no receiver named {name}", field="name")
            before = _receiver(rows[0])
            after = make_receiver({**_fields(before, RECEIVER_FIELDS), **changes, "name": name})
            tx.run("alert_receiver_write", actor=actor.name, **_receiver_params(after))
            details = {
                "before": _audit_view(before),
                "after": _audit_view(after),
                "url_changed": after.url != before.url,
                "secret_changed": after.secret != before.secret,
            }
            audit_in(tx, actor, "alert_receiver_update", details=details)

        self.db.transaction(update)
        return self._stored_receiver(name)

    def delete_alert_receiver(self, name: str, *, actor: Actor, used_by: Sequence[str] = ()) -> None:
        """Delete a receiver no rule names (`used_by`: rules of the configuration file naming it)."""
        actor = person(actor)
        check_name(name)

        def delete(tx: Tx) -> None:
            rows = tx.run("alert_receiver_lock", name=name)
            if not rows:
                raise errors.JobNotFound(f"no receiver named {name}", field="name")
            users = sorted(
                {*used_by, *(r["name"] for r in tx.run("alert_rules_list") if name in _split(r["receivers"]))}
            )
            if users:
                raise errors.Conflict(f"rules {', '.join(users)} send to receiver {name}", field="name")
            tx.run("alert_receiver_delete", name=name)
            audit_in(tx, actor, "alert_receiver_delete", details={"before": _audit_view(_receiver(rows[0]))})

        self.db.transaction(delete)

    def _stored_receiver(self, name: str) -> Receiver:
        for r in self.alert_receivers():
            if r.name == name:
                return r
        raise errors.JobNotFound(f"no receiver named {name}", field="name")

    # ------------------------------------------------------------------ rules

    def alert_rules(self) -> list[Rule]:
        return [_rule(r) for r in self.db.run("alert_rules_list", write=False)]

    def create_alert_rule(self, values: Mapping[str, Any], *, actor: Actor) -> Rule:
        actor = person(actor)
        rule = make_rule(values)

        def create(tx: Tx) -> None:
            if not tx.run("alert_rule_insert", actor=actor.name, **_rule_params(rule)):
                raise errors.Conflict(f"a rule named {rule.name} exists already", field="name")
            audit_in(tx, actor, "alert_rule_create", details={"after": _audit_view(rule)})

        self.db.transaction(create)
        return self._stored_rule(rule.name)

    def update_alert_rule(self, name: str, changes: Mapping[str, Any], *, actor: Actor) -> Rule:
        actor = person(actor)
        check_name(name)

        def update(tx: Tx) -> None:
            rows = tx.run("alert_rule_lock", name=name)
            if not rows:
                raise errors.JobNotFound(f"no rule named {name}", field="name")
            before = _rule(rows[0])
            after = make_rule({**_fields(before, RULE_FIELDS), **changes, "name": name})
            tx.run("alert_rule_write", actor=actor.name, **_rule_params(after))
            details = {"before": _audit_view(before), "after": _audit_view(after)}
            audit_in(tx, actor, "alert_rule_update", details=details)

        self.db.transaction(update)
        return self._stored_rule(name)

    def delete_alert_rule(self, name: str, *, actor: Actor) -> None:
        actor = person(actor)
        check_name(name)

        def delete(tx: Tx) -> None:
            rows = tx.run("alert_rule_lock", name=name)
            if not rows:
                raise errors.JobNotFound(f"no rule named {name}", field="name")
            tx.run("alert_rule_delete", name=name)
            audit_in(tx, actor, "alert_rule_delete", details={"before": _audit_view(_rule(rows[0]))})

        self.db.transaction(delete)

    def _stored_rule(self, name: str) -> Rule:
        for r in self.alert_rules():
            if r.name == name:
                return r
        raise errors.JobNotFound(f"no rule named {name}", field="name")

    # ------------------------------------------------------------------ a test notification

    def send_alert_test(self, receiver: Receiver, job: NewJob, *, actor: Actor) -> str:
        """Enqueue one test delivery to `receiver` with its audit row (`alert_test`) in one transaction;
        the delivery job's id."""
        actor = person(actor)

        def send(tx: Tx) -> str:
            [result] = self.producer.enqueue_in(tx, [job])
            audit_in(tx, actor, "alert_test", details={"receiver": receiver.name, "job_id": result.id})
            return result.id

        return self.db.transaction(send)

    # ------------------------------------------------------------------ the rule loop's state

    def alert_states(self) -> list[dict[str, Any]]:
        rows = self.db.run("alert_states", write=False)
        for r in rows:
            r["labels"], r["annotations"] = json.loads(r["labels"]), json.loads(r["annotations"])
        return rows

    def alert_groups(self) -> list[dict[str, Any]]:
        rows = self.db.run("alert_groups_list", write=False)
        for r in rows:
            r["group_labels"], r["sent_keys"] = json.loads(r["group_labels"]), json.loads(r["sent_keys"])
        return rows

    def save_alert_cycle(
        self,
        *,
        states: Sequence[Mapping[str, Any]],
        drop_states: Sequence[Mapping[str, Any]],
        groups: Sequence[Mapping[str, Any]],
        drop_groups: Sequence[Mapping[str, Any]],
        deliveries: Sequence[NewJob],
    ) -> list[str]:
        """One evaluation's outcome in one transaction: alert states and groups written or dropped, and the
        delivery jobs enqueued with them (a group's `last_sent_at` commits with its job, or neither)."""
        state_items = [
            self._times(s) | {"labels": _json(s["labels"]), "annotations": _json(s["annotations"])}
            for s in states
        ]
        group_items = [
            self._times(g) | {"group_labels": _json(g["group_labels"]), "sent_keys": _json(g["sent_keys"])}
            for g in groups
        ]

        def save(tx: Tx) -> list[str]:
            if state_items:
                tx.run("alert_state_upsert", items=state_items)
            if drop_states:
                tx.run(
                    "alert_state_delete",
                    items=[{"rule": s["rule"], "alert_key": s["alert_key"]} for s in drop_states],
                )
            if group_items:
                tx.run("alert_group_upsert", items=group_items)
            if drop_groups:
                keys = [{"receiver": g["receiver"], "group_key": g["group_key"]} for g in drop_groups]
                tx.run("alert_group_delete", items=keys)
            return [r.id for r in self.producer.enqueue_in(tx, deliveries)] if deliveries else []

        return self.db.transaction(save)

    def _times(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """Times in the dialect's stored form (SQLite compares them as text)."""
        return {k: self.db.format_time(v) if isinstance(v, datetime) else v for k, v in item.items()}

    # ------------------------------------------------------------------ what the rules read

    def dead_groups(
        self,
        *,
        window_s: float,
        by: str,
        threshold: float,
        skip_queue: str,
        reasons: Iterable[int] | None = None,
        queues: Iterable[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Dead-letterings of the last `window_s` seconds grouped by `by` (fingerprint, reason or all),
        groups of `threshold` or more."""
        return self.db.run(
            "alert_dead",
            write=False,
            window_s=float(window_s),
            by=by,
            threshold=float(threshold),
            skip_queue=skip_queue,
            reasons=list(reasons) if reasons is not None else None,
            queues=list(queues) if queues else None,
        )

    def halted_plans(self) -> list[dict[str, Any]]:
        return self.db.run("alert_plans_halted", write=False)


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def _split(text: str | None) -> tuple[str, ...]:
    return tuple(t for t in (text or "").split(",") if t)


def _fields(obj: Any, names: Sequence[str]) -> dict[str, Any]:
    return {n: getattr(obj, n) for n in names}


def _receiver(row: Mapping[str, Any]) -> Receiver:
    return Receiver(
        name=row["name"],
        kind=row["kind"],
        url=row["url"],
        secret=row["secret"],
        send_resolved=bool(row["send_resolved"]),
        timeout_s=float(row["timeout_s"]),
        max_alerts=int(row["max_alerts"]),
        source="api",
        created_at=row["created_at"],
        created_by=row["created_by"],
        updated_at=row["updated_at"],
        updated_by=row["updated_by"],
    )


def _receiver_params(r: Receiver) -> dict[str, Any]:
    return {
        "name": r.name,
        "kind": r.kind,
        "url": r.url,
        "secret": r.secret,
        "send_resolved": r.send_resolved,
        "timeout_s": r.timeout_s,
        "max_alerts": r.max_alerts,
    }


def _rule(row: Mapping[str, Any]) -> Rule:
    return Rule(
        name=row["name"],
        kind=row["kind"],
        receivers=_split(row["receivers"]),
        severity=row["severity"],
        threshold=row["threshold"],
        window_s=row["window_s"],
        for_s=float(row["for_s"] or 0.0),
        repeat_interval_s=row["repeat_interval_s"],
        group_by=_split(row["group_by"]) or ("alertname",),
        queues=_split(row["queues"]),
        by=row["by_label"],
        inhibited_by=_split(row["inhibited_by"]),
        inhibit_equal=_split(row["inhibit_equal"]),
        enabled=bool(row["enabled"]),
        source="api",
        created_at=row["created_at"],
        created_by=row["created_by"],
        updated_at=row["updated_at"],
        updated_by=row["updated_by"],
    )


def _rule_params(r: Rule) -> dict[str, Any]:
    return {
        "name": r.name,
        "kind": r.kind,
        "receivers": joined(r.receivers),
        "severity": r.severity,
        "threshold": r.threshold,
        "window_s": r.window_s,
        "for_s": r.for_s,
        "repeat_interval_s": r.repeat_interval_s,
        "group_by": joined(r.group_by),
        "queues": joined(r.queues),
        "by_label": r.by,
        "inhibited_by": joined(r.inhibited_by),
        "inhibit_equal": joined(r.inhibit_equal),
        "enabled": r.enabled,
    }
