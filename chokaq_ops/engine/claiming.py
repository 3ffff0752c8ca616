"""Claiming: the fetch loop, claim-and-start, the prefetch buffer, queue pause and cap state.

Every claim is one statement. When execution slots are free that no buffered job covers, the claim
starts jobs for exactly those slots in the same statement (claim-and-start: rows go from pending
straight to processing and are handed to the free threads at once) and tops the prefetch buffer up
with the rest (rows `fetched`: reserved, user code not started). A job therefore becomes processing only
for a slot that is free at that moment, whichever way it starts. A claim that comes back short (no more
due work) waits `Worker.PollingInterval` (woken early when a job of a capped queue frees capacity).
Queue rows are re-read every polling interval: jobs of paused or deactivated queues, and jobs that
waited too long, go back to pending. Every turn stamps the worker's in-memory liveness time
(`loop_age()`).
"""

from __future__ import annotations

import heapq
import logging
import time
from typing import Any

from chokaq_ops.engine import wakeup
from chokaq_ops.engine.handlers import Registry
from chokaq_ops.engine.releasing import Releaser
from chokaq_ops.engine.serial_writes import SerialWrites
from chokaq_ops.engine.starting import Launcher
from chokaq_ops.engine.worker_state import EWMA, LINGER_S, Entry, WorkerState
from chokaq_ops.records import ClaimedJob
from chokaq_ops.settings import Settings
from chokaq_ops.storage import Store

log = logging.getLogger("chokaq.worker")

FAST_CLAIMS = 4.0  # handlers taking less than this many claim round trips on average are fast
IDLE_MARK_REFRESH_S = 20.0  # an idle worker's mark is renewed this often (it counts for a minute)
_WAIT = object()  # _next_claim: nothing to claim yet, turn the loop (stamp, refresh) and ask again


class Fetcher:
    """The fetcher thread: one claim statement per set, the prefetch buffer topped up, paused queues'
    buffered jobs released, wake-ups (engine/wakeup.py) ending its idle waits."""

    def __init__(
        self,
        state: WorkerState,
        store: Store,
        db: SerialWrites,
        settings: Settings,
        registry: Registry,
        worker_id: str,
        queues: tuple[str, ...] | None,
        *,
        releaser: Releaser,
        launcher: Launcher,
        claim_seconds: Any = None,
    ) -> None:
        self.state = state
        # The claim histogram (Metrics.claim), observed once per claim statement.
        self.claim_seconds = claim_seconds
        self.store = store
        self.db = db
        self.settings = settings
        self.registry = registry
        self.worker_id = worker_id
        self.queues = queues
        self.releaser = releaser
        self.launcher = launcher
        self.watcher: wakeup.Watcher | None = None  # set by Worker.start with instant pickup
        self.idle_since: float | None = None  # monotonic time of this worker's idle mark (PostgreSQL)

    def loop(self) -> None:
        st = self.state
        w = self.settings.worker
        next_refresh = 0.0
        failures = 0
        warned = False
        while True:
            now = time.monotonic()
            st.loop_stamp = now
            if st.stopping:
                return
            if now >= next_refresh:
                self._refresh_queues(now)
                next_refresh = now + w.polling_interval
            if self.store.claims_uncertain(self.worker_id):
                self._recover_claims()
            with st.lock:
                all_paused = self.queues is not None and all(q in st.paused for q in self.queues)
            if all_paused:
                self._idle(w.no_queues_sleep_interval)
                continue
            queues = self._claim_queues()
            if queues is not self.queues and not warned:
                # Claiming with no handlers would dead-letter every job as an unknown type.
                log.warning("no job handlers registered: this worker claims no jobs (but built-in ones, "
                            "such as alert deliveries) until some are")  # fmt: skip
                warned = True
            if queues == ():
                self._idle(w.polling_interval)
                continue
            with st.lock:
                plan = self._next_claim(min(w.polling_interval, 1.0))
                if plan is None:
                    return
                if not isinstance(plan, tuple):  # _WAIT
                    continue
                start, limit = plan
                st.free -= start  # held for the jobs this claim starts
                exact_caps = st.exact_caps
                # A wake-up from here on may be for a job this claim misses: it keeps the idle wait short.
                st.wake_fetch = False
            began = time.perf_counter()
            try:
                rows = self.db.call(
                    self.store.fetch, self.worker_id, limit, queues, exact_caps=exact_caps, start=start
                )
                seconds = time.perf_counter() - began
                if self.claim_seconds is not None:
                    self.claim_seconds.observe(seconds)
                ms = seconds * 1000.0
                st.claim_ms = ms if st.claim_ms is None else st.claim_ms + EWMA * (ms - st.claim_ms)
            except Exception as exc:
                with st.lock:
                    st.free += start
                    st.cv_start.notify()
                failures += 1
                pause = min(5.0, 0.25 * 2 ** min(failures, 5))
                log.error("fetch failed (attempt %d, next in %.1fs): %s", failures, pause, exc)
                st.counts["fetch_errors"] += 1
                self._idle(pause)
                continue
            failures = 0
            self._claimed(rows, start)
            if len(rows) < limit:
                if self._mark_idle():
                    continue  # newly marked: an enqueue that did not see the mark yet did not notify
                self._idle(self._until_due(w.polling_interval))
            elif self.idle_since is not None:
                self.unmark_idle()

    def _mark_idle(self) -> bool:
        """PostgreSQL: mark this worker as waiting, so that enqueues NOTIFY (they skip it while every
        worker is busy: a notifying commit holds a database-wide lock until it is flushed). The mark is
        refreshed every IDLE_MARK_REFRESH_S while idle; older than a minute it no longer counts (a
        worker that died). True when the worker was not marked before."""
        if self.watcher is None or self.store.dialect.name != "postgresql":
            return False
        now = time.monotonic()
        fresh = self.idle_since is not None and now - self.idle_since < IDLE_MARK_REFRESH_S
        if fresh:
            return False
        was_marked = self.idle_since is not None
        try:
            self.db.call(self.store.run, "mark_idle", worker_id=self.worker_id)
        except Exception as exc:
            log.warning("cannot mark the worker idle (new jobs wait for the poll): %s", exc)
            return False
        self.idle_since = now
        return not was_marked

    def unmark_idle(self) -> None:
        try:
            self.db.call(self.store.run, "unmark_idle", worker_id=self.worker_id)
            self.idle_since = None
        except Exception as exc:
            log.warning("cannot unmark the worker idle (enqueues keep notifying): %s", exc)

    def _claim_queues(self) -> tuple[str, ...] | None:
        """This worker's queues (None: every queue) while a handler of the user's is registered; else only
        the queues of the built-in handlers among them (alert deliveries, docs/alerts.md), () for none."""
        if self.registry.has_user_handlers():
            return self.queues
        return tuple(q for q in self.registry.builtin_queues() if self.queues is None or q in self.queues)

    def _until_due(self, polling: float) -> float:
        """How long an idle loop waits: the polling interval, or less when a delayed job of this worker's
        queues falls due sooner (woken a millisecond after, so that the claim finds it due)."""
        if self.watcher is None:
            return polling
        try:
            wait = self.db.call(self.store.next_due, self._claim_queues() or None)
        except Exception as exc:
            log.warning("cannot read the next due time (polling instead): %s", exc)
            return polling
        return polling if wait is None else min(polling, wait + 0.001)

    def wake(self) -> None:
        """Jobs may have become claimable (engine/wakeup.py): end the idle wait."""
        st = self.state
        with st.lock:
            st.wake_fetch = True
            st.cv_fetch.notify()

    def _next_claim(self, timeout: float) -> tuple[int, int] | object | None:
        """(lock held) Wait for something to claim; (jobs to start, jobs to claim), `_WAIT` after
        `timeout`, None when stopping.

        Free slots that the buffer cannot fill are started by the claim itself, in sets
        (`enough_free`). The buffer is topped up by up to `Worker.FetchBatchSize` jobs in the same
        statement, and by a claim of its own only when a whole batch fits or it ran dry."""
        st = self.state
        end = time.monotonic() + timeout
        linger: float | None = None
        batch = self.settings.worker.fetch_batch_size
        while not st.stopping:
            buffered = len(st.buffer)
            space = max(0, self._depth() - buffered)
            # Top the buffer up only when a whole batch fits (or it ran dry): a claim costs the
            # database about the same for 3 rows as for 20.
            refill = min(space, batch) if space >= min(batch, st.prefetch) or not buffered else 0
            uncovered = st.free - buffered
            now = time.monotonic()
            if uncovered > 0:
                if st.enough_free(uncovered) or (linger is not None and now >= linger):
                    return uncovered, uncovered + refill
                if linger is None:
                    linger = now + LINGER_S
            elif refill:
                return 0, refill
            wake = end if linger is None else min(end, linger)
            if now >= end:
                return _WAIT
            st.cv_fetch.wait(max(0.0, wake - now))
        return None

    def _depth(self) -> int:
        """(lock held) How many fetched jobs to keep buffered: up to `Worker.Prefetch` while handlers
        run long next to a claim's round trip, so a slot that frees starts a buffered job after one
        short statement; none while they are fast (a few claim round trips or less), where every
        buffered job would cost the database one more row update (fetched -> processing) for a wait
        no longer than a claim's, and claim-and-start alone keeps the slots busy."""
        run_ms, claim_ms = self.state.run_ms, self.state.claim_ms
        if run_ms is not None and claim_ms is not None and run_ms < FAST_CLAIMS * claim_ms:
            return 0
        return self.state.prefetch

    def _claimed(self, rows: list[ClaimedJob], held: int) -> None:
        """Started rows to the execution threads (`held` slots were kept free for them), fetched rows
        to the buffer. A claim that was in flight when shutdown began hands all its rows back."""
        st = self.state
        started = [r for r in rows if r.status == "processing"]
        fetched = [r for r in rows if r.status != "processing"]
        if started and st.stopping:
            self.releaser.release(started, why="shutdown", started=True)
            started = []
        now = time.monotonic()
        # A started row carries its start (attempt, started_at): it is its own `Started`.
        self.launcher.dispatch([self.launcher.run_for(r, r, now) for r in started], held)
        if fetched:
            self.buffered(fetched)
        st.counts["fetched"] += len(started)
        st.counts["claim_started"] += len(started)

    def _recover_claims(self) -> None:
        """A claim failed or was retried: it may have committed rows this worker never saw. Every row
        held under the worker's id that it does not know of is such a row; the store turns the started
        ones back to fetched (they never ran), and they join the buffer."""
        try:
            rows = self.db.call(self.store.recover_claims, self.worker_id, self.state.known_ids())
        except Exception as exc:
            log.warning("cannot check for jobs of a claim whose reply was lost (trying again): %s", exc)
            return
        if rows:
            log.warning("recovered %d jobs claimed while a connection was lost; buffered", len(rows))
            self.buffered(rows)

    def buffered(self, rows: list[ClaimedJob]) -> None:
        """Fetched rows into the prefetch buffer (handed straight back when shutdown has begun)."""
        st = self.state
        now = time.monotonic()
        with st.lock:
            stopping = st.stopping
            if not stopping:
                # One entry per id, the latest claim's: a job claimed again while an older entry of it
                # waits (returned to pending by the sweep, then re-claimed) must never run twice.
                incoming = {row.id: row for row in rows}
                if any(e.job.id in incoming for e in st.buffer):
                    st.buffer = [e for e in st.buffer if e.job.id not in incoming]
                    heapq.heapify(st.buffer)
                for row in incoming.values():
                    heapq.heappush(st.buffer, Entry(-row.priority, row.due_at, next(st.seq), row, now))
                st.cv_start.notify()
        if stopping:  # a fetch that was in flight when shutdown began: hand its rows straight back
            self.releaser.release(rows, why="shutdown")
            return
        st.counts["fetched"] += len(rows)

    def _idle(self, seconds: float) -> None:
        """Wait after a short fetch; wakes early on stop or when a capped queue freed a slot."""
        st = self.state
        end = time.monotonic() + seconds
        with st.lock:
            while not st.stopping and not st.wake_fetch:
                left = end - time.monotonic()
                if left <= 0:
                    return
                st.cv_fetch.wait(min(left, 1.0))
                st.loop_stamp = time.monotonic()
            st.wake_fetch = False

    def _refresh_queues(self, now: float) -> None:
        """Re-read queue control rows: pause state and caps; release what must not stay buffered."""
        st = self.state
        try:
            rows = self.store.run("queue_rows", write=False, name=None)
        except Exception as exc:
            log.warning("cannot read queue rows (keeping the last known state): %s", exc)
            rows = None
        stale_after = self.settings.recovery.fetched_job_timeout / 2
        with st.lock:
            if rows is not None:
                st.paused = frozenset(r["name"] for r in rows if r["paused"] or not r["active"])
                st.capped = frozenset(
                    r["name"] for r in rows if r["max_workers"] is not None and r["name"] not in st.paused
                )
                st.exact_caps = any(self.queues is None or q in self.queues for q in st.capped)
            keep, paused, stale = [], [], []
            for entry in st.buffer:
                if entry.job.queue in st.paused:
                    paused.append(entry.job)
                elif now - entry.fetched_at > stale_after:
                    # Released before the rescue sweep would recover it: another worker may start it sooner.
                    stale.append(entry.job)
                else:
                    keep.append(entry)
            if paused or stale:
                heapq.heapify(keep)
                st.buffer = keep
                st.cv_fetch.notify()
        self.releaser.retry()
        if paused:
            self.releaser.release(paused, why="queue paused", keep=True)
        if stale:
            self.releaser.release(stale, why="waited too long in the prefetch buffer", keep=True)
