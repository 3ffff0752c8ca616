"""The state one Worker's threads share: the prefetch buffer, the execution slots, the runs it owns and
runs, its counters, and the one lock (with its conditions) that guards them.

Every part of the worker (engine/claiming.py, engine/starting.py, engine/heartbeat.py,
engine/completer.py, engine/releasing.py) gets this object in its constructor. The fields that decide
what runs (buffer, slots, owned and running runs, queue state, the stop flags) change only under
`lock`; the comments name the fields read or written without it.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from typing import NamedTuple

from chokaq_ops.engine.execution import Run
from chokaq_ops.records import ClaimedJob

LINGER_S = 0.001  # with under half the slots free and jobs running, wait this long for more
EWMA = 0.05  # weight of the newest sample in the moving averages of run and claim times


class Entry(NamedTuple):
    """A fetched job in the prefetch buffer, a heap in claim order (priority first, then due time)."""

    neg_priority: int
    due_at: datetime
    seq: int
    job: ClaimedJob
    fetched_at: float  # monotonic


class WorkerState:
    def __init__(self, concurrency: int, prefetch: int) -> None:
        self.lock = threading.Lock()
        self.cv_start = threading.Condition(self.lock)  # the starter: buffered jobs and free slots
        self.cv_fetch = threading.Condition(self.lock)  # the fetcher: room to claim, wake-ups
        self.cv_idle = threading.Condition(self.lock)  # shutdown: the last running handler returned
        self.cv_watch = threading.Condition(self.lock)  # the watchdog: an earlier deadline
        self.concurrency = concurrency
        self.prefetch = prefetch
        self.buffer: list[Entry] = []  # a heap
        self.seq = itertools.count()
        self.free = concurrency  # slots not running a job nor held for a start in flight
        self.marking: set[str] = set()  # buffered jobs taken by the starter, start not yet settled
        self.written_off: set[str] = set()  # outcome unwritable: left processing for the sweep
        self.run_ms: float | None = None  # moving average of handler durations...
        self.claim_ms: float | None = None  # ...and of claim round trips (the fetcher's): see Fetcher._depth
        self.running: set[Run] = set()  # handler executing (holds a slot)
        self.owned: dict[str, Run] = {}  # marked processing, outcome not yet written (latest run per id)
        self.exec_q: queue.SimpleQueue[Run | None] = queue.SimpleQueue()  # runs for the executors (no lock)
        self.paused: frozenset[str] = frozenset()
        self.capped: frozenset[str] = frozenset()
        self.exact_caps = False
        self.wake_fetch = False
        self.next_deadline = 0.0
        self.started = False  # start() and stop() ran: set by the worker's lifecycle, read freely
        self.stopped = False
        self.stopping = False
        self.hurry = False
        self.watch_stop = False
        self.loop_stamp: float | None = None  # the fetch loop's last turn (written without the lock)
        self.heartbeat_ok: float | None = None  # the last heartbeat write that landed (ditto)
        self.counts: Counter[str] = Counter()  # events for health(); some bumped outside the lock

    def known_ids(self) -> set[str]:
        """The jobs this worker holds by a claim it knows of: buffered, being started, owned (running or
        its outcome being written) and written off. Takes the lock."""
        with self.lock:
            known = {e.job.id for e in self.buffer}
            known.update(self.owned, self.marking, self.written_off)
        return known

    def enough_free(self, free: int) -> bool:
        """(lock held) Whether `free` slots are worth one statement now: half of them, or nothing runs.
        Otherwise claim and start wait up to LINGER_S for more, since the slots of a set of fast jobs
        free within a moment of each other and one statement for all costs the same as for a few."""
        return free >= max(1, self.concurrency // 2) or not self.running

    def fetch_cares(self, uncovered: int) -> bool:
        """(lock held) Whether a slot just freed, leaving `uncovered` free slots no buffered job covers,
        changes what the fetcher does: the first such slot starts its linger, the set turning big
        enough (`enough_free`) or the last job ending ends it early. Between those it wakes by itself at
        the linger's end; waking it for every finished job cost a thread switch per job."""
        if uncovered <= 0:
            return False
        return uncovered == 1 or uncovered == max(1, self.concurrency // 2) or not self.running

    def forget(self, runs: Iterable[Run]) -> None:
        """Outcomes written (or given up on): those runs are no longer the worker's to heartbeat."""
        with self.lock:
            for r in runs:
                if self.owned.get(r.id) is r:
                    del self.owned[r.id]
                r.flushing = False

    def write_off(self, job_ids: Iterable[str]) -> None:
        """Outcomes that could not be written: the rows stay processing (they did run), so a claim whose
        reply was lost must not take them for unclaimed rows."""
        with self.lock:
            self.written_off.update(job_ids)
