"""The receivers and rules in force (docs/alerts.md): those of the configuration file (read-only) and
those made over the API or the CLI (stored), with one set of names. What the API, the CLI and the rule
loop read and change alerts through."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from chokaq_ops import errors, redact
from chokaq_ops.alert_config import configured
from chokaq_ops.alert_jobs import test_job
from chokaq_ops.alert_model import Receiver, Rule, check_name, make_rule
from chokaq_ops.models import Actor

if TYPE_CHECKING:
    from chokaq_ops.settings import Settings
    from chokaq_ops.storage import Store


class AlertCatalog:
    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings = settings
        self.store = store
        self._receivers, self._rules = configured(settings)

    # ------------------------------------------------------------------ reading

    def receivers(self) -> list[Receiver]:
        """Every receiver, the file's first; their URLs and secrets are masked in log lines from now on."""
        stored = [r for r in self.store.alert_receivers() if r.name not in self._receivers]
        out = [*self._receivers.values(), *stored]
        for r in out:
            redact.register_secret(r.url)
            if r.secret:
                redact.register_secret(r.secret)
        return sorted(out, key=lambda r: r.name)

    def rules(self) -> list[Rule]:
        stored = [r for r in self.store.alert_rules() if r.name not in self._rules]
        return sorted([*self._rules.values(), *stored], key=lambda r: r.name)

    def receiver(self, name: str) -> Receiver:
        for r in self.receivers():
            if r.name == name:
                return r
        raise errors.JobNotFound(f"no receiver named {check_name(name)}", field="name")

    def rule(self, name: str) -> Rule:
        for r in self.rules():
            if r.name == name:
                return r
        raise errors.JobNotFound(f"no rule named {check_name(name)}", field="name")

    # ------------------------------------------------------------------ changing (admins; audited)

    def _writable(self, name: str, kind: str, own: Mapping[str, Any]) -> None:
        if name in own:
            raise errors.Conflict(
                f"{kind} {name} is defined in the configuration file ([Alert{kind.capitalize()}s.{name}]); "
                "change it there",
                field="name",
            )

    def create_receiver(self, values: Mapping[str, Any], *, actor: Actor) -> Receiver:
        self._writable(str(values.get("name")), "receiver", self._receivers)
        return self.store.create_alert_receiver(values, actor=actor)

    def update_receiver(self, name: str, changes: Mapping[str, Any], *, actor: Actor) -> Receiver:
        self._writable(name, "receiver", self._receivers)
        return self.store.update_alert_receiver(name, changes, actor=actor)

    def delete_receiver(self, name: str, *, actor: Actor) -> None:
        self._writable(name, "receiver", self._receivers)
        used = [r.name for r in self._rules.values() if name in r.receivers]
        self.store.delete_alert_receiver(name, actor=actor, used_by=used)

    def create_rule(self, values: Mapping[str, Any], *, actor: Actor) -> Rule:
        self._writable(str(values.get("name")), "rule", self._rules)
        self._known_receivers(make_rule(values))
        return self.store.create_alert_rule(values, actor=actor)

    def update_rule(self, name: str, changes: Mapping[str, Any], *, actor: Actor) -> Rule:
        self._writable(name, "rule", self._rules)
        if "receivers" in changes:
            self._known_receivers(make_rule({**self.rule(name).view(), **changes, "name": name}))
        return self.store.update_alert_rule(name, changes, actor=actor)

    def delete_rule(self, name: str, *, actor: Actor) -> None:
        self._writable(name, "rule", self._rules)
        self.store.delete_alert_rule(name, actor=actor)

    def _known_receivers(self, rule: Rule) -> None:
        known = {r.name for r in self.receivers()}
        missing = [r for r in rule.receivers if r not in known]
        if missing:
            raise errors.ValidationError(
                f"receivers: no receiver named {', '.join(missing)}", field="receivers"
            )

    def test(self, name: str, *, actor: Actor) -> str:
        """Enqueue one test notification to receiver `name` (audited `alert_test`); the delivery job id."""
        receiver = self.receiver(name)
        return self.store.send_alert_test(receiver, test_job(receiver.name, self.settings), actor=actor)
