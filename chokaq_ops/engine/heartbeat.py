"""Heartbeats (part of Worker, seed 002): one owner-gated statement for every job the worker holds.

Jobs missing from the result were taken away (a zombie rescue, an operator): they are cancelled and
their results ignored. Failed writes count per job; at Execution.HeartbeatFailureThreshold the job's
heartbeat is degraded (logged, counted) and, with Execution.CancelOnHeartbeatFailure, cancelled.
"""

from __future__ import annotations

import logging
import time
from collections import Counter

from chokaq_ops.engine.execution import (
    HEARTBEAT_FAILED,
    LOST,
    RUNNING,
    Run,
    preempted,
)
from chokaq_ops.models import FailureReason

log = logging.getLogger("chokaq.worker")


class Heartbeats:
    """Mixed into Worker; uses its state (see Worker.__init__)."""

    def heartbeat(self) -> None:
        """Refresh the heartbeat of every job this worker owns in one owner-gated statement."""
        with self._lock:
            runs = [r for r in self._owned.values() if not r.flushing and not r.lost]
        if not runs:
            self._heartbeat_ok = time.monotonic()
            return
        try:
            got = set(self.db(self.store.heartbeat, self.worker_id, [r.id for r in runs]))
        except Exception as exc:
            self._heartbeat_failed(runs, exc)
            return
        self._heartbeat_ok = time.monotonic()
        lost = []
        with self._lock:
            for r in runs:
                if r.id in got:
                    r.hb_failures = 0
                elif not r.flushing and r.id in self._owned:
                    r.lost = True
                    if r.state == RUNNING:
                        r.state = LOST
                    self._owned.pop(r.id, None)
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
            self._conflict("heartbeat", len(lost))

    def _heartbeat_failed(self, runs: list[Run], exc: BaseException) -> None:
        e = self.settings.execution
        degraded, cancel = [], []
        with self._lock:
            counted = [r for r in runs if r.id in self._owned and not r.flushing and not r.lost]
            for r in counted:
                r.hb_failures += 1
                if r.hb_failures >= e.heartbeat_failure_threshold:
                    degraded.append(r)
                    if e.cancel_on_heartbeat_failure and r.state == RUNNING:
                        r.state = HEARTBEAT_FAILED
                        cancel.append(r)
                    else:
                        r.hb_failures = 0  # report again after another threshold of failures
        log.warning("heartbeat write failed for %d running jobs: %s", len(counted), exc)
        for (q, t), n in Counter((r.queue, r.type) for r in counted).items():
            self._child(self.metrics.heartbeat_failures, q, t).inc(n)
        for r in degraded:
            self._child(self.metrics.heartbeat_degraded, r.queue, r.type).inc()
            log.error(
                "heartbeat degraded: %d consecutive writes failed job_id=%s type=%s%s",
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
                f"HeartbeatFailure: {e.heartbeat_failure_threshold} consecutive heartbeat writes failed "
                f"(last error: {exc}); cancelled because Execution.CancelOnHeartbeatFailure is set"
            )
            self.completer.add(preempted(r, FailureReason.HeartbeatFailure, text))
