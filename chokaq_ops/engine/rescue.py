"""The zombie-rescue sweep (PRODUCT §4.7, seed 001): two independent phases on the database clock.

Phase 1 returns fetched-but-never-started reservations older than `Recovery.FetchedJobTimeout` to pending
(user code never ran, so this is a safe retry). Phase 2 moves processing jobs whose heartbeat is older than
the queue's zombie timeout to the DLQ as `Zombie` (user code may have had side effects: a human decides).

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
from chokaq_ops.storage.worker_ops import Audit

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


class Rescuer:
    """One sweep per `run()`; the host schedules it every `Recovery.ScanInterval`."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        metrics: Metrics | None = None,
        holder: str | None = None,
        actor: str | None = None,
    ) -> None:
        self.store = store
        self.actor = actor  # set for a sweep a person asked for: each phase is audited with its moves
        self.settings = settings
        self.metrics = metrics
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
            archived = self._phase(
                "archive_zombies",
                failures,
                partial(self.store.archive_zombies, audit=self._audit("rescue_zombies")),
                recovery.processing_zombie_timeout,
                self.queue_overrides(),
                ZOMBIE_FINGERPRINT,
            )
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
    `actor`: who asked; each phase then writes an audit row (`rescue_recover`, `rescue_zombies`) with
    its moves, in their transaction."""
    rescuer = Rescuer(store, settings, metrics, actor=actor)
    try:
        return rescuer.sweep()
    except RescueError:
        if metrics is not None:
            metrics.rescue_failures.inc()
        raise
