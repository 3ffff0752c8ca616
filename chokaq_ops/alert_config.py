"""Receivers and rules of the configuration file (`[AlertReceivers.<name>]`, `[AlertRules.<name>]`) as
the same checked objects the API makes (chokaq_ops/alert_model.py); Settings.validate builds them once at
start, so a bad entry stops the process with the key named."""

from __future__ import annotations

from typing import Any

from chokaq_ops.alert_model import Receiver, Rule, make_receiver, make_rule

# Settings types are not named here: settings.py imports this module to validate its sections.


def config_receiver(name: str, item: Any) -> Receiver:
    """From an AlertReceiverSettings."""
    return make_receiver(
        {
            "name": name,
            "kind": item.kind,
            "url": item.url,
            "secret": item.secret,
            "send_resolved": item.send_resolved,
            "timeout_s": item.timeout,
            "max_alerts": item.max_alerts,
        },
        source="config",
    )


def config_rule(name: str, item: Any) -> Rule:
    """From an AlertRuleSettings."""
    return make_rule(
        {
            "name": name,
            "kind": item.kind,
            "receivers": list(item.receivers),
            "severity": item.severity,
            "threshold": item.threshold,
            "window_s": item.window,
            "for_s": item.pending_for,
            "repeat_interval_s": item.repeat_interval,
            "group_by": list(item.group_by),
            "queues": list(item.queues),
            "by": item.by,
            "inhibited_by": list(item.inhibited_by),
            "inhibit_equal": list(item.inhibit_equal),
            "enabled": item.enabled,
        },
        source="config",
    )


def configured(settings: Any) -> tuple[dict[str, Receiver], dict[str, Rule]]:
    """The file's receivers and rules by name."""
    receivers = {n: config_receiver(n, r) for n, r in settings.alert_receivers.items()}
    rules = {n: config_rule(n, r) for n, r in settings.alert_rules.items()}
    return receivers, rules
