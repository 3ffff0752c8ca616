"""The worker: claims jobs in sets, starts them in sets, runs them on a pool of threads, finishes them in
sets, every write fenced by the worker id (docs/worker.md).

A Worker composes small parts that share one `WorkerState` (engine/worker_state.py: the prefetch
buffer, the slots, the runs it owns and runs, the counters, one lock and its conditions); each part
gets the state and what else it uses in its constructor:

- fetcher (`Fetcher`, engine/claiming.py): one claim statement per set. Free slots that no buffered
  job covers are started by the claim itself (claim-and-start: pending -> processing, handed to those
  slots at once); the rest tops up a bounded prefetch buffer (`fetched`: reserved, user code not
  started), kept only while handlers run long next to a claim. Adaptive polling; paused queues'
  buffered jobs released; stamps the worker's in-memory liveness time (`loop_age()`) on every turn.
- starter (`Starter`, engine/starting.py): marks buffered jobs processing in sets, one statement per
  set of free slots (the lease gate); refused jobs never run.
- launcher (`Launcher`, engine/starting.py): started rows to runs, runs to the execution threads or,
  met by an open circuit (engine/circuits.py), to the completer as deferrals.
- executors (`Executors`, engine/starting.py, `Worker.Concurrency` threads): parse the payload, call
  the handler, classify the outcome (engine/execution.py).
- watchdog (`Watchdog`, engine/starting.py): at a job's execution deadline sets `ctx.cancelled` and
  dead-letters it.
- completer (`Completer`, engine/completer.py): writes outcomes grouped by kind, one statement per
  kind per flush, then calls `Worker.finished`.
- heartbeats (`Heartbeats`, engine/heartbeat.py): `heartbeat()` is called by the host's scheduler
  (engine/hosting.py): one statement refreshes every job the worker owns; jobs it no longer owns
  (rescued as zombies) are cancelled and their results dropped.

Either way a job starts, it becomes processing only for an execution slot that is free at that moment,
so `processing` keeps meaning "user code is running or about to". This module holds the composition,
start/stop, the registry row, health and the completion callback.
"""

from __future__ import annotations

import logging
import os
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
from chokaq_ops.engine.claiming import Fetcher
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
from chokaq_ops.engine.releasing import Releaser
from chokaq_ops.engine.serial_writes import SerialWrites
from chokaq_ops.engine.starting import Executors, Launcher, Starter, Watchdog
from chokaq_ops.engine.tally import Tally
from chokaq_ops.engine.worker_state import WorkerState
from chokaq_ops.settings import Settings
from chokaq_ops.storage import Store, signals

log = logging.getLogger("chokaq.worker")
T = TypeVar("T")
# A registry row found locked at shutdown is tried once more after this long (see Worker.stop).
UNREGISTER_RETRY_S = 0.2


class Worker:
    """One worker identity: a set of threads sharing one prefetch buffer and one pool of slots
    (`state`, engine/worker_state.py), each thread's code in a part of its own."""

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
        self.state = state = WorkerState(int(concurrency or w.concurrency), w.prefetch)
        self.counts = state.counts
        self.serial = db = SerialWrites(store)
        self.tally = tally = Tally(self.metrics, state)
        self.circuits = Circuits(store, db, settings, self.registry, self.metrics)
        # Looked up at each call, not bound now: a wrapper set on the worker sees every written group.
        self.completer = Completer(
            state, store, db, settings, self.worker_id, finished=lambda *done: self.finished(*done)
        )
        releaser = self.releaser = Releaser(state, store, db, self.worker_id)
        launcher = self.launcher = Launcher(
            state,
            settings,
            self.registry,
            self.worker_id,
            circuits=self.circuits,
            completer=self.completer,
            tally=tally,
        )
        self.fetcher = Fetcher(
            state,
            store,
            db,
            settings,
            self.registry,
            self.worker_id,
            self.queues,
            releaser=releaser,
            launcher=launcher,
            claim_seconds=self.metrics.claim,
        )
        self.starter = Starter(state, store, db, self.worker_id, releaser=releaser, launcher=launcher)
        self.executors = Executors(state, settings.retry, completer=self.completer, tally=tally)
        self.watchdog = Watchdog(state, completer=self.completer)
        self.heartbeats = Heartbeats(
            state,
            store,
            db,
            settings,
            self.worker_id,
            completer=self.completer,
            tally=tally,
            register=self.register,
        )
        self._unregistered = False
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self._threads: list[threading.Thread] = []
        self._executors: list[threading.Thread] = []

    @property
    def concurrency(self) -> int:
        return self.state.concurrency

    @property
    def prefetch(self) -> int:
        return self.state.prefetch

    @property
    def watcher(self) -> wakeup.Watcher | None:
        return self.fetcher.watcher

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self.state.started:
            raise RuntimeError("a Worker starts once")
        self.state.started = True
        name = self.worker_id
        # The server learns which types are safe to run twice, so --idempotent-only and the console can
        # choose retries without importing handler code. Best effort: a worker starting while the database
        # is away still starts (and waits for it as it always did); the next start records them.
        try:
            self.store.register_job_types({h.type: h.idempotent for h in self.registry})
        except errors.ChokaqError as exc:
            log.warning("could not record the job types' idempotency declarations: %s", exc)
        self._threads = [
            threading.Thread(target=self.fetcher.loop, name=f"chokaq-fetch-{name}", daemon=True),
            threading.Thread(target=self.starter.loop, name=f"chokaq-start-{name}", daemon=True),
            threading.Thread(target=self.watchdog.loop, name=f"chokaq-watch-{name}", daemon=True),
        ]
        self._executors = [
            threading.Thread(target=self.executors.loop, name=f"chokaq-exec-{i}-{name}", daemon=True)
            for i in range(self.concurrency)
        ]
        if self.settings.worker.instant_pickup:
            signals.subscribe(self.store.dialect.url, self.fetcher.wake)
            self.fetcher.watcher = wakeup.acquire(
                self.store,
                change_check_interval=self.settings.worker.change_check_interval,
                polling_interval=self.settings.worker.polling_interval,
            )
        # The registry row comes before the first claim: the sweep returns a dead worker's prefetched
        # jobs by that row, so a worker killed right after claiming must already have one. A target
        # concurrency the row returns starts its extra executors itself, hence the list taken first.
        threads = [*self._threads, *self._executors]
        self.register()
        self.completer.thread.start()
        for t in threads:
            t.start()
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
        st = self.state
        if not st.started or st.stopped:
            return {}
        st.stopped = True
        grace = self.settings.worker.shutdown_grace_period if grace is None else max(0.0, grace)
        deadline = time.monotonic() + grace
        with st.lock:
            st.stopping = True
            st.cv_start.notify_all()
            st.cv_fetch.notify_all()
        if self.fetcher.watcher is not None:
            signals.unsubscribe(self.store.dialect.url, self.fetcher.wake)
            wakeup.release(self.fetcher.watcher)
        for t in self._threads[:2]:  # fetcher and starter may sit in a database call
            t.join(max(grace, 5.0))
        if self.fetcher.idle_since is not None:
            self.fetcher.unmark_idle()
        with st.lock:
            rows = [entry[3] for entry in st.buffer]
            st.buffer = []
        released = self.releaser.retry(last=True) + self.releaser.release(rows, why="shutdown")
        with st.lock:
            while st.running and time.monotonic() < deadline and not st.hurry:
                st.cv_idle.wait(max(0.0, deadline - time.monotonic()))
            leftover = [r for r in st.running if r.state == RUNNING]
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
            st.exec_q.put(None)
        with st.lock:
            st.watch_stop = True
            st.cv_watch.notify_all()
        written = self.completer.close(timeout=max(5.0, grace))
        for t in self._executors:
            t.join(0.05 if leftover else 1.0)
        self._unregistered = True
        try:
            removed = self.db(self.store.worker_unregister, self.worker_id)
            if not removed:
                # This worker's own last beat may still be writing the row (no new beat starts once
                # _unregistered is set): that lock is gone within a statement's time.
                time.sleep(UNREGISTER_RETRY_S)
                removed = self.db(self.store.worker_unregister, self.worker_id)
            if not removed:
                log.warning(
                    "worker registry row left in place worker_id=%s: another session holds it locked; it "
                    "shows as gone after the worker heartbeat timeout and retention removes it",
                    self.worker_id,
                )
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
        with self.state.lock:
            self.state.hurry = True
            self.state.cv_idle.notify_all()

    # ------------------------------------------------------------------ registry and live concurrency

    def register(self) -> None:
        """Refresh this worker's registry row (one statement; called on every heartbeat) and apply the
        operator's concurrency target it returns. Never raises: the job heartbeats matter more."""
        if self._unregistered:
            return
        with self.state.lock:
            running, prefetched = len(self.state.running), len(self.state.buffer)
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
        st = self.state
        with st.lock:
            if st.stopping:
                return
            old = st.concurrency
            st.concurrency = n
            st.free += n - old
            extra = [
                threading.Thread(
                    target=self.executors.loop, name=f"chokaq-exec-{i}-{self.worker_id}", daemon=True
                )
                for i in range(len(self._executors), n)
            ]
            self._executors.extend(extra)
            st.cv_start.notify_all()
            st.cv_fetch.notify_all()
        for t in extra:
            t.start()
        log.info("worker concurrency changed worker_id=%s from=%d to=%d", self.worker_id, old, n)

    @property
    def running(self) -> bool:
        return self.state.started and not self.state.stopped

    # ------------------------------------------------------------------ health

    def loop_age(self) -> float | None:
        """Seconds since the fetch loop last turned (the worker's in-memory heartbeat)."""
        stamp = self.state.loop_stamp
        return None if stamp is None or not self.running else time.monotonic() - stamp

    def health(self) -> dict[str, Any]:
        st = self.state
        with st.lock:
            running = len(st.running)
            overdue = sum(1 for r in st.running if r.state != RUNNING)
            prefetched = len(st.buffer)
            owned = len(st.owned)
        hb = st.heartbeat_ok
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
        return self.serial.call(fn, *args, **kwargs)

    def db_within(self, seconds: float, fn: Callable[..., T], *args: Any) -> T:
        """`db` that waits at most `seconds` for this process's SQLite write turn."""
        return self.serial.call_within(seconds, fn, *args)

    # ------------------------------------------------------------------ heartbeat

    def heartbeat(self) -> None:
        """Refresh the heartbeat of every job this worker owns in one owner-gated statement
        (engine/heartbeat.py); called by the host's scheduler."""
        self.heartbeats.beat()

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
                self.tally.child(self.metrics.succeeded, q, t).inc(n)
            elif kind == DEAD:
                self.tally.child(self.metrics.failed, q, t, reason).inc(n)
            elif kind == DEFER:
                self.metrics.circuit_deferred.labels(self.metrics.type_label(t)).inc(n)
            else:
                self.tally.child(self.metrics.retried, q, t).inc(n)
        key = {OK: "succeeded", DEAD: "dead", RETRY: "retried", DEFER: "deferred"}[kind]
        self.counts[key] += len(items) - len(refused)
        try:
            self.circuits.record(kind, [o for o in items if o.run.id in applied])
        except Exception as exc:  # the outcome is written; a lost count only delays a circuit's opening
            log.warning("circuit %s report of %d jobs failed: %s", kind, len(items), exc)
        if refused:
            self.tally.conflict(TRANSITION[kind], len(refused))
            log.warning(
                "%s not applied to %d jobs: this worker no longer owns them (a late result after a "
                "rescue or an operator's move is a no-op): %s",
                TRANSITION[kind],
                len(refused),
                ", ".join(refused[:20]),
            )
        self.forget([o.run for o in items])

    def forget(self, runs: Iterable[Run]) -> None:
        self.state.forget(runs)


def _first_line(text: str | None) -> str:
    return (text or "").split("\n", 1)[0][:300]
