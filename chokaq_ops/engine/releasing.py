"""Handing claimed jobs that will not run here back to pending: a paused queue's buffered jobs, jobs
that waited too long in the prefetch buffer, and everything claimed but not started at shutdown."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from chokaq_ops.engine.serial_writes import SerialWrites
from chokaq_ops.engine.worker_state import WorkerState
from chokaq_ops.records import ClaimedJob
from chokaq_ops.storage import Store

log = logging.getLogger("chokaq.worker")


class Releaser:
    def __init__(self, state: WorkerState, store: Store, db: SerialWrites, worker_id: str) -> None:
        self.state = state
        self.store = store
        self.db = db
        self.worker_id = worker_id
        # Releases that failed while the worker runs on, tried again by `retry` (the fetcher's queue
        # refresh): a buffered job whose start may have committed with its reply lost is processing under
        # this worker, which no fetched-job timeout ever returns, so dropping it made a false zombie.
        self._again: list[tuple[list[ClaimedJob], str]] = []
        self._again_lock = threading.Lock()

    def release(
        self, rows: Sequence[ClaimedJob], *, why: str, started: bool = False, keep: bool = False
    ) -> int:
        """Hand claimed jobs back to pending: fetched ones (attempts unchanged), or with `started` ones a
        claim started that never reached user code (the attempt it counted taken back). With `keep`, a
        release that fails is kept for `retry`; without, it is given up (shutdown) and logged."""
        if not rows:
            return 0
        job_ids = [r.id for r in rows]
        hand_back = self.store.release_unstarted if started else self.store.release
        try:
            done = self.db.call(hand_back, self.worker_id, job_ids)
        except Exception as exc:
            if keep and not started:
                with self._again_lock:
                    self._again.append((list(rows), why))
                log.warning(
                    "could not release %d claimed jobs (%s); trying again: %s", len(job_ids), why, exc
                )
                return 0
            later = (
                "the rescue sweep moves them to the DLQ as zombies"
                if started
                else "the rescue sweep returns them to pending after Recovery.FetchedJobTimeout"
            )
            log.warning("could not release %d claimed jobs (%s); %s: %s", len(job_ids), why, later, exc)
            return 0
        self.state.counts["released"] += len(done)
        log.info("released %d claimed jobs to pending (%s)", len(done), why)
        return len(done)

    def retry(self, *, last: bool = False) -> int:
        """Try the failed releases again (kept again if they fail, unless this is the `last` try, at
        shutdown). Returns how many jobs were released."""
        with self._again_lock:
            again, self._again = self._again, []
        if not again:  # the usual case, once a polling interval: no lock, no set of the held jobs
            return 0
        # A job the worker holds again by a claim it knows of is left out: either the failed release did
        # commit (its reply was lost) and a later claim of this worker took the job back, or it did not
        # and recover_claims buffered it again. Released now, that claim's start would meet a job no
        # longer fetched by this worker (tests/engine/test_releasing.py).
        known = self.state.known_ids()
        again = [(kept, why) for rows, why in again if (kept := [r for r in rows if r.id not in known])]
        return sum(self.release(rows, why=why, keep=not last) for rows, why in again)
