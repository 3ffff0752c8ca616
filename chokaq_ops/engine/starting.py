"""Starting and running: the launcher, the starter, the execution threads and the timeout watchdog.

Jobs reach processing two ways, both only for an execution slot that is free at that moment: the
fetcher's claim-and-start (engine/claiming.py) starts jobs for free slots no buffered job covers in the
claim statement itself; the starter marks buffered (fetched) jobs processing in sets, one statement for
as many jobs as there are free slots. Either way the launcher turns the started rows into runs and hands
them to the execution threads (or, met by an open circuit, to the completer as deferrals). Execution
threads run handlers; the watchdog cancels and dead-letters jobs at their deadline.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections import Counter
from collections.abc import Sequence

from chokaq_ops.engine.circuits import Circuits
from chokaq_ops.engine.completer import Completer
from chokaq_ops.engine.execution import (
    DEFER,
    DONE,
    RUNNING,
    TIMED_OUT,
    Outcome,
    Run,
    execute,
    preempted,
)
from chokaq_ops.engine.handlers import Registry
from chokaq_ops.engine.releasing import Releaser
from chokaq_ops.engine.serial_writes import SerialWrites
from chokaq_ops.engine.tally import Tally
from chokaq_ops.engine.worker_state import EWMA, LINGER_S, Entry, WorkerState
from chokaq_ops.models import FailureReason
from chokaq_ops.records import ClaimedJob, Started
from chokaq_ops.settings import RetrySettings, Settings
from chokaq_ops.storage import Store

log = logging.getLogger("chokaq.worker")


class Launcher:
    """Started rows to runs, runs to the execution threads: shared by the fetcher's claim-and-start and
    the starter."""

    def __init__(
        self,
        state: WorkerState,
        settings: Settings,
        registry: Registry,
        worker_id: str,
        *,
        circuits: Circuits,
        completer: Completer,
        tally: Tally,
    ) -> None:
        self.state = state
        self.settings = settings
        self.registry = registry
        self.worker_id = worker_id
        self.circuits = circuits
        self.completer = completer
        self.tally = tally
        self._timeouts: dict[str, tuple[float, str]] = {}

    def launch(self, rows: list[ClaimedJob], marked: dict[str, Started], took: int) -> None:
        """Hand the jobs the store marked processing to the execution threads; `took` slots were held
        for `rows`, and those of refused rows are given back. (A start that committed while its
        connection died is not refused: the store's mark_processing finds those rows processing under
        this worker and returns them.)"""
        now = time.monotonic()
        runs = []
        refused = []
        seen: set[str] = set()
        for row in rows:
            m = marked.get(row.id)
            if m is None:
                refused.append(row)
            elif row.id not in seen:  # one start, one run: a duplicate's slot is given back
                seen.add(row.id)
                runs.append(self.run_for(row, m, now))
        self.dispatch(runs, took)
        if refused:
            self.tally.conflict("mark_processing", len(refused))
            log.warning(
                "not started: %d jobs no longer fetched by this worker (recovered by the rescue sweep or "
                "cancelled): %s",
                len(refused),
                ", ".join(r.id for r in refused[:20]),
            )

    def dispatch(self, runs: Sequence[Run], took: int) -> None:
        """Runs onto the execution threads; `took` slots were held for them (the rest are freed). Jobs
        an open circuit meets do not run: they are deferred (engine/circuits.py)."""
        st = self.state
        runs, met = self.circuits.gate(runs)
        if met:
            with st.lock:
                for run in met:
                    st.owned[run.id] = run  # heartbeats cover them until the deferral is written
            for run in met:
                self.completer.add(Outcome(run, DEFER))
        with st.lock:
            st.free += took - len(runs)
            for run in runs:
                # By run, not by id: a job retried at once and claimed again by this worker may have a
                # run still unwinding here (its handler past a timeout, its outcome being written).
                st.running.add(run)
                st.owned[run.id] = run
            if runs:
                first = min(r.deadline for r in runs)
                if first < st.next_deadline:
                    st.cv_watch.notify()
            if took > len(runs):
                st.cv_start.notify()
                st.cv_fetch.notify()
        for run in runs:
            st.exec_q.put(run)
        started: Counter[tuple[str, str]] = Counter((r.queue, r.type) for r in runs)
        for (q, t), n in started.items():
            self.tally.child(self.tally.metrics.started, q, t).inc(n)
        st.counts["started"] += len(runs)

    def run_for(self, row: ClaimedJob, marked: Started | ClaimedJob, now: float) -> Run:
        handler = self.registry.get(row.type)
        if handler is not None and handler.timeout is not None:
            timeout, source = handler.timeout, f"@job({row.type!r}, timeout=...)"
        else:
            timeout, source = self._queue_timeout(row.queue)
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


class Starter:
    """The starter thread: marks buffered jobs processing in sets, one statement per set of free slots
    (the lease gate); refused jobs never run."""

    def __init__(
        self,
        state: WorkerState,
        store: Store,
        db: SerialWrites,
        worker_id: str,
        *,
        releaser: Releaser,
        launcher: Launcher,
    ) -> None:
        self.state = state
        self.store = store
        self.db = db
        self.worker_id = worker_id
        self.releaser = releaser
        self.launcher = launcher

    def loop(self) -> None:
        st = self.state
        failures = 0
        while True:
            with st.lock:
                entries = self._wait_for_work()
                if entries is None:
                    return
                take = len(entries)
                st.free -= take
                st.marking.update(e.job.id for e in entries)
                paused = st.paused
                st.cv_fetch.notify()
            rows = [e.job for e in entries]
            held = [r for r in rows if r.queue in paused]
            if held:
                rows = [r for r in rows if r.queue not in paused]
                self.releaser.release(held, why="queue paused", keep=True)
            try:
                marked = self.db.call(self.store.mark_processing, self.worker_id, [r.id for r in rows])
            except Exception as exc:
                failures += 1
                log.error("mark_processing of %d jobs failed (attempt %d): %s", len(rows), failures, exc)
                with st.lock:
                    for e in entries:
                        if e.job.queue not in paused:
                            heapq.heappush(st.buffer, e)
                    st.free += take
                    st.marking.difference_update(e.job.id for e in entries)
                time.sleep(min(5.0, 0.1 * 2 ** min(failures, 6)))
                continue
            failures = 0
            self.launcher.launch(rows, marked, take)
            with st.lock:
                st.marking.difference_update(e.job.id for e in entries)

    def _wait_for_work(self) -> list[Entry] | None:
        """(lock held) The buffered jobs to mark now, one per free slot, in sets (`enough_free`), or None
        when stopping."""
        st = self.state
        deadline: float | None = None
        while not st.stopping:
            if st.free > 0 and st.buffer:
                now = time.monotonic()
                if st.enough_free(st.free) or (deadline is not None and now >= deadline):
                    n = min(st.free, len(st.buffer))
                    return [heapq.heappop(st.buffer) for _ in range(n)]
                if deadline is None:
                    deadline = now + LINGER_S
            st.cv_start.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return None


class Executors:
    """What each execution thread runs (`Worker.Concurrency` threads): parse the payload, call the
    handler, classify the outcome (engine/execution.py), free the slot."""

    def __init__(
        self, state: WorkerState, policy: RetrySettings, *, completer: Completer, tally: Tally
    ) -> None:
        self.state = state
        self.policy = policy
        self.completer = completer
        self.tally = tally

    def loop(self) -> None:
        st = self.state
        while True:
            run = st.exec_q.get()
            if run is None:
                return
            if run.state != RUNNING:
                # Decided while it waited for a thread (timed out, lost, rescheduled at shutdown): the
                # job may already run elsewhere, so its user code must not start here.
                self._skip(run)
                continue
            outcome = execute(run, self.policy)
            ms = outcome.duration_ms
            with st.lock:
                if ms is not None:
                    avg = st.run_ms
                    st.run_ms = ms if avg is None else avg + EWMA * (ms - avg)
                st.free += 1
                st.running.discard(run)
                deliver = run.state == RUNNING
                if deliver:
                    run.state = DONE
                if run.queue in st.capped:
                    st.wake_fetch = True
                    st.cv_fetch.notify()
                elif st.fetch_cares(st.free - len(st.buffer)):
                    st.cv_fetch.notify()
                if st.buffer:
                    st.cv_start.notify()
                if not st.running:
                    st.cv_idle.notify_all()
            if deliver:
                self.completer.add(outcome)
            else:
                self._late(run, outcome)
            if outcome.duration_ms is not None:
                self.tally.child(self.tally.metrics.duration, run.queue, run.type).observe(
                    outcome.duration_ms / 1000.0
                )

    def _skip(self, run: Run) -> None:
        st = self.state
        with st.lock:
            st.free += 1
            st.running.discard(run)
            st.cv_start.notify()
            st.cv_fetch.notify()
            if not st.running:
                st.cv_idle.notify_all()
        log.warning(
            "job not started: it was %s before a thread was free job_id=%s type=%s",
            run.state.replace("_", " "),
            run.id,
            run.type,
        )

    def _late(self, run: Run, outcome: Outcome) -> None:
        log.warning(
            "handler returned after the job was %s; its %s result is discarded job_id=%s type=%s ran=%.0fms",
            run.state.replace("_", " "),
            outcome.kind,
            run.id,
            run.type,
            (time.monotonic() - run.mono_start) * 1000.0,
        )
        self.state.counts["late_results"] += 1


class Watchdog:
    """The watchdog thread: at a job's execution deadline sets `ctx.cancelled` and dead-letters it."""

    def __init__(self, state: WorkerState, *, completer: Completer) -> None:
        self.state = state
        self.completer = completer

    def loop(self) -> None:
        st = self.state
        while True:
            with st.lock:
                if st.watch_stop:
                    return
                now = time.monotonic()
                live = [r for r in st.running if r.state == RUNNING]
                expired = [r for r in live if r.deadline <= now]
                for r in expired:
                    r.state = TIMED_OUT
                if not expired:
                    wait = min([r.deadline for r in live if r.deadline > now] + [now + 1.0]) - now
                    st.next_deadline = now + wait
                    st.cv_watch.wait(max(0.002, wait))
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
