"""Finishing jobs in sets: outcomes collected from the execution threads are written grouped by kind,
one fenced statement per kind per flush (archive_succeeded, move_to_dlq, reschedule).

While one flush runs, the next outcomes pile up, so the set size follows the load by itself: one job
per statement when idle, hundreds under a backlog. A flush that fails transiently (the database is
restarting, a connection was killed) is retried with backoff and never dropped, so no finished job is
lost to a database blip; the heartbeat keeps such jobs alive meanwhile. A flush that fails for any other
reason is split in halves until the offending job is alone, so one bad row cannot block the others.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from chokaq_ops import errors
from chokaq_ops.engine.execution import DEAD, DEFER, OK, RETRY, Outcome
from chokaq_ops.engine.serial_writes import SerialWrites
from chokaq_ops.engine.worker_state import WorkerState
from chokaq_ops.settings import Settings
from chokaq_ops.storage import Store
from chokaq_ops.storage.worker_ops import Dead, Retry

log = logging.getLogger("chokaq.worker")

TRANSITION = {OK: "archive_succeeded", DEAD: "move_to_dlq", RETRY: "reschedule", DEFER: "defer"}
LINGER_S = 0.010  # under load, wait this long for more outcomes before a flush...
LINGER_ENOUGH = 128  # ...unless this many are already waiting


class Completer:
    """The completer thread. `finished(kind, outcomes, applied ids)` is called after each group was
    written, with the ids the store moved (the others were no longer this worker's)."""

    def __init__(
        self,
        state: WorkerState,
        store: Store,
        db: SerialWrites,
        settings: Settings,
        worker_id: str,
        *,
        finished: Callable[[str, Sequence[Outcome], set[str]], None],
    ) -> None:
        self.state = state
        self.store = store
        self.db = db
        self.settings = settings
        self.worker_id = worker_id
        self.finished = finished
        self._items: list[Outcome] = []
        self._cv = threading.Condition(threading.Lock())
        self._closing = False
        self._flushing = 0  # outcomes taken but not yet written
        # True while the loop waits for a first outcome; while it gathers more (the linger) it wakes by
        # itself, so an outcome needs to wake it only once LINGER_ENOUGH are waiting: one notify per
        # outcome was a thread switch per job.
        self._idle = False
        self._drain_deadline: float | None = None  # set by close(): give up on the database then
        self.thread = threading.Thread(target=self._loop, name=f"chokaq-completer-{worker_id}", daemon=True)
        self.flushes = 0
        self.written = 0

    # ------------------------------------------------------------------ producers

    def add(self, outcome: Outcome) -> None:
        with self._cv:
            self._items.append(outcome)
            if self._idle or len(self._items) >= LINGER_ENOUGH:
                self._cv.notify()

    def pending(self) -> int:
        with self._cv:
            return len(self._items) + self._flushing

    def close(self, timeout: float) -> bool:
        """Write what is left (retrying transient failures until `timeout`), then stop. True when
        everything was written."""
        with self._cv:
            self._closing = True
            self._drain_deadline = time.monotonic() + timeout
            self._cv.notify_all()
        self.thread.join(timeout + 5)
        return self.pending() == 0

    # ------------------------------------------------------------------ the loop

    def _loop(self) -> None:
        last_size = 0
        last_end = float("-inf")
        while True:
            with self._cv:
                while not self._items and not self._closing:
                    self._idle = True
                    self._cv.wait()
                self._idle = False
                if not self._items and self._closing:
                    return
                busy = last_size > 1 or time.monotonic() - last_end < LINGER_S
                if busy and not self._closing and len(self._items) < LINGER_ENOUGH:
                    # Busy (the last flush carried several jobs, or ended a moment ago: one slot
                    # finishing job after job): gather a little longer, as each statement costs the
                    # database a commit whatever its size and, on SQLite, holds its one writer.
                    end = time.monotonic() + LINGER_S
                    while len(self._items) < LINGER_ENOUGH and not self._closing:
                        left = end - time.monotonic()
                        if left <= 0:
                            break
                        self._cv.wait(left)
                batch, self._items = self._items, []
                last_size = len(batch)
                self._flushing = len(batch)
            try:
                self._flush(batch)
            except Exception:  # never let the completer die: log and put the outcomes back
                log.exception("completer: unexpected error; outcomes kept for the next flush")
                with self._cv:
                    self._items[:0] = batch
                time.sleep(0.5)
            finally:
                last_end = time.monotonic()
                with self._cv:
                    self._flushing = 0

    def _flush(self, batch: list[Outcome]) -> None:
        groups: dict[str, list[Outcome]] = {OK: [], DEAD: [], RETRY: [], DEFER: []}
        for o in batch:
            if o.run.lost:
                self.state.forget([o.run])  # counted when the heartbeat found it lost
                continue
            o.run.flushing = True
            groups[o.kind].append(o)
        for kind, items in groups.items():
            if items:
                self._write(kind, items)
        self.flushes += 1

    def _write(self, kind: str, items: list[Outcome]) -> None:
        """Write one group, retrying transient failures; split it when a failure is not transient."""
        delay = 0.05
        while True:
            try:
                applied = set(self.db.call(self._statement(kind), self.worker_id, self._payload(kind, items)))
            except errors.TransientStorageError as exc:
                if self._give_up():
                    self._abandon(kind, items, exc)
                    return
                log.warning(
                    "completer: %s of %d jobs failed transiently, retrying in %.2fs: %s",
                    TRANSITION[kind],
                    len(items),
                    delay,
                    exc,
                )
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            except Exception as exc:
                if len(items) == 1:
                    self._abandon(kind, items, exc)
                    return
                half = len(items) // 2
                log.warning(
                    "completer: %s of %d jobs failed (%s); retrying in smaller groups",
                    TRANSITION[kind],
                    len(items),
                    exc,
                )
                self._write(kind, items[:half])
                self._write(kind, items[half:])
                return
            self.written += len(items)
            self.finished(kind, items, applied)
            return

    def _give_up(self) -> bool:
        deadline = self._drain_deadline
        return deadline is not None and time.monotonic() >= deadline

    def _abandon(self, kind: str, items: Sequence[Outcome], exc: BaseException) -> None:
        # The rows stay processing under this worker; without heartbeats they become zombies and an
        # operator decides. Logged with every id so nothing disappears silently.
        log.error(
            "completer: could not write %s for %d jobs (%s); they stay processing and the rescue sweep "
            "will move them to the DLQ as zombies: %s",
            TRANSITION[kind],
            len(items),
            exc,
            ", ".join(o.run.id for o in items[:50]),
        )
        self.state.write_off(o.run.id for o in items)
        self.state.forget([o.run for o in items])

    def _statement(self, kind: str) -> Callable[..., list[str]]:
        if kind == DEFER:
            delay = self.settings.retry.circuit_breaker_delay
            return lambda worker_id, ids: self.store.defer(worker_id, ids, delay)
        statement: Callable[..., list[str]] = getattr(self.store, TRANSITION[kind])
        return statement

    @staticmethod
    def _payload(kind: str, items: Sequence[Outcome]) -> list[Any]:
        if kind == OK:
            return [(o.run.id, o.duration_ms) for o in items]
        if kind == DEFER:
            return [o.run.id for o in items]
        if kind == DEAD:
            return [_dead(o) for o in items]
        return [Retry(o.run.id, o.delay, o.error, o.fingerprint) for o in items]


def _dead(o: Outcome) -> Dead:
    if o.reason is None:  # every dead outcome names its reason (engine/execution.py)
        raise ValueError(f"dead outcome of job {o.run.id} without a failure reason")
    return Dead(o.run.id, o.reason, o.error or "", o.fingerprint, o.duration_ms)
