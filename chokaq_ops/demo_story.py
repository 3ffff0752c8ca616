"""The story `chokaq demo` tells: when things happen in its history window, and the jobs of a small shop
that make them happen (handlers in chokaq_ops.demo_handlers). Kept apart from the command, which runs the
workers and moves the jobs into the history (chokaq_ops/cli/demo.py)."""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from chokaq_ops.models import NewJob

DEMO = "chokaq-demo"
# The workers that die, in the order they do.
MEDIA_1, MEDIA_2, BILLING = "demo-media-1", "demo-media-2", "demo-billing-1"


@dataclass
class Story:
    """When things happen in the history window [start, end] (epoch seconds, UTC)."""

    start: float
    end: float
    rng: random.Random

    def __post_init__(self) -> None:
        span = self.end - self.start
        self.flash_sale = self._clock(19, 30, days_back=1.3)  # an evening of orders and receipts
        self.outage = (self._clock(10, 0, days_back=1.9), 150 * 60)  # the payment gateway, 2.5 hours
        self.bad_producer = (self.start + 0.2 * span, self.start + 0.55 * span)  # malformed webhooks
        self.relay_worse = self.start + 0.5 * span  # mx-3 starts refusing mail, more and more
        self.deploy = self.end - min(20 * 3600, 0.3 * span)  # reports for new regions break
        self.incidents = {  # when each dead worker died
            MEDIA_1: self._clock(14, 10, days_back=1.6),
            BILLING: self._clock(2, 40, days_back=0.1),
            MEDIA_2: self.end - min(self.rng.uniform(3, 6) * 3600, 0.1 * span),  # within the last day
        }
        self.cancelled_at = self._clock(17, 45, days_back=0.9)  # an operator calls off the nightly reports

    def _clock(self, hour: int, minute: int, *, days_back: float) -> float:
        """The latest hour:minute UTC at least `days_back` days before the end; inside the window (a
        short --history gets the same events, squeezed in order)."""
        latest = self.end - days_back * 86_400
        day = datetime.fromtimestamp(latest, UTC).replace(hour=hour, minute=minute, second=0, microsecond=0)
        if day.timestamp() > latest:
            day -= timedelta(days=1)
        at = day.timestamp() + self.rng.uniform(0, 240)
        if at < self.start:  # history shorter than the story: keep the order, lose the clock
            at = self.end - (self.end - self.start) * min(days_back, 2.5) / 3
        return at

    def busy(self, t: float) -> float:
        """How busy the shop is at t (0-1): quiet nights, busy days, a lively evening (UTC)."""
        hour = datetime.fromtimestamp(t, UTC).hour + datetime.fromtimestamp(t, UTC).minute / 60
        day = 0.5 - 0.5 * math.cos((hour - 4) / 24 * 2 * math.pi)  # lowest at 04:00, highest at 16:00
        return 0.04 + 0.96 * day**2

    def arrival(self) -> float:
        if self.rng.random() < 0.12:  # the flash sale
            return min(self.end, max(self.start, self.rng.gauss(self.flash_sale + 1800, 900)))
        while True:
            t = self.start + self.rng.random() * (self.end - self.start)
            if self.rng.random() < self.busy(t):
                return t

    def share(self, t: float) -> float:
        return (t - self.start) / max(self.end - self.start, 1.0)


@dataclass
class JobMix:
    """The jobs to enqueue, each with the time it should end at in the history (epoch seconds)."""

    now: list[tuple[NewJob, float]] = field(default_factory=list)
    cancelled: list[NewJob] = field(default_factory=list)


class _Quota:
    """Deterministic shares: `take(p)` is true for round(sum of p) of the calls, spread evenly, so small
    demos still show each failure the story has and the same seed gives the same history."""

    def __init__(self) -> None:
        self.acc: dict[str, float] = {}

    def take(self, name: str, p: float) -> bool:
        if p <= 0:
            return False
        if name not in self.acc:  # the first chance counts: each outcome the story has shows at least once
            self.acc[name] = 0.5
        self.acc[name] += p
        if self.acc[name] >= 0.5:
            self.acc[name] -= 1.0
            return True
        return False


def make_jobs(n: int, story: Story) -> JobMix:
    """The shop's jobs at their times, and the scheduled reports an operator will cancel."""
    rng, quota, plan = story.rng, _Quota(), JobMix()
    relays = ["mx-1.mail.example.net", "mx-3.mail.example.net"]
    kinds = ["mail"] * 6 + ["billing"] * 5 + ["reports"] * 3 + ["webhooks"] * 3 + ["thumbnails"] * 3

    def add(t: float, queue: str, type_: str, payload: dict[str, Any] | str, **kw: Any) -> None:
        text = payload if isinstance(payload, str) else payload_json(payload)
        plan.now.append((NewJob(type=type_, queue=queue, payload=text, created_by=DEMO, **kw), t))

    for i, t in enumerate(sorted(story.arrival() for _ in range(n))):
        order = 10_000 + i * 7 + rng.randrange(7)
        sale = abs(t - story.flash_sale - 1800) < 3600
        kind = rng.choice(["mail", "billing"] if sale and rng.random() < 0.7 else kinds)
        if kind == "mail":
            relay = rng.choice(relays)
            worse = max(0.0, story.share(t) - story.share(story.relay_worse)) * 2  # 0 -> 1 at the end
            if relay == relays[1] and quota.take("relay", 0.05 + 0.35 * worse if worse else 0.0):
                outcome = "relay_down"
            else:
                outcome = "flaky" if quota.take("flaky", 0.15) else "ok"
            to = f"customer{rng.randrange(10_000)}@example.com"
            add(t, "email", "demo.email.send.v1", {"to": to, "relay": relay, "outcome": outcome})
        elif kind == "billing":
            down = 0 <= t - story.outage[0] <= story.outage[1]
            outcome = (
                "gateway_down"
                if quota.take("gateway", 0.7 if down else 0.01)
                else "declined"
                if quota.take("declined", 0.06)
                else "ok"
            )
            add(
                t,
                "billing",
                "demo.billing.charge.v1",
                {
                    "order_id": order,
                    "amount": round(rng.lognormvariate(3.8, 0.8), 2),
                    "gateway": "stripe-eu-2" if down else rng.choice(["stripe-eu-2", "adyen-1"]),
                    "card_last4": f"{rng.randrange(10_000):04d}",
                    "customer": f"cus_{rng.getrandbits(40):010x}",
                    "outcome": outcome,
                },
                tags="checkout,flash-sale" if sale else "checkout",
            )
        elif kind == "reports":
            broken = t >= story.deploy and quota.take("region", 0.4)
            outcome = "missing_region" if broken else "too_slow" if quota.take("slow", 0.06) else "ok"
            region = rng.choice(["apac-7", "us-east", "sa-2"]) if broken else "eu-west"
            add(
                t,
                "reports",
                "demo.report.render.v1",
                {"report_id": order, "region": region, "outcome": outcome},
            )
        elif kind == "webhooks":
            if story.bad_producer[0] <= t <= story.bad_producer[1] and quota.take("comma", 0.45):
                add(t, "webhooks", "demo.webhook.deliver.v1", f'{{"order_id": {order} "event": "paid"}}')
            else:
                add(t, "webhooks", "demo.webhook.deliver.v1", {"order_id": order, "event": "paid"})
        else:
            size = rng.choice(["256x256", "512x512", "1024x1024"])
            add(t, "thumbnails", "demo.image.resize.v1", {"image_id": order, "size": size, "seconds": 0.02})
    # The nightly settlement of the nights the billing host did not die (that one is added by the run).
    night = (
        datetime.fromtimestamp(story.end, UTC).replace(hour=2, minute=30, second=0, microsecond=0).timestamp()
    )
    while night >= story.start:
        if abs(night - story.incidents[BILLING]) > 12 * 3600 and night <= story.end:
            payload = {
                "batch": datetime.fromtimestamp(night, UTC).strftime("%Y-%m-%d-night"),
                "seconds": 0.05,
            }
            add(night + rng.uniform(0, 600), "billing", "demo.billing.settle.v1", payload)
        night -= 86_400
    plan.cancelled = [
        NewJob(
            type="demo.report.render.v1",
            queue="reports",
            payload=payload_json({"report_id": 80_000 + i, "region": "eu-west", "outcome": "ok"}),
            delay_seconds=3600,
            created_by=DEMO,
            tags="nightly",
        )
        for i in range(max(3, n // 100))
    ]
    return plan


def payload_json(value: Any) -> str:
    """JSON as a producer would write it (spaces after separators, as in the malformed payloads)."""
    return json.dumps(value, separators=(", ", ": "))
