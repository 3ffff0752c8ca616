"""docs/prometheus/chokaq-rules.yml is a valid Prometheus rules file that names only metrics /metrics
exposes (docs/alerts.md, "With Alertmanager")."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

RULES = Path(__file__).resolve().parents[2] / "docs" / "prometheus" / "chokaq-rules.yml"
METRIC = re.compile(r"\bchokaq_[a-z_]+\b")


def exposed(client) -> set[str]:
    text = client.get("/metrics", role="reader").get_data(as_text=True)
    names = set()
    for line in text.splitlines():
        if line.startswith(("# HELP ", "# TYPE ")):
            names.add(line.split()[2])
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def test_the_rules_file_parses_and_names_only_exposed_metrics(client):
    doc = yaml.safe_load(RULES.read_text())
    [group] = doc["groups"]
    rules = group["rules"]
    assert len(rules) >= 10
    names = exposed(client)
    used = set()
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
        assert re.fullmatch(r"Chokaq[A-Za-z]+", rule["alert"])
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"]
        assert rule["expr"].count("(") == rule["expr"].count(")")
        metrics = set(METRIC.findall(rule["expr"]))
        assert metrics, rule["alert"]
        used |= metrics
    missing = used - names
    assert not missing, f"named in the rules file but not exposed by /metrics: {sorted(missing)}"
    for kind in ("jobs_failed", "rescue_zombies", "circuit_state", "queue_lag", "queue_jobs", "workers_lost"):
        assert any(kind in m for m in used), kind
