"""Heartbeats: one owner-gated statement for every job the worker holds.

Jobs missing from the result were taken away (a zombie rescue, an operator): they are cancelled and
their results ignored. A heartbeat is bounded: it finishes within its interval or fails (docs/worker.md
"Heartbeats"), and a row another session holds locked is skipped, not waited for, so one locked row never
delays the other jobs' heartbeats. Every failure counts per job — a write that failed or timed out, a
skipped locked row, a beat still in flight when the next one was due — and at
Execution.HeartbeatFailureThreshold the job's heartbeat is degraded (logged, counted) and, with
Execution.CancelOnHeartbeatFailure, cancelled. Jobs whose outcome is being written keep their heartbeat
until the write lands.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence

from chokaq_ops.engine.completer import Completer
from chokaq_ops.engine.execution import (
    HEARTBEAT_FAILED,
    LOST,
    RUNNING,
    Run,
    preempted,
)
from chokaq_ops.engine.serial_writes import SerialWrites
from chokaq_ops.engine.tally import Tally
from chokaq_ops.engine.worker_state import WorkerState
from chokaq_ops.models import FailureReason
from chokaq_ops.settings import Settings
from chokaq_ops.storage import Store, deadline

log = logging.getLogger("chokaq.worker")

# A beat must end this share of the shortest interval after it began, so that it is over before the next
# one is due (a beat still running then is counted as failed, not silently skipped).
BEAT_BUDGET = 0.8
# After a failed beat the next try comes this soon (at most), not a whole interval later: a worker whose
# database came back refreshes its jobs before the rescue sweep's post-outage grace runs out.
RETRY_AFTER_FAILURE_S = 2.0


class Heartbeats:
    """The worker's heartbeat, called by the host's scheduler (engine/hosting.py); at most one in flight."""

    def __init__(
        self,
        state: WorkerState,
        store: Store,
        db: SerialWrites,
        settings: Settings,
        worker_id: str,
        *,
        completer: Completer,
        tally: Tally,
        register: Callable[[], None],
    ) -> None:
        self.state = state
        self.store = store
        self.db = db
        self.settings = settings
        self.worker_id = worker_id
        self.completer = completer
        self.tally = tally
        self.register = register  # the worker's registry row, refreshed on every beat
        self.beat_lock = threading.Lock()  # one heartbeat in flight
        self._retry: threading.Timer | None = None

    def beat(self) -> None:
        """Refresh the heartbeat of every job this worker owns in one owner-gated statement."""
        if not self.beat_lock.acquire(blocking=False):
            self._beat_overrun()
            return
        try:
            budget = self._budget()
            end = time.monotonic() + budget
            self._write()
            # The registry row after the jobs' heartbeats, in what is left of the beat's budget: it is
            # one more statement per beat, never the reason a job's heartbeat is late or the next beat
            # overruns. With less than a quarter left (a slow database) it waits for the next beat.
            left = end - time.monotonic()
            if left >= budget / 4:
                with deadline.limit(left):
                    self.register()
        finally:
            self.beat_lock.release()

    def _budget(self) -> float:
        """Seconds a beat may take: a share of the shortest interval, so it ends before the next."""
        return self.settings.execution.heartbeat_interval_min * BEAT_BUDGET

    def _write(self) -> None:
        with self.state.lock:
            runs = [r for r in self.state.owned.values() if not r.lost]
        if not runs:
            self.state.heartbeat_ok = time.monotonic()
            return
        budget = self._budget()
        try:
            with deadline.limit(budget):
                beat, blocked = self.db.call_within(
                    budget, self.store.beat, self.worker_id, [r.id for r in runs]
                )
        except Exception as exc:
            self._heartbeat_failed(runs, f"heartbeat write failed: {exc}")
            self._retry_soon()
            return
        self.state.heartbeat_ok = time.monotonic()
        lost, skipped = [], []
        with self.state.lock:
            for r in runs:
                if r.id in beat:
                    r.hb_failures = 0
                elif r.id in blocked:
                    skipped.append(r)
                elif not r.flushing and self.state.owned.get(r.id) is r:
                    # (A flushing job left hot because its own outcome landed: not lost.)
                    r.lost = True
                    if r.state == RUNNING:
                        r.state = LOST
                    del self.state.owned[r.id]
                    lost.append(r)
        for r in lost:
            r.ctx.cancel("lost: the worker no longer owns the job")
            log.warning(
                "job lost: the worker no longer owns it (rescued as a zombie or moved by an operator); "
                "cancelled, its result will be ignored job_id=%s type=%s attempt=%d",
                r.id,
                r.type,
                r.attempt,
            )
        if lost:
            self.tally.conflict("heartbeat", len(lost))
        if skipped:
            self._heartbeat_failed(skipped, "heartbeat skipped: another session holds the job's row locked")

    def _beat_overrun(self) -> None:
        """The previous beat is still running when the next is due: that is a failed heartbeat for every
        job it was to refresh."""
        with self.state.lock:
            runs = [r for r in self.state.owned.values() if not r.lost]
        if runs:
            self._heartbeat_failed(runs, "heartbeat overran its interval: the previous write has not ended")

    def _retry_soon(self) -> None:
        with self.state.lock:
            if self._retry is not None or self.state.stopped:
                return
            delay = min(RETRY_AFTER_FAILURE_S, self.settings.execution.heartbeat_interval_min / 2)
            timer = threading.Timer(delay, self._retry_beat)
            timer.daemon = True
            self._retry = timer
        timer.start()

    def _retry_beat(self) -> None:
        with self.state.lock:
            self._retry = None
        self.beat()

    def _heartbeat_failed(self, runs: Sequence[Run], why: str) -> None:
        e = self.settings.execution
        degraded, cancel = [], []
        with self.state.lock:
            counted = [r for r in runs if self.state.owned.get(r.id) is r and not r.lost]
            for r in counted:
                r.hb_failures += 1
                if r.hb_failures >= e.heartbeat_failure_threshold:
                    degraded.append(r)
                    if e.cancel_on_heartbeat_failure and r.state == RUNNING:
                        r.state = HEARTBEAT_FAILED
                        cancel.append(r)
                    else:
                        r.hb_failures = 0  # report again after another threshold of failures
        if not counted:
            return
        log.warning("%s (%d running jobs)", why, len(counted))
        for (q, t), n in Counter((r.queue, r.type) for r in counted).items():
            self.tally.child(self.tally.metrics.heartbeat_failures, q, t).inc(n)
        with self.state.lock:
            self.state.counts["heartbeat_failures"] += len(counted)
        for r in degraded:
            self.tally.child(self.tally.metrics.heartbeat_degraded, r.queue, r.type).inc()
            log.error(
                "heartbeat degraded: %d consecutive heartbeats failed job_id=%s type=%s%s",
                e.heartbeat_failure_threshold,
                r.id,
                r.type,
                "; cancelling (Execution.CancelOnHeartbeatFailure)"
                if r in cancel
                else "; the job keeps running (Execution.CancelOnHeartbeatFailure is off)",
            )
        for r in cancel:
            r.ctx.cancel("heartbeat failure")
            text = (
                f"HeartbeatFailure: {e.heartbeat_failure_threshold} consecutive heartbeats failed "
                f"(last: {why}); cancelled because Execution.CancelOnHeartbeatFailure is set"
            )
            self.completer.add(preempted(r, FailureReason.HeartbeatFailure, text))
