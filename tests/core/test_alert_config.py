"""Alert receivers and rules in the configuration file (docs/alerts.md): checked at start with the key
named, secrets from the environment, and never in a repr or an error."""

from __future__ import annotations

import pytest

from chokaq_ops import errors
from chokaq_ops.alert_config import configured
from chokaq_ops.settings import load_settings

SECRET = "whsec-config-1234567890"


def write(tmp_path, text):
    path = tmp_path / "chokaq.toml"
    path.write_text(text)
    return path


def test_file_sections_and_environment(tmp_path):
    path = write(
        tmp_path,
        """
[Alerts]
EvaluationInterval = "15s"
RepeatInterval = "2h"
[AlertReceivers.ops]
Url = "https://hooks.example.com/x/y"
[AlertReceivers.chat]
Kind = "slack"
Url = "https://hooks.slack.com/services/T/B/Z"
SendResolved = false
[AlertRules.dead]
Kind = "dlq_growth"
Receivers = ["ops", "chat"]
Threshold = 25
Window = "15m"
For = "1m"
By = "reason"
""",
    )
    settings = load_settings(path, env={"CHOKAQ_ALERTRECEIVERS__ops__SECRET": SECRET})
    assert (settings.alerts.evaluation_interval, settings.alerts.repeat_interval) == (15, 7200)
    receivers, rules = configured(settings)
    assert receivers["ops"].secret == SECRET and receivers["chat"].kind == "slack"
    assert not receivers["chat"].send_resolved and receivers["chat"].secret is None
    dead = rules["dead"]
    assert (dead.threshold, dead.window_s, dead.for_s, dead.by, dead.receivers) == (
        25,
        900,
        60,
        "reason",
        ("ops", "chat"),
    )
    assert SECRET not in repr(settings) and "hooks.example.com" not in repr(settings)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[AlertRules.r]\nKind = "sometimes"\nReceivers = ["ops"]\n', "AlertRules.r.Kind"),
        ('[AlertRules.r]\nKind = "zombies"\n', "AlertRules.r.Receivers"),
        (
            '[AlertRules.r]\nKind = "zombies"\nReceivers = ["ops"]\nThreshold = "lots"\n',
            "AlertRules.r.Threshold",
        ),
        ('[AlertReceivers.ops]\nUrl = "https://h/x"\n', "AlertReceivers.ops.Secret"),
        (f'[AlertReceivers.ops]\nUrl = "gopher://h/x"\nSecret = "{SECRET}"\n', "AlertReceivers.ops.Url"),
        ('[AlertRules.r]\nKind = "zombies"\nReceivers = ["ops"]\nOften = 1\n', "AlertRules.r.Often"),
    ],
)
def test_a_bad_entry_stops_the_start_naming_its_key(tmp_path, text, key):
    with pytest.raises(errors.ConfigError) as exc:
        load_settings(write(tmp_path, text), env={})
    assert key in str(exc.value) and SECRET not in str(exc.value)
