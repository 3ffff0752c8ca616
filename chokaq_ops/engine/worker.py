"""The worker: claims jobs in sets, starts them in sets, runs them on a pool of threads, finishes them in
sets — every write fenced by the worker id (PRODUCT §4.2-4.6, seeds 001/002).

Threads of one Worker:

- fetcher: claims up to min(batch, free prefetch space) due jobs into a bounded prefetch buffer (rows
  are `fetched`: reserved, user code not started). A full batch fetches again at once and, when the
  starter went hungry meanwhile, doubles the batch (up to `Worker.Prefetch`); a short batch waits
  `Worker.PollingInterval`, woken early when a job of a max_workers-capped queue frees capacity.
  Queue rows are re-read every polling interval: paused or deactivated queues have their buffered jobs
  released to pending, and capped queues switch the fetch to exact caps. The loop stamps an in-memory
  liveness time on every turn (`loop_age()`, the health check's worker heartbeat).
- starter: takes as many buffered jobs as there are free execution slots and marks them processing in
  one statement (the lease gate: attempt +1, started_at and heartbeat on the database clock). Jobs the
  database refuses (no longer fetched by this worker) never run. A job is only marked when a slot is
  free for it, so `processing` always means "user code is running or about to".
- executors (`Worker.Concurrency` threads): parse the payload, call the handler, classify the outcome.
- watchdog: at a job's execution deadline sets `ctx.cancelled` and dead-letters it as Timeout.
- completer (engine/completer.py): writes outcomes grouped by kind, one statement per kind per flush.

`heartbeat()` is called by the host's scheduler (engine/hosting.py): one statement refreshes every job
the worker owns; jobs it no longer owns (rescued as zombies) are cancelled and their results dropped.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from chokaq_ops import ids
from chokaq_ops.engine import handlers as handler_registry
from chokaq_ops.engine.completer import TRANSITION, Completer
from chokaq_ops.engine.execution import (
    ABANDONED,
    DEAD,
    DONE,
    HEARTBEAT_FAILED,
    LOST,
    OK,
    RETRY,
    RUNNING,
    TIMED_OUT,
    Outcome,
    Run,
    execute,
    preempted,
)
from chokaq_ops.engine.handlers import Registry
from chokaq_ops.engine.metrics import Metrics
from chokaq_ops.models import FailureReason
from chokaq_ops.settings import Settings
from chokaq_ops.storage import Store

log = logging.getLogger("chokaq.worker")
T = TypeVar("T")

START_AHEAD_MS = 5.0  # handlers of a type this fast let the starter mark one set ahead of free slots...
FAST_RUNS = 16  # ...once this many of its runs in a row were that fast
START_LINGER_S = 0.001  # a starter with under half a set of free slots waits this long for more


class Worker:
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
        self._free = self.concurrency  # slots minus jobs marked and not finished (< 0: started ahead)
        self._fast: dict[str, int] = {}  # job type -> consecutive recent runs under START_AHEAD_MS
        self._slow_running = 0  # running jobs of types not (yet) known to be fast
        self._running: dict[str, Run] = {}  # handler executing (holds a slot)
        self._owned: dict[str, Run] = {}  # marked processing, outcome not yet written
        self._paused: frozenset[str] = frozenset()
        self._capped: frozenset[str] = frozenset()
        self._exact_caps = False
        self._starved = False
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
        self._threads: list[threading.Thread] = []
        self._executors: list[threading.Thread] = []

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self._started:
            raise RuntimeError("a Worker starts once")
        self._started = True
        name = self.worker_id
        self._threads = [
            threading.Thread(target=self._fetch_loop, name=f"chokaq-fetch-{name}", daemon=True),
            threading.Thread(target=self._start_loop, name=f"chokaq-start-{name}", daemon=True),
            threading.Thread(target=self._watch_loop, name=f"chokaq-watch-{name}", daemon=True),
        ]
        self._executors = [
            threading.Thread(target=self._exec_loop, name=f"chokaq-exec-{i}-{name}", daemon=True)
            for i in range(self.concurrency)
        ]
        self.completer.thread.start()
        for t in [*self._threads, *self._executors]:
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
        if not self._started or self._stopped:
            return {}
        self._stopped = True
        grace = self.settings.worker.shutdown_grace_period if grace is None else max(0.0, grace)
        deadline = time.monotonic() + grace
        with self._lock:
            self._stopping = True
            self._cv_start.notify_all()
            self._cv_fetch.notify_all()
        for t in self._threads[:2]:  # fetcher and starter may sit in a database call
            t.join(max(grace, 5.0))
        with self._lock:
            rows = [entry[3] for entry in self._buffer]
            self._buffer = []
        released = self._release(rows, why="shutdown")
        with self._lock:
            while self._running and time.monotonic() < deadline and not self._hurry:
                self._cv_idle.wait(max(0.0, deadline - time.monotonic()))
            leftover = [r for r in self._running.values() if r.state == RUNNING]
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
            overdue = sum(1 for r in self._running.values() if r.state != RUNNING)
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

    # ------------------------------------------------------------------ fetcher

    def _fetch_loop(self) -> None:
        w = self.settings.worker
        batch = w.fetch_batch_size
        max_batch = max(w.fetch_batch_size, self.prefetch // 2)
        next_refresh = 0.0
        failures = 0
        warned = False
        while True:
            now = time.monotonic()
            self._loop_stamp = now
            if self._stopping:
                return
            if now >= next_refresh:
                self._refresh_queues(now)
                next_refresh = now + w.polling_interval
            with self._lock:
                space = self.prefetch - len(self._buffer)
                # Top up only when a whole batch fits (or the buffer ran dry): a fetch costs the same
                # planning and commit for 3 rows as for 100.
                if space < min(batch, self.prefetch) and self._buffer:
                    self._cv_fetch.wait(min(w.polling_interval, 1.0))
                    continue
                exact_caps = self._exact_caps
                all_paused = self.queues is not None and all(q in self._paused for q in self.queues)
            if all_paused:
                self._idle(w.no_queues_sleep_interval)
                continue
            if not len(self.registry):
                # Claiming with no handlers would dead-letter every job as an unknown type.
                if not warned:
                    log.warning("no job handlers registered: this worker claims nothing until some are")
                    warned = True
                self._idle(w.polling_interval)
                continue
            limit = min(space, batch)
            try:
                rows = self.db(self.store.fetch, self.worker_id, limit, self.queues, exact_caps=exact_caps)
            except Exception as exc:
                failures += 1
                pause = min(5.0, 0.25 * 2 ** min(failures, 5))
                log.error("fetch failed (attempt %d, next in %.1fs): %s", failures, pause, exc)
                self.counts["fetch_errors"] += 1
                self._idle(pause)
                continue
            failures = 0
            if rows:
                self._buffered(rows)
            if len(rows) >= limit:
                # A backlog: when the starter went hungry since the last fetch, claim more per fetch
                # (up to half the buffer, so a refill is in flight while the other half drains).
                if self._starved and batch < max_batch:
                    batch = min(max_batch, batch * 2)
                self._starved = False
                continue
            batch = w.fetch_batch_size
            self._idle(w.polling_interval)

    def _buffered(self, rows: list[dict[str, Any]]) -> None:
        now = time.monotonic()
        with self._lock:
            stopping = self._stopping
            if not stopping:
                for row in rows:
                    heapq.heappush(self._buffer, (-row["priority"], row["due_at"], next(self._seq), row, now))
                self._cv_start.notify()
        if stopping:  # a fetch that was in flight when shutdown began: hand its rows straight back
            self._release(rows, why="shutdown")
            return
        self.counts["fetched"] += len(rows)

    def _idle(self, seconds: float) -> None:
        """Wait after a short fetch; wakes early on stop or when a capped queue freed a slot."""
        end = time.monotonic() + seconds
        with self._lock:
            self._wake_fetch = False
            while not self._stopping and not self._wake_fetch:
                left = end - time.monotonic()
                if left <= 0:
                    return
                self._cv_fetch.wait(min(left, 1.0))
                self._loop_stamp = time.monotonic()

    def _refresh_queues(self, now: float) -> None:
        """Re-read queue control rows: pause state and caps; release what must not stay buffered."""
        try:
            rows = self.store.run("queue_rows", write=False, name=None)
        except Exception as exc:
            log.warning("cannot read queue rows (keeping the last known state): %s", exc)
            rows = None
        stale_after = self.settings.recovery.fetched_job_timeout / 2
        with self._lock:
            if rows is not None:
                self._paused = frozenset(r["name"] for r in rows if r["paused"] or not r["active"])
                self._capped = frozenset(
                    r["name"] for r in rows if r["max_workers"] is not None and r["name"] not in self._paused
                )
                self._exact_caps = any(self.queues is None or q in self.queues for q in self._capped)
            keep, paused, stale = [], [], []
            for entry in self._buffer:
                if entry[3]["queue"] in self._paused:
                    paused.append(entry[3])
                elif now - entry[4] > stale_after:
                    # Released before the rescue sweep would recover it: another worker may start it sooner.
                    stale.append(entry[3])
                else:
                    keep.append(entry)
            if paused or stale:
                heapq.heapify(keep)
                self._buffer = keep
                self._cv_fetch.notify()
        if paused:
            self._release(paused, why="queue paused")
        if stale:
            self._release(stale, why="waited too long in the prefetch buffer")

    def _release(self, rows: Sequence[dict[str, Any]], *, why: str) -> int:
        if not rows:
            return 0
        job_ids = [r["id"] for r in rows]
        try:
            done = self.db(self.store.release, self.worker_id, job_ids)
        except Exception as exc:
            log.warning(
                "could not release %d prefetched jobs (%s); the rescue sweep returns them to pending "
                "after Recovery.FetchedJobTimeout: %s",
                len(job_ids),
                why,
                exc,
            )
            return 0
        self.counts["released"] += len(done)
        log.info("released %d prefetched jobs to pending (%s)", len(done), why)
        return len(done)

    # ------------------------------------------------------------------ starter

    def _start_loop(self) -> None:
        failures = 0
        while True:
            with self._lock:
                entries = self._wait_for_work()
                if entries is None:
                    return
                take = len(entries)
                self._free -= take
                paused = self._paused
                self._cv_fetch.notify()
            rows = [e[3] for e in entries]
            held = [r for r in rows if r["queue"] in paused]
            if held:
                rows = [r for r in rows if r["queue"] not in paused]
                self._release(held, why="queue paused")
            try:
                marked = self.db(self.store.mark_processing, self.worker_id, [r["id"] for r in rows])
            except Exception as exc:
                failures += 1
                log.error("mark_processing of %d jobs failed (attempt %d): %s", len(rows), failures, exc)
                with self._lock:
                    for e in entries:
                        if e[3]["queue"] not in paused:
                            heapq.heappush(self._buffer, e)
                    self._free += take
                time.sleep(min(5.0, 0.1 * 2 ** min(failures, 6)))
                continue
            failures = 0
            self._launch(rows, marked, take)

    def _wait_for_work(self) -> list[tuple[Any, ...]] | None:
        """(lock held) The next set to mark, or None when stopping. With jobs still running and less
        than half a set of slots free, wait up to START_LINGER_S for more to free up: the slots of a
        set of fast jobs free within a moment of each other, and one statement for all of them costs
        the database the same as one for the first few."""
        deadline: float | None = None
        while not self._stopping:
            avail = self._free + (self.concurrency if self._slow_running == 0 else 0)
            if avail > 0 and self._buffer:
                now = time.monotonic()
                enough = avail >= max(1, self.concurrency // 2) or not self._running
                if enough or (deadline is not None and now >= deadline):
                    entries = self._take()
                    if entries:
                        return entries
                    deadline = None
                elif deadline is None:
                    deadline = now + START_LINGER_S
            elif self._free > 0:
                self._starved = True
            self._cv_start.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return None

    def _take(self) -> list[tuple[Any, ...]]:
        """Buffered jobs to mark now (lock held): one per free slot, plus - while every running job and
        the candidates are of types whose recent runs all took under START_AHEAD_MS - up to one more set
        queued behind the running ones. Those start within milliseconds, and marking them in the same
        statement halves the round trips per job when handlers are fast."""
        buffer, fast = self._buffer, self._fast
        entries = [heapq.heappop(buffer) for _ in range(min(max(self._free, 0), len(buffer)))]
        if self._slow_running == 0 and all(fast.get(e[3]["type"], 0) >= FAST_RUNS for e in entries):
            extra = self._free - len(entries) + self.concurrency
            while extra > 0 and buffer and fast.get(buffer[0][3]["type"], 0) >= FAST_RUNS:
                entries.append(heapq.heappop(buffer))
                extra -= 1
        return entries

    def _launch(self, rows: list[dict[str, Any]], marked: dict[str, dict[str, Any]], took: int) -> None:
        now = time.monotonic()
        runs = []
        refused = []
        for row in rows:
            m = marked.get(row["id"])
            if m is None:
                refused.append(row["id"])
            else:
                runs.append(self._run_for(row, m, now))
        with self._lock:
            self._free += took - len(runs)
            for run in runs:
                self._running[run.id] = run
                self._owned[run.id] = run
                run.slow = self._fast.get(run.type, 0) < FAST_RUNS
                self._slow_running += run.slow
            if runs:
                first = min(r.deadline for r in runs)
                if first < self._next_deadline:
                    self._cv_watch.notify()
            if took > len(runs):
                self._cv_start.notify()
        for run in runs:
            self._exec_q.put(run)
        if refused:
            self._conflict("mark_processing", len(refused))
            log.warning(
                "not started: %d jobs no longer fetched by this worker (recovered by the rescue sweep or "
                "cancelled): %s",
                len(refused),
                ", ".join(refused[:20]),
            )
        started: Counter[tuple[str, str]] = Counter((r.queue, r.type) for r in runs)
        for (q, t), n in started.items():
            self._child(self.metrics.started, q, t).inc(n)
        self.counts["started"] += len(runs)

    def _run_for(self, row: dict[str, Any], marked: dict[str, Any], now: float) -> Run:
        handler = self.registry.get(row["type"])
        if handler is not None and handler.timeout is not None:
            timeout, source = handler.timeout, f"@job({row['type']!r}, timeout=...)"
        else:
            timeout, source = self._queue_timeout(row["queue"])
        max_attempts = (
            handler.max_attempts
            if handler is not None and handler.max_attempts is not None
            else self.settings.retry.max_attempts
        )
        return Run(
            row,
            marked,
            handler,
            worker_id=self.worker_id,
            max_attempts=max_attempts,
            timeout=timeout,
            timeout_source=source,
            now=now,
        )

    def _queue_timeout(self, queue_name: str) -> tuple[float, str]:
        found = self._timeouts.get(queue_name)
        if found is None:
            folded = queue_name.casefold()
            per_queue = any(
                n.casefold() == folded and q.execution_timeout is not None
                for n, q in self.settings.queues.items()
            )
            source = f"Queues.{queue_name}.ExecutionTimeout" if per_queue else "Execution.DefaultTimeout"
            found = (self.settings.execution_timeout_for(queue_name), source)
            self._timeouts[queue_name] = found
        return found

    # ------------------------------------------------------------------ executors

    def _exec_loop(self) -> None:
        policy = self.settings.retry
        while True:
            run = self._exec_q.get()
            if run is None:
                return
            outcome = execute(run, policy)
            with self._lock:
                self._free += 1
                self._running.pop(run.id, None)
                self._slow_running -= run.slow
                ms = outcome.duration_ms
                fast = run.state == RUNNING and ms is not None and ms <= START_AHEAD_MS
                self._fast[run.type] = min(self._fast.get(run.type, 0) + 1, FAST_RUNS) if fast else 0
                deliver = run.state == RUNNING
                if deliver:
                    run.state = DONE
                if run.queue in self._capped:
                    self._wake_fetch = True
                    self._cv_fetch.notify()
                self._cv_start.notify()
                if not self._running:
                    self._cv_idle.notify_all()
            if deliver:
                self.completer.add(outcome)
            else:
                self._late(run, outcome)
            if outcome.duration_ms is not None:
                self._child(self.metrics.duration, run.queue, run.type).observe(outcome.duration_ms / 1000.0)

    def _late(self, run: Run, outcome: Outcome) -> None:
        log.warning(
            "handler returned after the job was %s; its %s result is discarded job_id=%s type=%s ran=%.0fms",
            run.state.replace("_", " "),
            outcome.kind,
            run.id,
            run.type,
            (time.monotonic() - run.mono_start) * 1000.0,
        )
        self.counts["late_results"] += 1

    # ------------------------------------------------------------------ watchdog (execution timeouts)

    def _watch_loop(self) -> None:
        while True:
            with self._lock:
                if self._watch_stop:
                    return
                now = time.monotonic()
                live = [r for r in self._running.values() if r.state == RUNNING]
                expired = [r for r in live if r.deadline <= now]
                for r in expired:
                    r.state = TIMED_OUT
                if not expired:
                    wait = min([r.deadline for r in live if r.deadline > now] + [now + 1.0]) - now
                    self._next_deadline = now + wait
                    self._cv_watch.wait(max(0.002, wait))
                    continue
            for r in expired:
                r.ctx.cancel("timeout")
                text = (
                    f"Timeout: execution exceeded {r.timeout:g}s ({r.timeout_source}); ctx.cancelled was "
                    f"set and the job was dead-lettered at the deadline (attempt {r.attempt})"
                )
                self.completer.add(preempted(r, FailureReason.Timeout, text))
                log.warning(
                    "job timed out job_id=%s type=%s queue=%s timeout=%gs source=%s",
                    r.id,
                    r.type,
                    r.queue,
                    r.timeout,
                    r.timeout_source,
                )

    # ------------------------------------------------------------------ heartbeat

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
            else:
                self._child(self.metrics.retried, q, t).inc(n)
        self.counts[{OK: "succeeded", DEAD: "dead", RETRY: "retried"}[kind]] += len(items) - len(refused)
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
                self._owned.pop(r.id, None)
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
