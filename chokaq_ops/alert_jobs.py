"""The delivery jobs of notifications (docs/alerts.md): type, queue, priority, payload. The rule loop and
`alerts test` make them; engine/alert_delivery.py runs them."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from chokaq_ops.alert_payloads import NEVER, notification
from chokaq_ops.models import NewJob

if TYPE_CHECKING:
    from chokaq_ops.settings import Settings

TYPE = "chokaq.alert.deliver.v1"
PRIORITY = 100  # ahead of a backlog: a queue-lag alert must not wait behind the lag it reports


def delivery_job(receiver: str, note: dict[str, Any], key: str, queue: str) -> NewJob:
    """The job that delivers `note` to `receiver`; `key` makes a repeated enqueue of the same message (a
    second evaluator after a lost reply) a duplicate while the first is still hot."""
    return NewJob(
        type=TYPE,
        queue=queue,
        payload=json.dumps({"receiver": receiver, "notification": note}, separators=(",", ":")),
        priority=PRIORITY,
        tags="alert",
        idempotency_key=f"alert:{receiver}:{key}"[:255],
    )


def test_job(receiver: str, settings: Settings) -> NewJob:
    """One firing test alert for `chokaq alerts test` / POST /alerts/receivers/{name}/test."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    alert = {
        "status": "firing",
        "labels": {"alertname": "chokaq_test", "severity": "info"},
        "annotations": {"summary": f"a test notification to receiver {receiver}"},
        "startsAt": now,
        "endsAt": NEVER,
        "generatorURL": "",
        "fingerprint": "0000000000000000",
    }
    note = notification(
        receiver=receiver,
        group_key="test",
        group_labels={"alertname": "chokaq_test"},
        alerts=[alert],
        external_url=settings.alerts.external_url,
    )
    return NewJob(
        type=TYPE,
        queue=settings.alerts.queue,
        payload=json.dumps({"receiver": receiver, "notification": note}, separators=(",", ":")),
        priority=PRIORITY,
        tags="alert,test",
    )
