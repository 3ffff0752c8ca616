"""Claiming (part of Worker): the fetch loop, the prefetch buffer, queue pause and cap state, releases.

Claims up to min(batch, free prefetch space) due jobs per statement into a bounded buffer (rows are
`fetched`: reserved, user code not started); a full batch claims again at once and grows the batch when
the starter went hungry, a short one waits `Worker.PollingInterval` (woken early when a job of a capped
queue frees capacity). Queue rows are re-read every polling interval: jobs of paused or deactivated
queues, and jobs that waited too long, go back to pending. Every turn stamps the worker's in-memory
liveness time (`loop_age()`).
"""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Sequence
from typing import Any

log = logging.getLogger("chokaq.worker")


class Claiming:
    """Mixed into Worker; uses its state (see Worker.__init__)."""

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
