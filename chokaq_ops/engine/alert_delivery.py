"""Notifications delivered through the queue itself (docs/alerts.md): a notification is a job of the
built-in type `chokaq.alert.deliver.v1` in queue Alerts.Queue, which every worker a Host runs registers
(engine/hosting.py). Its payload names the receiver and holds the notification (never the URL or the
secret, which the handler looks up when it sends: a rotated secret applies to pending retries).

Outcomes follow the worker's taxonomy: a 2xx answer succeeds; 408, 5xx and connection failures are
retried with the configured backoff (Retry.*) up to Alerts.DeliveryMaxAttempts, then dead-lettered as
MaxRetriesExceeded; 429 is retried after its Retry-After (Throttled); any other answer, or a receiver that
no longer exists, is Fatal (the receiver's configuration is wrong: retrying cannot help). No error text
holds the URL or the secret."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import requests

from chokaq_ops import errors
from chokaq_ops.alert_catalog import AlertCatalog
from chokaq_ops.alert_jobs import TYPE
from chokaq_ops.alert_payloads import DELIVERY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, body_bytes, sign
from chokaq_ops.engine.handlers import Handler, JobContext, Registry

if TYPE_CHECKING:
    from chokaq_ops.engine.metrics import Metrics
    from chokaq_ops.settings import Settings
    from chokaq_ops.storage import Store

log = logging.getLogger("chokaq.alerts")

USER_AGENT = "chokaq-alerts/1"


class DeliveryFailed(errors.ChokaqError):
    """A notification could not be delivered this time; the job is retried."""


class Deliverer:
    """The handler of TYPE: looks the receiver up, signs and posts the body."""

    def __init__(self, store: Store, settings: Settings, metrics: Metrics | None = None) -> None:
        self.catalog = AlertCatalog(settings, store)
        self.metrics = metrics

    def __call__(self, payload: Any, ctx: JobContext) -> None:
        if not isinstance(payload, dict) or not isinstance(payload.get("notification"), dict):
            raise errors.FatalJobError("not an alert delivery payload")
        name = str(payload.get("receiver"))
        try:
            receiver = self.catalog.receiver(name)
        except errors.JobNotFound:
            raise errors.FatalJobError(f"receiver {name} no longer exists") from None
        body = body_bytes(receiver.kind, payload["notification"])
        timestamp = int(time.time())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            TIMESTAMP_HEADER: str(timestamp),
            DELIVERY_HEADER: ctx.job_id,
        }
        if receiver.secret:
            headers[SIGNATURE_HEADER] = sign(receiver.secret, timestamp, body)
        try:
            answer = requests.post(
                receiver.url, data=body, headers=headers, timeout=receiver.timeout_s, allow_redirects=False
            )
        except requests.RequestException as exc:
            # The exception's text names the URL: only its class goes into the error.
            self._count(name, "failed")
            raise DeliveryFailed(f"receiver {name}: {type(exc).__name__} (attempt {ctx.attempt})") from None
        status = answer.status_code
        answer.close()
        if 200 <= status < 300:
            self._count(name, "delivered")
            log.info("alert delivered to receiver %s (HTTP %d, job %s)", name, status, ctx.job_id)
            return
        self._count(name, "failed")
        if status == 429:
            retry_after = _seconds(answer.headers.get("Retry-After"))
            raise errors.ThrottledError(f"receiver {name}: HTTP 429", retry_after=retry_after)
        if status == 408 or status >= 500:
            raise DeliveryFailed(f"receiver {name}: HTTP {status} (attempt {ctx.attempt})")
        raise errors.FatalJobError(f"receiver {name}: HTTP {status}; check the receiver's URL and secret")

    def _count(self, receiver: str, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.alert_deliveries.labels(receiver, outcome).inc()


def _seconds(value: str | None) -> float | None:
    try:
        return min(3600.0, max(0.0, float(value))) if value is not None else None
    except ValueError:
        return None


def register(registry: Registry, store: Store, settings: Settings, metrics: Metrics | None = None) -> None:
    """Register the delivery handler in a worker's registry (a Host does it for every worker it runs)."""
    # urllib3 logs each request line at DEBUG, path included; a Slack webhook's path is its secret.
    quiet = logging.getLogger("urllib3.connectionpool")
    if quiet.level == logging.NOTSET:
        quiet.setLevel(logging.INFO)
    registry.add_builtin(  # a Host built again in this process replaces the last one's
        Handler(
            TYPE,
            Deliverer(store, settings, metrics),
            timeout=150.0,  # above the longest receiver timeout (120 s)
            max_attempts=settings.alerts.delivery_max_attempts,
            circuit=False,  # one dead receiver must not stop the others' deliveries
        ),
        settings.alerts.queue,
    )
