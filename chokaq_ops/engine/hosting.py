"""Hosting: the one module that owns APScheduler. A Host runs, in one process, any of

- a Worker (its threads) plus its heartbeat: one jittered interval job per worker, every
  (HeartbeatIntervalMin + HeartbeatIntervalMax) / 2 seconds with a jitter of half their difference
  (8-12 s by default), refreshing every job the worker owns in one statement;
- the rescue sweep every Recovery.ScanInterval (first run at start: a restarted fleet cleans up at once);
- retention every Retention.Interval (first run a minute after start, or sooner for short intervals);
- with the rescue sweep, on PostgreSQL: the counter deltas of finished transactions folded into the
  queues' totals every COUNTER_FOLD_S, and the upkeep of the churning tables every UPKEEP_INTERVAL_S
  (engine/upkeep.py); on SQLite the write-ahead log kept small every KEEP_INTERVAL_S (storage/wal.py;
  docs/endurance.md);
- with `run_alerts` (`chokaq serve`), the alert rule loop every Alerts.EvaluationInterval
  (engine/alerting.py); every worker a Host runs also delivers notifications (engine/alert_delivery.py).
- the schedule check every Schedules.CheckInterval (engine/scheduling.py; first run at start, after
  writing the schedules the handler modules declare).

`chokaq worker` runs a Host blocking (`run_forever`, stopping gracefully on SIGTERM/SIGINT); `chokaq serve`
starts one in the background next to the API. Nothing starts at import time: only `start()` does.
Rescue and retention take a database lease, so many hosts may run them and one does the work per interval;
the schedule check needs none (one transaction per tick wins).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from chokaq_ops.engine import alert_delivery, handlers
from chokaq_ops.engine.alerting import Alerter
from chokaq_ops.engine.handlers import Registry, load_handler_modules
from chokaq_ops.engine.metrics import Metrics
from chokaq_ops.engine.rescue import PROBE_INTERVAL_S, DbWatch, Rescuer, default_holder
from chokaq_ops.engine.retention import Retention
from chokaq_ops.engine.scheduling import ScheduleChecker
from chokaq_ops.engine.upkeep import UPKEEP_INTERVAL_S, Upkeep
from chokaq_ops.engine.worker import Worker
from chokaq_ops.settings import Settings
from chokaq_ops.storage.wal import KEEP_INTERVAL_S

if TYPE_CHECKING:
    from chokaq_ops.storage import Store

log = logging.getLogger("chokaq.hosting")

# How often the counter deltas are folded (Store.fold_counters). Readers add what is not folded yet, so
# this bounds how many delta rows a counter read sums, not whether it is right.
COUNTER_FOLD_S = 10.0


def heartbeat_trigger(low: float, high: float) -> Any:
    """Heartbeats every `low` to `high` seconds, uniformly spread (Execution.HeartbeatIntervalMin/Max):
    APScheduler's jitter only adds (0..jitter) to the interval, so the interval is the minimum."""
    from apscheduler.triggers.interval import IntervalTrigger

    return IntervalTrigger(seconds=low, jitter=(high - low) or None)


class Host:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        *,
        registry: Registry | None = None,
        run_worker: bool = True,
        run_rescue: bool = True,
        run_retention: bool = True,
        run_alerts: bool = False,
        run_schedules: bool = True,
        metrics: Metrics | None = None,
        worker_id: str | None = None,
        queues: list[str] | tuple[str, ...] | None = None,
        concurrency: int | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.metrics = (
            metrics
            if metrics is not None
            else Metrics(store, worker_gone_s=settings.health.worker_heartbeat_timeout)
        )
        self.worker: Worker | None = None
        if run_worker and registry is None:
            # The default registry is filled by importing the configured modules (a no-op when the
            # caller imported them already), so Host(settings, store).run_forever() is a whole worker.
            load_handler_modules(settings.worker.handlers)
        if run_worker:
            # A worker limited to some queues still delivers alerts (docs/alerts.md, "Delivery").
            wanted = tuple(queues if queues is not None else settings.worker.queues)
            if wanted and settings.alerts.queue not in wanted:
                queues = (*wanted, settings.alerts.queue)
            self.worker = Worker(
                store,
                settings,
                registry=registry,
                metrics=self.metrics,
                worker_id=worker_id,
                queues=queues,
                concurrency=concurrency,
            )
        if self.worker is not None:
            alert_delivery.register(self.worker.registry, store, settings, self.metrics)
        holder_base = self.worker.worker_id if self.worker else None
        self.rescuer: Rescuer | None = None
        self.retention: Retention | None = None
        self.watch: DbWatch | None = None
        holder = default_holder(holder_base)
        if run_rescue:
            self.watch = DbWatch(store)
            self.rescuer = Rescuer(store, settings, self.metrics, holder=holder, watch=self.watch)
        if run_retention:
            self.retention = Retention(store, settings, self.metrics, holder=holder)
        self.upkeep: Upkeep | None = None
        if run_rescue and settings.storage.upkeep and Upkeep.applies(store):
            self.upkeep = Upkeep(store, holder=holder)
        self.alerter: Alerter | None = None
        if run_alerts and settings.alerts.enabled:
            self.alerter = Alerter(store, settings, self.metrics, holder=holder)
        self.schedules: ScheduleChecker | None = None
        if run_schedules and settings.schedules.enabled:
            if registry is None and not run_worker:
                load_handler_modules(settings.worker.handlers)  # for the schedules they declare
            declared = (registry if registry is not None else handlers.registry).schedules()
            self.schedules = ScheduleChecker(
                store, settings, declared=declared, metrics=self.metrics, holder=holder
            )
        self._scheduler: Any = None
        self._stop = threading.Event()
        self._signals = 0
        self._started_at: float | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start the worker threads and the scheduler in the background; returns at once."""
        if self._scheduler is not None:
            raise RuntimeError("this Host is already started")
        from apscheduler.schedulers.background import BackgroundScheduler
        from apscheduler.triggers.interval import IntervalTrigger

        # APScheduler logs every run at INFO: a heartbeat every 10 s would drown the worker's own log.
        for name in ("apscheduler.executors.default", "apscheduler.scheduler"):
            lg = logging.getLogger(name)
            if lg.level == logging.NOTSET:
                lg.setLevel(logging.WARNING)
        scheduler = BackgroundScheduler(
            timezone=UTC,
            daemon=True,
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        )
        now = datetime.now(UTC)
        e = self.settings.execution
        if self.worker is not None:
            self.worker.start()
            scheduler.add_job(
                self.worker.heartbeat,
                heartbeat_trigger(e.heartbeat_interval_min, e.heartbeat_interval_max),
                id="heartbeat",
                name=f"heartbeat {self.worker.worker_id}",
                # A beat still running when the next is due is counted as a failed heartbeat by the
                # worker itself (engine/heartbeat.py); APScheduler would skip the tick with only a log line.
                max_instances=2,
            )
        if self.rescuer is not None and self.watch is not None:
            scheduler.add_job(
                self.watch.probe,
                IntervalTrigger(seconds=PROBE_INTERVAL_S),
                id="db-watch",
                name="database watch (rescue)",
                next_run_time=now,
            )
            scheduler.add_job(
                self.rescuer.run,
                IntervalTrigger(seconds=self.settings.recovery.scan_interval),
                id="rescue",
                name="rescue sweep",
                next_run_time=now,
            )
            if self.store.wal.path is not None:
                scheduler.add_job(
                    self.store.wal.keep,
                    IntervalTrigger(seconds=KEEP_INTERVAL_S),
                    id="wal",
                    name="keep the SQLite write-ahead log small",
                )
            if "fold_counters" in self.store.queries:
                scheduler.add_job(
                    self.store.fold_counters,
                    IntervalTrigger(seconds=COUNTER_FOLD_S),
                    id="fold-counters",
                    name="fold counter deltas",
                )
        if self.upkeep is not None:
            scheduler.add_job(
                self.upkeep.run,
                IntervalTrigger(seconds=UPKEEP_INTERVAL_S),
                id="upkeep",
                name="vacuum and reindex the churning tables",
            )
        if self.retention is not None:
            interval = self.settings.retention.interval
            scheduler.add_job(
                self.retention.run,
                IntervalTrigger(seconds=interval),
                id="retention",
                name="retention",
                next_run_time=now + timedelta(seconds=min(interval, 60.0)),
            )
        if self.alerter is not None:
            # Its own thread of the scheduler's pool: an evaluation never waits on the worker, nor the
            # worker on it, and it never waits on HTTP (deliveries are jobs).
            scheduler.add_job(
                self.alerter.run,
                IntervalTrigger(seconds=self.settings.alerts.evaluation_interval),
                id="alerts",
                name="alert rules",
                next_run_time=now + timedelta(seconds=min(self.settings.alerts.evaluation_interval, 5.0)),
            )
        if self.schedules is not None:
            scheduler.add_job(
                self.schedules.check,
                IntervalTrigger(seconds=self.settings.schedules.check_interval),
                id="schedules",
                name="schedule check",
                next_run_time=now,
            )
        scheduler.start()
        self._scheduler = scheduler
        self._started_at = time.monotonic()
        log.info(
            "host started: worker=%s rescue=%s retention=%s alerts=%s schedules=%s",
            self.worker.worker_id if self.worker else "off",
            f"every {self.settings.recovery.scan_interval:g}s" if self.rescuer else "off",
            f"every {self.settings.retention.interval:g}s" if self.retention else "off",
            f"every {self.settings.alerts.evaluation_interval:g}s" if self.alerter else "off",
            f"every {self.settings.schedules.check_interval:g}s" if self.schedules else "off",
        )

    def shutdown(self, wait: bool = True, grace: float | None = None) -> None:
        """Stop gracefully: the worker first (its heartbeats keep running through the grace period),
        then the scheduler. `wait=False` does not wait for running scheduled jobs (a sweep)."""
        if self.worker is not None and self.worker.running:
            self.worker.stop(grace)
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is not None:
            scheduler.shutdown(wait=wait)
        self._stop.set()

    def run_forever(self) -> None:
        """Start, block until SIGTERM or SIGINT, then shut down gracefully. A second signal ends the
        shutdown grace period at once (running handlers are then rescheduled)."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            if self._scheduler is None:
                self.start()
            while not self._stop.wait(1.0):
                pass
            log.info("stopping: signal received")
            self.shutdown()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def request_stop(self) -> None:
        self._stop.set()

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._signals += 1
        if self._signals == 1:
            log.info("received %s: graceful shutdown", signal.Signals(signum).name)
            self._stop.set()
        elif self.worker is not None:
            name = signal.Signals(signum).name
            log.warning("received %s again: ending the shutdown grace period now", name)
            self.worker.hurry()

    # ------------------------------------------------------------------ health

    def health(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "scheduler_running": self._scheduler is not None and self._scheduler.running,
            "worker": self.worker.health() if self.worker is not None else None,
        }
        w = self.worker
        if w is not None:
            age = w.loop_age()
            out["worker_running"] = w.running
            out["worker_heartbeat_age_seconds"] = None if age is None else round(age, 3)
            out["running_jobs"] = out["worker"]["running_jobs"]
            out["prefetched_jobs"] = out["worker"]["prefetched_jobs"]
        else:
            out["worker_running"] = False
        if self.alerter is not None:
            out["alerts"] = {"evaluations": self.alerter.evaluations, "last_error": self.alerter.last_error}
        if self.schedules is not None:
            out["schedules"] = {"checks": self.schedules.checks, "last_error": self.schedules.last_error}
        if self.rescuer is not None:
            watch = self.rescuer.watch
            out["rescue"] = {
                "last_error": self.rescuer.last_error,
                "sweeps": self.rescuer.sweeps,
                "zombie_phase_held": self.rescuer.held,
                "database_seen_seconds": None if watch is None else round(watch.seen_for(), 3),
            }
        return out
