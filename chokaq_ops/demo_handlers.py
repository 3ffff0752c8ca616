"""Handlers behind `chokaq demo`: a small shop whose jobs fail the ways real jobs fail.

Each payload carries an `outcome` the demo chose, so the history is reproducible, and the ids, amounts and
hosts a real system would put into its error messages, so error fingerprints have something to normalise.
Run them yourself with `chokaq worker --handlers chokaq_ops.demo_handlers`.
"""

from __future__ import annotations

import time
from typing import Any

from chokaq_ops import FatalJobError, JobContext, job


class GatewayTimeout(TimeoutError):
    """The payment gateway did not answer in time."""


class CardDeclined(FatalJobError):
    """The card was declined: retrying cannot help."""


class SmtpDisconnected(ConnectionError):
    """The mail relay dropped the connection."""


class SmtpRejected(ConnectionError):
    """The mail relay refused the message (a temporary error that did not pass)."""


def _pause(ctx: JobContext, seconds: float) -> None:
    """Work for `seconds`, stopping early when the worker cancels the job (timeout, shutdown)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ctx.check_cancelled()
        time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))


@job("demo.email.send.v1", idempotent=True)
def send_email(payload: dict[str, Any], ctx: JobContext) -> None:
    """Flaky relays drop the first attempt, and the retry goes through; a degraded relay refuses every one."""
    _pause(ctx, 0.01)
    if payload.get("outcome") == "relay_down":
        raise SmtpRejected(
            f"{payload['relay']} answered 421 4.7.0 Try again later while sending to {payload['to']}"
        )
    if payload.get("outcome") == "flaky" and ctx.attempt == 1:
        raise SmtpDisconnected(
            f"Connection unexpectedly closed by {payload['relay']} while sending to {payload['to']}"
        )


@job("demo.billing.charge.v1", max_attempts=3)
def charge(payload: dict[str, Any], ctx: JobContext) -> None:
    """Charges are not idempotent: a zombie charge may have taken the money already."""
    _pause(ctx, 0.01)
    outcome = payload.get("outcome")
    if outcome == "gateway_down":
        raise GatewayTimeout(
            f"payment gateway {payload['gateway']} did not answer within 30s (order {payload['order_id']})"
        )
    if outcome == "declined":
        raise CardDeclined(
            f"card ending {payload['card_last4']} declined for order {payload['order_id']} "
            f"(customer {payload['customer']})"
        )


@job("demo.report.render.v1", timeout=0.5)
def render_report(payload: dict[str, Any], ctx: JobContext) -> None:
    """Reports read a region's figures; a missing region is a bug in the data, a huge one times out."""
    outcome = payload.get("outcome")
    if outcome == "missing_region":
        figures: dict[str, float] = {"eu-west": 1.0}
        _total = figures[payload["region"]]
    if outcome == "too_slow":
        _pause(ctx, 5.0)  # the handler's timeout (0.5 s) ends it first: DLQ Timeout
    _pause(ctx, 0.01)


@job("demo.image.resize.v1", idempotent=True)
def resize_image(payload: dict[str, Any], ctx: JobContext) -> None:
    """Resizing is idempotent (same input, same output): zombies here are safe to run again."""
    _pause(ctx, float(payload.get("seconds", 0.02)))


@job("demo.billing.settle.v1")
def settle(payload: dict[str, Any], ctx: JobContext) -> None:
    """The nightly settlement moves money in many steps: a zombie here needs a human, not a retry."""
    _pause(ctx, float(payload.get("seconds", 0.05)))


@job("demo.webhook.deliver.v1")
def deliver_webhook(payload: dict[str, Any], ctx: JobContext) -> None:
    """Malformed payloads never reach this function: the worker fails them as Fatal when parsing."""
    _pause(ctx, 0.01)
