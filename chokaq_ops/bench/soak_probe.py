"""What `chokaq bench soak` reads each interval: outcomes, table health, the horizon, lock waits, the WAL,
and the worker's claim histogram (scraped from its /metrics)."""

from __future__ import annotations

import os
import threading
import urllib.request
from typing import Any

from chokaq_ops.bench.harness import percentile
from chokaq_ops.storage import Store

CLAIM_METRIC = "chokaq_claim_seconds"


class LockWaits:
    """Samples the sessions waiting for a lock every 250 ms; `take()` returns the waits seen since the
    last call (ms each: how long the waiting statement had been running when seen)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._ms: list[float] = []

    def sample(self) -> None:
        try:
            rows = self.store.run("bench_soak_lock_waits", write=False)
        except Exception:
            return
        with self._lock:
            self._ms.extend(float(r["ms"]) for r in rows if r["ms"] is not None)

    def take(self) -> list[float]:
        with self._lock:
            ms, self._ms = self._ms, []
        return ms


def table_health(store: Store) -> dict[str, Any]:
    """jobs_hot's dead versions, live rows and bytes (PostgreSQL), or the database file's bytes (SQLite),
    and the dead versions of every queue table summed."""
    rows = store.run("bench_soak_tables", write=False)
    hot = next((r for r in rows if r["name"] in ("jobs_hot", "database")), None)
    return {
        "hot_dead_tuples": None if hot is None else _int(hot["dead"]),
        "hot_live_tuples": None if hot is None else _int(hot["live"]),
        "hot_bytes": None if hot is None else _int(hot["bytes"]),
        "queue_tables_dead_tuples": sum(_int(r["dead"]) or 0 for r in rows),
    }


def horizon_age(store: Store) -> float | None:
    value = store.run("bench_soak_horizon", write=False)[0]["age_s"]
    return None if value is None else round(float(value), 1)


def wal_bytes(store: Store) -> int | None:
    """Size of the SQLite write-ahead log (None on PostgreSQL, or before the file exists)."""
    path = getattr(store.dialect, "path", None)
    if not path:
        return None
    try:
        return os.path.getsize(f"{path}-wal")
    except OSError:
        return 0


class ClaimHistogram:
    """The worker's `chokaq_claim_seconds` buckets; `interval()` gives count, p50 and p99 (ms) of the
    claims since the last call, interpolated within buckets as Prometheus' histogram_quantile does."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._last: dict[float, float] | None = None

    def _scrape(self) -> dict[float, float] | None:
        from prometheus_client.parser import text_string_to_metric_families

        try:
            with urllib.request.urlopen(self.url, timeout=5) as resp:
                text = resp.read().decode("utf-8")
        except OSError:
            return None
        buckets: dict[float, float] = {}
        for family in text_string_to_metric_families(text):
            if family.name != CLAIM_METRIC:
                continue
            for sample in family.samples:
                if sample.name.endswith("_bucket"):
                    le = float(sample.labels["le"])
                    buckets[le] = buckets.get(le, 0.0) + float(sample.value)
        return buckets or None

    def interval(self) -> dict[str, Any]:
        now = self._scrape()
        last, self._last = self._last, now
        if now is None:
            return {"claims": None, "claim_p50_ms": None, "claim_p99_ms": None}
        delta = {le: now[le] - (last or {}).get(le, 0.0) for le in now}
        total = delta.get(float("inf"), 0.0)
        return {
            "claims": int(total),
            "claim_p50_ms": quantile_ms(delta, 0.50),
            "claim_p99_ms": quantile_ms(delta, 0.99),
        }


def quantile_ms(cumulative: dict[float, float], q: float) -> float | None:
    """The q-quantile (ms) of cumulative histogram buckets {upper bound s: count}, linear within a bucket."""
    bounds = sorted(cumulative)
    total = cumulative.get(float("inf"), 0.0) if bounds else 0.0
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for le in bounds:
        count = cumulative[le]
        if count >= rank:
            if le == float("inf"):
                return round(lower * 1000.0, 2)
            inside = count - below
            fraction = 0.0 if inside <= 0 else (rank - below) / inside
            return round((lower + (le - lower) * fraction) * 1000.0, 2)
        lower, below = le, count
    return round(lower * 1000.0, 2)


def p99(values: list[float]) -> float | None:
    return round(percentile(values, 99), 2) if values else None


def _int(value: Any) -> int | None:
    return None if value is None else int(value)
