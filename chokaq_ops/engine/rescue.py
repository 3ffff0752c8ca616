"""The zombie-rescue sweep (docs/rescue.md): two independent phases on the database clock.

Phase 1 returns fetched-but-never-started reservations older than `Recovery.FetchedJobTimeout` to pending
(user code never ran, so this is a safe retry), and at once those of a worker whose registry row is older
than `Health.WorkerHeartbeatTimeout` (the worker died: nobody will start them). Phase 2 moves
processing jobs whose heartbeat is older than the queue's zombie timeout to the DLQ as `Zombie` (user
code may have had side effects: a human decides).

After a database outage the zombie phase waits (docs/rescue.md "Outages"): a sweeper that could not reach
the database, or was itself stopped, holds phase 2 until it has seen the database continuously for
2 x Execution.HeartbeatIntervalMax, so every live worker had a fair chance to refresh its heartbeats; an
outage longer than the zombie timeout creates no false zombies. Phase 2's statement also carries the
database time it was decided at and moves nothing if the server only runs it later (a paused server).

Many processes may host a Rescuer. A database lease ("rescue") lets one of them sweep per interval; the SQL
is safe without it (PostgreSQL takes victims `FOR UPDATE SKIP LOCKED`, SQLite has one writer), so a second
concurrent sweep only finds nothing to do.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from chokaq_ops import errors
from chokaq_ops.fingerprint import fingerprint_text
from chokaq_ops.models import RescueReport
from chokaq_ops.storage import deadline
from chokaq_ops.storage.rescue import Audit

if TYPE_CHECKING:
    from chokaq_ops.engine.metrics import Metrics
    from chokaq_ops.settings import Settings
    from chokaq_ops.storage import Store

log = logging.getLogger("chokaq.rescue")

LEASE = "rescue"
EVENT_KIND = "rescue"
ZOMBIE_ERROR = "Zombie detected: heartbeat expired"
# Every zombie gets the fingerprint of the fixed text, so all zombies form one group in DLQ summaries
# however their heartbeat ages and worker ids differ.
ZOMBIE_FINGERPRINT = fingerprint_text(ZOMBIE_ERROR).id
EVENT_MAX_IDS = 1000  # an event row feeds a live stream: a sweep of 100k zombies lists the first 1000
# The database watch (DbWatch) probes this often; a probe slower than PROBE_SLOW_S, or a gap between two
# probes longer than PROBE_MAX_GAP_S (this process stalled), breaks the continuity it measures.
PROBE_INTERVAL_S = 1.0
PROBE_SLOW_S = 2.0
PROBE_MAX_GAP_S = 3.0
# A phase-2 batch moves only if the server runs it within this many seconds of the sweep deciding to.
ZOMBIE_DECISION_MAX_LAG_S = 5.0


class RescueError(errors.StorageError):
    """The rescue sweep failed."""


def default_holder(prefix: str | None = None) -> str:
    """A lease holder name unique to this process: host, pid and a random suffix (pids are reused)."""
    base = prefix or f"{socket.gethostname()}:{os.getpid()}"
    return f"{base[:80]}:{secrets.token_hex(3)}"


def lease_ttl(interval_s: float) -> float:
    """A little under the interval, so the holder's next run finds the lease free for anyone and a dead
    holder delays the next sweep by less than one interval."""
    return max(0.05, interval_s * 0.9)


class DbWatch:
    """How long this process has seen the database continuously: `probe()` runs every PROBE_INTERVAL_S
    (the host schedules it); a failed or slow probe, or a gap between probes, starts the count again."""

    def __init__(self, store: Store, clock: Any = time.monotonic) -> None:
        self.store = store
        self._clock = clock
        self._lock = threading.Lock()
        self._since: float | None = None  # start of the current unbroken stretch
        self._last_ok: float | None = None  # end of the latest good probe
        self.breaks = 0  # stretches broken (outages and stalls seen)

    def probe(self) -> bool:
        start = self._clock()
        try:
            with deadline.limit(PROBE_SLOW_S):
                self.store.now()
        except Exception as exc:
            self._broken(f"the database did not answer: {exc}")
            return False
        end = self._clock()
        with self._lock:
            last = self._last_ok
            self._last_ok = end
            if end - start > PROBE_SLOW_S or last is None or start - last > PROBE_MAX_GAP_S:
                if self._since is not None:
                    self.breaks += 1
                    log.warning("rescue: the database (or this process) stalled; holding the zombie phase")
                self._since = end
        return True

    def _broken(self, why: str) -> None:
        with self._lock:
            if self._since is not None:
                self.breaks += 1
                log.warning("rescue: %s; holding the zombie phase until it is back for a while", why)
            self._since = self._last_ok = None

    def seen_for(self) -> float:
        """Seconds of unbroken sight of the database up to now (0 if the probes stopped arriving)."""
        with self._lock:
            now = self._clock()
            if self._since is None or self._last_ok is None or now - self._last_ok > PROBE_MAX_GAP_S:
                return 0.0
            return now - self._since


class Rescuer:
    """One sweep per `run()`; the host schedules it every `Recovery.ScanInterval`. With a `watch` (the
    host's), the zombie phase waits after an outage (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        metrics: Metrics | None = None,
        holder: str | None = None,
        watch: DbWatch | None = None,
        actor: str | None = None,
    ) -> None:
        self.store = store
        self.actor = actor  # set for a sweep a person asked for: each phase is audited with its moves
        self.settings = settings
        self.metrics = metrics
        self.watch = watch
        self.held = 0  # sweeps whose zombie phase waited for the database to be seen long enough
        self.holder = (holder or default_holder())[:100]
        self.last_report: RescueReport | None = None
        self.last_error: str | None = None
        self.last_run_monotonic: float | None = None
        self.sweeps = 0  # sweeps this process ran (lease taken or forced)
        self._lock = threading.Lock()  # one sweep at a time in this process

    # ------------------------------------------------------------------ scheduled entry point

    def run(self, force: bool = False) -> RescueReport | None:
        """Sweep unless another process holds the lease (then None). Never raises: a failing sweep is
        logged and counted, and the schedule goes on."""
        try:
            if not force and not self._take_lease():
                return None
            return self.sweep()
        except Exception as exc:  # the scheduler must keep calling us
            self._failed(exc)
            return None

    def _take_lease(self) -> bool:
        if not self.settings.recovery.lease:
            return True
        ttl = lease_ttl(self.settings.recovery.scan_interval)
        taken = self.store.try_lease(LEASE, self.holder, ttl)
        if not taken:
            log.debug("rescue: lease %r held by another process; skipping this sweep", LEASE)
        return taken

    # ------------------------------------------------------------------ the sweep

    def sweep(self) -> RescueReport:
        """Both phases now, without the lease. Raises RescueError when a phase failed (after announcing
        what the other phase did: its rows are committed)."""
        with self._lock:
            self.sweeps += 1
            self.last_run_monotonic = time.monotonic()
            recovery = self.settings.recovery
            failures: list[str] = []
            # The phases are independent: a failing phase 1 must not keep zombies in hot, nor vice versa.
            recovered = self._phase(
                "recover_abandoned",
                failures,
                partial(self.store.recover_abandoned, audit=self._audit("rescue_recover")),
                recovery.fetched_job_timeout,
            )
            # Phase 1b: a dead worker's reservations come back within Health.WorkerHeartbeatTimeout of
            # its last registry beat, not after FetchedJobTimeout (docs/rescue.md, phase 1b).
            recovered += self._phase(
                "recover_orphaned",
                failures,
                partial(self.store.recover_orphaned, audit=self._audit("rescue_orphans")),
                self.settings.health.worker_heartbeat_timeout,
            )
            archived = []
            if self._zombie_phase_allowed():
                archived = self._phase("archive_zombies", failures, self._archive_zombies)
            report = RescueReport(
                recovered=len(recovered),
                archived=len(archived),
                recovered_ids=[r["id"] for r in recovered],
                archived_ids=[r["id"] for r in archived],
            )
            if report.recovered or report.archived:
                self._announce(report, recovered, archived)
            self.last_report = report
            if failures:
                raise RescueError("rescue sweep failed: " + "; ".join(failures))
            self.last_error = None
            return report

    def hold_after_outage(self) -> float:
        """Seconds of unbroken sight of the database the zombie phase needs (2 heartbeat maxima)."""
        return 2 * self.settings.execution.heartbeat_interval_max

    def _zombie_phase_allowed(self) -> bool:
        if self.watch is None:
            return True
        seen, needed = self.watch.seen_for(), self.hold_after_outage()
        if seen >= needed:
            return True
        self.held += 1
        if self.metrics is not None:
            self.metrics.rescue_held.inc()
        log.warning(
            "rescue: zombie phase held: the database has been seen for %.1fs of the %.0fs every worker "
            "gets to heartbeat again after an outage",
            seen,
            needed,
        )
        return False

    def _archive_zombies(self) -> list[dict[str, Any]]:
        return self.store.archive_zombies(
            self.settings.recovery.processing_zombie_timeout,
            self.queue_overrides(),
            ZOMBIE_FINGERPRINT,
            within=ZOMBIE_DECISION_MAX_LAG_S,
            audit=self._audit("rescue_zombies"),
        )

    def _audit(self, action: str) -> Audit | None:
        return Audit(self.actor, action) if self.actor else None

    def queue_overrides(self) -> dict[str, float]:
        """Configured per-queue zombie timeouts; a queue row's own value still wins in SQL."""
        return {
            name: q.zombie_timeout_seconds
            for name, q in self.settings.queues.items()
            if q.zombie_timeout_seconds is not None
        }

    def _phase(self, name: str, failures: list[str], fn: Any, *args: Any) -> list[dict[str, Any]]:
        try:
            return list(fn(*args))
        except Exception as exc:
            failures.append(f"{name}: {exc}")
            log.error(
                "ZombieRescue %s failed: %s", name, exc, exc_info=not isinstance(exc, errors.ChokaqError)
            )
            return []

    def _announce(
        self, report: RescueReport, recovered: Sequence[dict[str, Any]], archived: Sequence[dict[str, Any]]
    ) -> None:
        message = f"ZombieRescue: recovered {report.recovered} abandoned, archived {report.archived} zombies"
        log.warning(message)
        if self.metrics is not None:
            self.metrics.rescue_recovered.inc(report.recovered)
            self.metrics.rescue_zombies.inc(report.archived)
        data = {
            "recovered": report.recovered,
            "archived": report.archived,
            "recovered_ids": report.recovered_ids[:EVENT_MAX_IDS],
            "archived_ids": report.archived_ids[:EVENT_MAX_IDS],
            "zombies": [
                {"id": r["id"], "queue": r.get("queue"), "worker_id": r.get("worker_id")}
                for r in archived[:EVENT_MAX_IDS]
            ],
            "truncated": max(report.recovered, report.archived) > EVENT_MAX_IDS,
            "holder": self.holder,
        }
        try:
            self.store.add_event(EVENT_KIND, message, data)
        except Exception as exc:
            # The moves are committed and logged; only the live-stream notice is lost.
            log.error("ZombieRescue: could not write the rescue event: %s", exc)

    def _failed(self, exc: BaseException) -> None:
        self.last_error = str(exc)
        if self.metrics is not None:
            self.metrics.rescue_failures.inc()
        if isinstance(exc, RescueError):
            log.error("ZombieRescue sweep failed; the next one runs on schedule: %s", exc)
        else:
            log.error("ZombieRescue sweep failed; the next one runs on schedule", exc_info=exc)


def sweep_now(
    store: Store, settings: Settings, metrics: Metrics | None = None, *, actor: str | None = None
) -> RescueReport:
    """One forced sweep (`POST /rescue`, `chokaq rescue`): no lease, and failures raise RescueError.
    `actor`: who asked; each phase then writes an audit row (`rescue_recover`, `rescue_orphans`,
    `rescue_zombies`) with its moves, in their transaction."""
    rescuer = Rescuer(store, settings, metrics, actor=actor)
    try:
        return rescuer.sweep()
    except RescueError:
        if metrics is not None:
            metrics.rescue_failures.inc()
        raise
