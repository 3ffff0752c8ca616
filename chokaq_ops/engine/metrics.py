"""Prometheus metrics for one process: job counters and durations recorded by the worker, plus queue
depth and lag gauges read from the database when scraped (so they are right whoever did the work)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from chokaq_ops.storage import Store

log = logging.getLogger("chokaq.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OTHER = "other"


class LabelBudget:
    """Caps the distinct values of a label (job types are user data): later values become "other"."""

    def __init__(self, limit: int, max_len: int = 128) -> None:
        self.limit, self.max_len = limit, max_len
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str | None) -> str:
        value = (value or "unknown").strip()[: self.max_len] or "unknown"
        with self._lock:
            if value in self._seen:
                return value
            if len(self._seen) >= self.limit:
                return OTHER
            self._seen.add(value)
            return value


CLAIM_BUCKETS = (
    0.0005,
    0.001,
    0.002,
    0.003,
    0.005,
    0.0075,
    0.01,
    0.015,
    0.02,
    0.03,
    0.05,
    0.075,
    0.1,
    0.2,
    0.5,
    1.0,
    2.0,
    5.0,
)


class Metrics:
    def __init__(
        self,
        store: Store | None = None,
        registry: CollectorRegistry | None = None,
        *,
        worker_gone_s: float = 30.0,
    ) -> None:
        self.registry = registry or CollectorRegistry()
        self.queue_label = LabelBudget(100)
        self.type_label = LabelBudget(500)
        r = self.registry
        qt = ["queue", "type"]
        self.enqueued = Counter("chokaq_jobs_enqueued", "Jobs enqueued by this process.", qt, registry=r)
        self.started = Counter("chokaq_jobs_started", "Jobs whose handler started.", qt, registry=r)
        self.succeeded = Counter("chokaq_jobs_succeeded", "Jobs archived as succeeded.", qt, registry=r)
        self.failed = Counter(
            "chokaq_jobs_failed",
            "Jobs moved to the dead-letter queue, by reason.",
            [*qt, "reason"],
            registry=r,
        )
        self.retried = Counter(
            "chokaq_jobs_retried", "Failed executions scheduled for a retry.", qt, registry=r
        )
        self.heartbeat_failures = Counter(
            "chokaq_jobs_heartbeat_failures", "Heartbeat writes that failed, per running job.", qt, registry=r
        )
        self.heartbeat_degraded = Counter(
            "chokaq_jobs_heartbeat_degraded",
            "Times a running job reached Execution.HeartbeatFailureThreshold consecutive failed heartbeats.",
            qt,
            registry=r,
        )
        self.conflicts = Counter(
            "chokaq_jobs_state_transition_conflicts",
            "Worker transitions that changed nothing because the worker no longer owned the job.",
            ["transition"],
            registry=r,
        )
        self.rescue_recovered = Counter(
            "chokaq_rescue_recovered", "Abandoned fetched jobs returned to pending by the sweep.", registry=r
        )
        self.circuit_state = Gauge(
            "chokaq_circuit_state",
            "Circuit breaker of a job type as this process last saw it: 0 closed, 1 open, 2 half-open.",
            ["type"],
            registry=r,
        )
        self.circuit_transitions = Counter(
            "chokaq_circuit_transitions",
            "Circuit state changes this process caused, by the state entered.",
            ["type", "state"],
            registry=r,
        )
        self.circuit_deferred = Counter(
            "chokaq_circuit_deferred",
            "Jobs met by an open circuit and deferred by Retry.CircuitBreakerDelay (no attempt consumed).",
            ["type"],
            registry=r,
        )
        self.rescue_zombies = Counter(
            "chokaq_rescue_zombies", "Zombie jobs moved to the DLQ by the sweep.", registry=r
        )
        self.rescue_failures = Counter(
            "chokaq_rescue_failures", "Rescue sweeps that raised an error.", registry=r
        )
        self.rescue_held = Counter(
            "chokaq_rescue_zombie_phase_held",
            "Sweeps whose zombie phase waited for the database to be in sight long enough after an outage.",
            registry=r,
        )
        self.alerts_firing = Gauge(
            "chokaq_alerts_firing",
            "Firing alerts per rule, as this process's rule loop last saw them.",
            ["rule"],
            registry=r,
        )
        self.alert_evaluation_failures = Counter(
            "chokaq_alert_evaluation_failures",
            "Alert rule evaluations that failed (rule '-': the whole evaluation).",
            ["rule"],
            registry=r,
        )
        self.alert_notifications = Counter(
            "chokaq_alert_notifications",
            "Notifications the rule loop enqueued for delivery, by receiver and status (firing, resolved).",
            ["receiver", "status"],
            registry=r,
        )
        self.alert_deliveries = Counter(
            "chokaq_alert_deliveries",
            "Delivery attempts of notifications by this process's workers, by outcome (delivered, failed).",
            ["receiver", "outcome"],
            registry=r,
        )
        self.schedule_label = LabelBudget(200)
        self.schedule_jobs = Counter(
            "chokaq_schedule_jobs",
            "Jobs this process enqueued for schedule ticks; late: run by the misfire policy after the grace.",
            ["schedule", "late"],
            registry=r,
        )
        self.schedule_missed = Counter(
            "chokaq_schedule_missed_ticks",
            "Schedule ticks found past their grace that the misfire policy did not run (counted by the "
            "process that found them).",
            ["schedule"],
            registry=r,
        )
        self.duration = Histogram(
            "chokaq_job_duration_seconds",
            "Handler wall time.",
            qt,
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600),
            registry=r,
        )
        # Fine buckets around the claim's usual 1-20 ms: `chokaq bench soak` reads its p50/p99 from them.
        self.claim = Histogram(
            "chokaq_claim_seconds",
            "Time of one claim statement as this process's fetch loop saw it (round trip included).",
            buckets=CLAIM_BUCKETS,
            registry=r,
        )
        if store is not None:
            r.register(QueueCollector(store, worker_gone_s))
            r.register(HorizonCollector(store))

    def labels(self, queue: str | None, job_type: str | None) -> dict[str, str]:
        return {"queue": self.queue_label(queue), "type": self.type_label(job_type)}

    def schedule_fired(self, name: str, *, on_time: int, late: int, missed: int) -> None:
        label = self.schedule_label(name)
        if on_time:
            self.schedule_jobs.labels(schedule=label, late="false").inc(on_time)
        if late:
            self.schedule_jobs.labels(schedule=label, late="true").inc(late)
        if missed:
            self.schedule_missed.labels(schedule=label).inc(missed)

    def render(self) -> bytes:
        return generate_latest(self.registry)


# Queues shown by name on the gauges; the rest are summed into one "other" series, so a scrape stays
# small however many queues producers created (the API caps those at Api.MaxQueues, library users not).
MAX_QUEUE_SERIES = 100
_HOT = ("pending", "fetched", "processing")


def cap_queues(queues: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """The `limit` - 1 busiest queues by name and one "other" row summing the rest (lag: the worst)."""
    if len(queues) <= limit:
        return queues

    def load(q: dict[str, Any]) -> tuple[int, str]:
        return (-(sum(q[s] for s in _HOT) + q["failed_total"]), q["name"])

    ranked = sorted(queues, key=load)
    shown, rest = ranked[: limit - 1], ranked[limit - 1 :]
    other: dict[str, Any] = {"name": OTHER, "paused": any(q["paused"] for q in rest)}
    other |= {k: sum(q[k] for q in rest) for k in (*_HOT, "failed_total")}
    other["max_lag_seconds"] = max(q["max_lag_seconds"] for q in rest)
    return [*shown, other]


class QueueCollector(Collector):
    """Queue depth, lag and dead-letter counts, read from the database at scrape time."""

    def __init__(self, store: Store, worker_gone_s: float = 30.0) -> None:
        self.store = store
        self.worker_gone_s = worker_gone_s  # Health.WorkerHeartbeatTimeout: see Store.queue_stats

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily("chokaq_storage_up", "1 when the last scrape could read the database.")
        try:
            queues = self.store.queue_stats(worker_gone_s=self.worker_gone_s)
        except Exception as exc:  # a scrape must never fail because the database is down
            log.warning("metrics: cannot read queue stats: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        depth = GaugeMetricFamily(
            "chokaq_queue_jobs", "Hot jobs per queue and status.", labels=["queue", "status"]
        )
        lag = GaugeMetricFamily(
            "chokaq_queue_lag_seconds",
            "Age of the oldest due job no live worker runs, per queue (pending, or held by a dead worker).",
            labels=["queue"],
        )
        dead = GaugeMetricFamily(
            "chokaq_queue_dead_jobs", "Failed total per queue (DLQ size).", labels=["queue"]
        )
        paused = GaugeMetricFamily("chokaq_queue_paused", "1 when the queue is paused.", labels=["queue"])
        for q in cap_queues(queues, MAX_QUEUE_SERIES):
            for status in ("pending", "fetched", "processing"):
                depth.add_metric([q["name"], status], q[status])
            lag.add_metric([q["name"]], q["max_lag_seconds"])
            dead.add_metric([q["name"]], q["failed_total"])
            paused.add_metric([q["name"]], 1 if q["paused"] else 0)
        yield from (depth, lag, dead, paused)
        try:
            workers = self.store.list_registry()
        except Exception as exc:
            log.warning("metrics: cannot read the worker registry: %s", exc)
            return
        lost = GaugeMetricFamily(
            "chokaq_workers_lost",
            "Registered workers whose row is older than Health.WorkerHeartbeatTimeout (they died).",
        )
        lost.add_metric([], sum(1 for w in workers if w["seen_s"] >= self.worker_gone_s))
        live = GaugeMetricFamily("chokaq_workers_registered", "Workers with a registry row.")
        live.add_metric([], len(workers))
        yield from (lost, live)


class HorizonCollector(Collector):
    """What a held snapshot makes grow, read at scrape time (docs/endurance.md): the oldest snapshot's age
    and the churning tables' dead versions and size (PostgreSQL), the write-ahead log (SQLite)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            report = self.store.horizon()
            tables = self.store.run("queue_tables", write=False)
        except Exception as exc:  # a scrape must never fail because the database is down
            log.warning("metrics: cannot read the snapshot horizon: %s", exc)
            return
        held = GaugeMetricFamily(
            "chokaq_db_oldest_snapshot_seconds",
            "Age of the oldest snapshot or prepared transaction holding back vacuum (0: none).",
        )
        held.add_metric([], report.age_s())
        yield held
        dead = GaugeMetricFamily(
            "chokaq_db_table_dead_tuples", "Dead row versions per queue table.", labels=["table"]
        )
        size = GaugeMetricFamily("chokaq_db_table_bytes", "Size of each queue table.", labels=["table"])
        for t in tables:
            dead.add_metric([t["name"]], int(t["dead"] or 0))
            size.add_metric([t["name"]], int(t["bytes"] or 0))
        yield from (dead, size)
        if report.wal is not None:
            wal = GaugeMetricFamily("chokaq_sqlite_wal_bytes", "Size of the SQLite write-ahead log.")
            wal.add_metric([], report.wal["size_bytes"] or 0)
            pinned = GaugeMetricFamily(
                "chokaq_sqlite_wal_pinned_seconds",
                "How long a reader has kept the write-ahead log from being checkpointed (0: none).",
            )
            pinned.add_metric([], report.wal["pinned_seconds"])
            yield from (wal, pinned)
