"""What a notification says and how it is signed (docs/alerts.md).

The generic webhook body is Alertmanager's webhook payload (version 4), so a receiver written for
Alertmanager reads chokaq's notifications unchanged; the Slack body is an incoming-webhook message built
from it. Every request carries

    X-Chokaq-Timestamp: <unix seconds when this attempt was sent>
    X-Chokaq-Signature: v1=<hex HMAC-SHA256 of "<timestamp>.<body bytes>" with the receiver's secret>
    X-Chokaq-Delivery: <the delivery job's id, the same on every retry: dedupe on it>

`verify` is what a receiver runs (docs/alerts.md has it as a standalone snippet)."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

SIGNATURE_HEADER = "X-Chokaq-Signature"
TIMESTAMP_HEADER = "X-Chokaq-Timestamp"
DELIVERY_HEADER = "X-Chokaq-Delivery"
VERSION = "4"
NEVER = "0001-01-01T00:00:00Z"  # Alertmanager's endsAt of a firing alert
EMOJI = {"firing": ":rotating_light:", "resolved": ":white_check_mark:"}


def sign(secret: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def verify(
    secret: str,
    timestamp: str,
    body: bytes,
    signature: str,
    *,
    tolerance_s: float = 300,
    now: float | None = None,
) -> bool:
    """True when `signature` is this body's and the timestamp is within `tolerance_s` of now (a replayed
    old request is refused)."""
    try:
        ts = int(timestamp)
    except (TypeError, ValueError):
        return False
    if abs((time.time() if now is None else now) - ts) > tolerance_s:
        return False
    return hmac.compare_digest(sign(secret, ts, body), signature)


def notification(
    *,
    receiver: str,
    group_key: str,
    group_labels: Mapping[str, str],
    alerts: Sequence[Mapping[str, Any]],
    max_alerts: int = 0,
    external_url: str = "",
) -> dict[str, Any]:
    """Alertmanager's webhook payload for one group. `alerts`: {status, labels, annotations, startsAt,
    endsAt, fingerprint}; firing first. `max_alerts` > 0 keeps that many (truncatedAlerts counts the rest)."""
    ordered = sorted(alerts, key=lambda a: (a["status"] != "firing", a["fingerprint"]))
    shown = list(ordered[:max_alerts]) if max_alerts else list(ordered)
    status = "firing" if any(a["status"] == "firing" for a in alerts) else "resolved"
    return {
        "version": VERSION,
        "groupKey": group_key,
        "truncatedAlerts": len(ordered) - len(shown),
        "status": status,
        "receiver": receiver,
        "groupLabels": dict(group_labels),
        "commonLabels": _common([a["labels"] for a in alerts]),
        "commonAnnotations": _common([a["annotations"] for a in alerts]),
        "externalURL": external_url,
        "alerts": shown,
    }


def _common(maps: Sequence[Mapping[str, str]]) -> dict[str, str]:
    if not maps:
        return {}
    first = dict(maps[0])
    return {k: v for k, v in first.items() if all(m.get(k) == v for m in maps[1:])}


def slack_body(note: Mapping[str, Any]) -> dict[str, Any]:
    """A Slack incoming-webhook message: a title line and one line per alert (summary, then labels)."""
    status = note["status"]
    name = note["commonLabels"].get("alertname") or note["groupLabels"].get("alertname") or "chokaq"
    firing = sum(1 for a in note["alerts"] if a["status"] == "firing")
    title = f"{EMOJI[status]} [{status.upper()}{f':{firing}' if firing else ''}] {name}"
    lines = [f"*{title}*"]
    for a in note["alerts"]:
        summary = a["annotations"].get("summary") or a["labels"].get("alertname", "")
        labels = ", ".join(f"{k}={v}" for k, v in sorted(a["labels"].items()) if k != "alertname")
        lines.append(
            f"• {'resolved: ' if a['status'] == 'resolved' else ''}{summary}"
            + (f" ({labels})" if labels else "")
        )
        if a["annotations"].get("description"):
            lines.append(f"  {a['annotations']['description']}")
    if note["truncatedAlerts"]:
        lines.append(f"… and {note['truncatedAlerts']} more")
    return {"text": "\n".join(lines)}


def body_bytes(kind: str, note: Mapping[str, Any]) -> bytes:
    """The exact bytes sent (and signed) for a receiver of `kind`."""
    payload = slack_body(note) if kind == "slack" else note
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
