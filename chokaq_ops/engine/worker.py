"""The worker: claims jobs in sets, starts them in sets, runs them on a pool of threads, finishes them in
sets — every write fenced by the worker id (docs/worker.md-4.6, seeds 001/002).

Threads of one Worker, each in the module that holds its code:

- fetcher (engine/claiming.py): one claim statement per set. Free slots that no buffered job covers
  are started by the claim itself (claim-and-start: pending -> processing, handed to those slots at
  once); the rest tops up a bounded prefetch buffer (`fetched`: reserved, user code not started),
  kept only while handlers run long next to a claim. Adaptive polling; paused queues' buffered jobs
  released; stamps the worker's in-memory liveness time (`loop_age()`) on every turn.
- starter (engine/starting.py): marks buffered jobs processing in sets, one statement per set of free
  slots (the lease gate); refused jobs never run.

Either way a job becomes processing only for an execution slot that is free at that moment, so
`processing` keeps meaning "user code is running or about to" (seeds 001/002).
- executors (engine/starting.py, `Worker.Concurrency` threads): parse the payload, call the handler,
  classify the outcome (engine/execution.py).
- watchdog (engine/starting.py): at a job's execution deadline sets `ctx.cancelled` and dead-letters it.
- completer (engine/completer.py): writes outcomes grouped by kind, one statement per kind per flush.

`heartbeat()` (engine/heartbeat.py) is called by the host's scheduler (engine/hosting.py): one statement
refreshes every job the worker owns; jobs it no longer owns (rescued as zombies) are cancelled and their
results dropped. This module holds the shared state, start/stop, health and the completion callbacks.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from chokaq_ops import errors, ids
from chokaq_ops.engine import handlers as handler_registry
from chokaq_ops.engine import wakeup
from chokaq_ops.engine.circuits import Circuits
from chokaq_ops.engine.claiming import Claiming
from chokaq_ops.engine.completer import TRANSITION, Completer
from chokaq_ops.engine.execution import (
    ABANDONED,
    DEAD,
    DEFER,
    OK,
    RETRY,
    RUNNING,
    Outcome,
    Run,
)
from chokaq_ops.engine.handlers import Registry
from chokaq_ops.engine.heartbeat import Heartbeats
from chokaq_ops.engine.metrics import Metrics
from chokaq_ops.engine.starting import Starting
from chokaq_ops.settings import Settings
from chokaq_ops.storage import Store, signals
from chokaq_ops.storage.deadline import DeadlineExceeded

log = logging.getLogger("chokaq.worker")
T = TypeVar("T")


class Worker(Claiming, Starting, Heartbeats):
    """One worker identity: a set of threads sharing one prefetch buffer and one pool of slots."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        registry: Registry | None = None,
        metrics: Metrics | None = None,
        worker_id: str | None = None,
        queues: Sequence[str] | None = None,
        concurrency: int | None = None,
    ) -> None:
        w = settings.worker
        self.store = store
        self.settings = settings
        self.registry = registry if registry is not None else handler_registry.registry
        self.metrics = metrics if metrics is not None else Metrics()
        self.worker_id = (worker_id or w.worker_id or ids.new_worker_id())[:100]
        self.queues: tuple[str, ...] | None = tuple(queues if queues is not None else w.queues) or None
        self.concurrency = int(concurrency or w.concurrency)
        self.prefetch = w.prefetch
        # SQLite has one writer: serialising this process's writes avoids its sleeping busy handler.
        self._serial = threading.Lock() if store.dialect.name == "sqlite" else None
        self._lock = threading.Lock()
        self._cv_start = threading.Condition(self._lock)
        self._cv_fetch = threading.Condition(self._lock)
        self._cv_idle = threading.Condition(self._lock)
        self._cv_watch = threading.Condition(self._lock)
        self._buffer: list[tuple[Any, ...]] = []  # heap of (-priority, due_at, seq, row, fetched at)
        self._seq = itertools.count()
        self._free = self.concurrency  # slots not running a job nor held for a start in flight
        self._marking: set[str] = set()  # buffered jobs taken by the starter, start not yet settled
        self._written_off: set[str] = set()  # outcome unwritable: left processing for the sweep
        self._run_ms: float | None = None  # moving average of handler durations...
        self._claim_ms: float | None = None  # ...and of claim round trips: see Claiming._depth
        self._running: set[Run] = set()  # handler executing (holds a slot)
        self._owned: dict[str, Run] = {}  # marked processing, outcome not yet written (latest run per id)
        self._beat_lock = threading.Lock()  # one heartbeat in flight (engine/heartbeat.py)
        self._beat_retry: threading.Timer | None = None
        self._paused: frozenset[str] = frozenset()
        self._capped: frozenset[str] = frozenset()
        self._exact_caps = False
        self._wake_fetch = False
        self._next_deadline = 0.0
        self._stopping = False
        self._hurry = False
        self._watch_stop = False
        self._started = False
        self._stopped = False
        self._loop_stamp: float | None = None
        self._heartbeat_ok: float | None = None
        self._exec_q: queue.SimpleQueue[Run | None] = queue.SimpleQueue()
        self._children: dict[tuple[Any, ...], Any] = {}
        self._timeouts: dict[str, tuple[float, str]] = {}
        self.counts: Counter[str] = Counter()
        self.completer = Completer(self)
        self.circuits = Circuits(self)
        self._unregistered = False
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self._threads: list[threading.Thread] = []
        self._executors: list[threading.Thread] = []
        self.watcher: wakeup.Watcher | None = None
        self._idle_since: float | None = None  # monotonic time of this worker's idle mark (PostgreSQL)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self._started:
            raise RuntimeError("a Worker starts once")
        self._started = True
        name = self.worker_id
        # The server learns which types are safe to run twice, so --idempotent-only and the console can
        # choose retries without importing handler code. Best effort: a worker starting while the database
        # is away still starts (and waits for it as it always did); the next start records them.
        try:
            self.store.register_job_types({h.type: h.idempotent for h in self.registry})
        except errors.ChokaqError as exc:
            log.warning("could not record the job types' idempotency declarations: %s", exc)
        self._threads = [
            threading.Thread(target=self._fetch_loop, name=f"chokaq-fetch-{name}", daemon=True),
            threading.Thread(target=self._start_loop, name=f"chokaq-start-{name}", daemon=True),
            threading.Thread(target=self._watch_loop, name=f"chokaq-watch-{name}", daemon=True),
        ]
        self._executors = [
            threading.Thread(target=self._exec_loop, name=f"chokaq-exec-{i}-{name}", daemon=True)
            for i in range(self.concurrency)
        ]
        if self.settings.worker.instant_pickup:
            signals.subscribe(self.store.dialect.url, self._wake)
            self.watcher = wakeup.acquire(
                self.store, change_check_interval=self.settings.worker.change_check_interval
            )
        self.completer.thread.start()
        for t in [*self._threads, *self._executors]:
            t.start()
        self.register()
        log.info(
            "worker started worker_id=%s concurrency=%d prefetch=%d queues=%s handlers=%d db=%s",
            self.worker_id,
            self.concurrency,
            self.prefetch,
            ",".join(self.queues or ()) or "*",
            len(self.registry),
            self.store.dialect.name,
        )

    def stop(self, grace: float | None = None) -> dict[str, int]:
        """Graceful shutdown: stop fetching, release prefetched jobs, wait up to `grace` seconds
        (Worker.ShutdownGracePeriod) for running handlers, write their outcomes. Handlers still running
        after the grace period are cancelled and rescheduled to pending at once (their attempt is
        consumed, as a crash would); their late results are ignored."""
        if not self._started or self._stopped:
            return {}
        self._stopped = True
        grace = self.settings.worker.shutdown_grace_period if grace is None else max(0.0, grace)
        deadline = time.monotonic() + grace
        with self._lock:
            self._stopping = True
            self._cv_start.notify_all()
            self._cv_fetch.notify_all()
        if self.watcher is not None:
            signals.unsubscribe(self.store.dialect.url, self._wake)
            wakeup.release(self.watcher)
        for t in self._threads[:2]:  # fetcher and starter may sit in a database call
            t.join(max(grace, 5.0))
        if self._idle_since is not None:
            self._unmark_idle()
        with self._lock:
            rows = [entry[3] for entry in self._buffer]
            self._buffer = []
        released = self._release(rows, why="shutdown")
        with self._lock:
            while self._running and time.monotonic() < deadline and not self._hurry:
                self._cv_idle.wait(max(0.0, deadline - time.monotonic()))
            leftover = [r for r in self._running if r.state == RUNNING]
            for r in leftover:
                r.state = ABANDONED
        for r in leftover:
            r.ctx.cancel("shutdown")
            elapsed = (time.monotonic() - r.mono_start) * 1000.0
            note = f"Worker shutdown: handler still running after the {grace:g}s grace period"
            self.completer.add(Outcome(r, RETRY, elapsed, delay=0.0, error=note))
            log.warning(
                "job rescheduled at shutdown job_id=%s type=%s attempt=%d: still running after %gs",
                r.id,
                r.type,
                r.attempt,
                grace,
            )
        for _ in self._executors:
            self._exec_q.put(None)
        with self._lock:
            self._watch_stop = True
            self._cv_watch.notify_all()
        written = self.completer.close(timeout=max(5.0, grace))
        for t in self._executors:
            t.join(0.05 if leftover else 1.0)
        self._unregistered = True
        try:
            self.db(self.store.worker_unregister, self.worker_id)
        except Exception as exc:  # retention prunes the row later
            log.warning("worker registry row not removed: %s", exc)
        summary = {"released": released, "rescheduled": len(leftover), "unwritten": 0 if written else 1}
        log.info(
            "worker stopped worker_id=%s released=%d rescheduled=%d%s",
            self.worker_id,
            released,
            len(leftover),
            "" if written else " (some outcomes could not be written; see errors above)",
        )
        return summary

    def hurry(self) -> None:
        """End a running shutdown's grace period now (a second SIGTERM/SIGINT)."""
        with self._lock:
            self._hurry = True
            self._cv_idle.notify_all()

    # ------------------------------------------------------------------ registry and live concurrency

    def register(self) -> None:
        """Refresh this worker's registry row (one statement; called on every heartbeat) and apply the
        operator's concurrency target it returns. Never raises: the job heartbeats matter more."""
        if self._unregistered:
            return
        with self._lock:
            running, prefetched = len(self._running), len(self._buffer)
        try:
            desired = self.db(
                self.store.worker_register,
                self.worker_id,
                host=self.host,
                pid=self.pid,
                queues=self.queues,
                concurrency=self.concurrency,
                running=running,
                prefetched=prefetched,
            )
        except Exception as exc:
            log.warning("worker registry row not refreshed: %s", exc)
            return
        if desired is not None and desired != self.concurrency:
            self.set_concurrency(desired)

    def set_concurrency(self, n: int) -> None:
        """Change the number of handler slots now. Lowering never cancels a running job: new starts wait
        until fewer than `n` run. Raising adds execution threads as needed."""
        n = max(1, int(n))
        with self._lock:
            if self._stopping:
                return
            old = self.concurrency
            self.concurrency = n
            self._free += n - old
            extra = [
                threading.Thread(
                    target=self._exec_loop, name=f"chokaq-exec-{i}-{self.worker_id}", daemon=True
                )
                for i in range(len(self._executors), n)
            ]
            self._executors.extend(extra)
            self._cv_start.notify_all()
            self._cv_fetch.notify_all()
        for t in extra:
            t.start()
        log.info("worker concurrency changed worker_id=%s from=%d to=%d", self.worker_id, old, n)

    @property
    def running(self) -> bool:
        return self._started and not self._stopped

    # ------------------------------------------------------------------ health

    def loop_age(self) -> float | None:
        """Seconds since the fetch loop last turned (the worker's in-memory heartbeat)."""
        stamp = self._loop_stamp
        return None if stamp is None or not self.running else time.monotonic() - stamp

    def health(self) -> dict[str, Any]:
        with self._lock:
            running = len(self._running)
            overdue = sum(1 for r in self._running if r.state != RUNNING)
            prefetched = len(self._buffer)
            owned = len(self._owned)
        hb = self._heartbeat_ok
        age = self.loop_age()
        return {
            "worker_id": self.worker_id,
            "running": self.running,
            "loop_age_seconds": None if age is None else round(age, 3),
            "last_heartbeat_write_seconds": None if hb is None else round(time.monotonic() - hb, 3),
            "concurrency": self.concurrency,
            "running_jobs": running,
            "overdue_jobs": overdue,  # cancelled (timeout, lost, shutdown) but still in user code
            "prefetched_jobs": prefetched,
            "owned_jobs": owned,
            "unwritten_outcomes": self.completer.pending(),
            "counts": dict(self.counts),
        }

    # ------------------------------------------------------------------ database access

    def db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._serial is None:
            return fn(*args, **kwargs)
        with self._serial:
            return fn(*args, **kwargs)

    def db_within(self, seconds: float, fn: Callable[..., T], *args: Any) -> T:
        """`db` that waits at most `seconds` for this process's SQLite write turn."""
        if self._serial is None:
            return fn(*args)
        if not self._serial.acquire(timeout=max(0.0, seconds)):
            raise DeadlineExceeded(f"no turn to write within {seconds:.3g}s (this process's writes queue)")
        try:
            return fn(*args)
        finally:
            self._serial.release()

    # ------------------------------------------------------------------ completion callbacks

    def finished(self, kind: str, items: Sequence[Outcome], applied: set[str]) -> None:
        """Called by the completer after a group was written; `applied` are the ids the store moved."""
        done: Counter[tuple[str, str, str]] = Counter()
        refused = []
        for o in items:
            r = o.run
            if r.id in applied:
                reason = o.reason.name if o.reason is not None else ""
                done[(r.queue, r.type, reason)] += 1
                if kind == DEAD:
                    log.warning(
                        "job dead job_id=%s type=%s queue=%s reason=%s attempt=%d/%d error=%s",
                        r.id,
                        r.type,
                        r.queue,
                        reason,
                        r.attempt,
                        r.max_attempts,
                        _first_line(o.error),
                    )
                elif kind == DEFER:
                    log.info("job deferred: the circuit of its type is open job_id=%s type=%s", r.id, r.type)
                elif kind == RETRY:
                    log.info(
                        "job retry scheduled job_id=%s type=%s attempt=%d/%d delay=%.3fs error=%s",
                        r.id,
                        r.type,
                        r.attempt,
                        r.max_attempts,
                        o.delay,
                        _first_line(o.error),
                    )
            else:
                refused.append(r.id)
        for (q, t, reason), n in done.items():
            if kind == OK:
                self._child(self.metrics.succeeded, q, t).inc(n)
            elif kind == DEAD:
                self._child(self.metrics.failed, q, t, reason).inc(n)
            elif kind == DEFER:
                self.metrics.circuit_deferred.labels(self.metrics.type_label(t)).inc(n)
            else:
                self._child(self.metrics.retried, q, t).inc(n)
        key = {OK: "succeeded", DEAD: "dead", RETRY: "retried", DEFER: "deferred"}[kind]
        self.counts[key] += len(items) - len(refused)
        try:
            self.circuits.record(kind, [o for o in items if o.run.id in applied])
        except Exception as exc:  # the outcome is written; a lost count only delays a circuit's opening
            log.warning("circuit %s report of %d jobs failed: %s", kind, len(items), exc)
        if refused:
            self._conflict(TRANSITION[kind], len(refused))
            log.warning(
                "%s not applied to %d jobs: this worker no longer owns them (a late result after a "
                "rescue or an operator's move is a no-op): %s",
                TRANSITION[kind],
                len(refused),
                ", ".join(refused[:20]),
            )
        self.forget([o.run for o in items])

    def forget(self, runs: Iterable[Run]) -> None:
        with self._lock:
            for r in runs:
                if self._owned.get(r.id) is r:
                    del self._owned[r.id]
                r.flushing = False

    # ------------------------------------------------------------------ metrics

    def _conflict(self, transition: str, n: int) -> None:
        self._child(self.metrics.conflicts, transition).inc(n)
        with self._lock:
            self.counts["conflicts"] += n

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            if len(labels) >= 2:
                lbl = self.metrics.labels(labels[0], labels[1])
                values = [lbl["queue"], lbl["type"], *labels[2:]]
            else:
                values = list(labels)
            child = metric.labels(*values)
            self._children[key] = child
        return child


def _first_line(text: str | None) -> str:
    return (text or "").split("\n", 1)[0][:300]
