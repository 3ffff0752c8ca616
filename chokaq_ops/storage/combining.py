"""Combining: calls from many threads of one process that arrive while others are in flight share one
database statement (docs/producers.md, "Many threads share statements").

Up to `leaders` calls run at once, each as a statement of its own. A call that arrives while all of them
are in flight waits; the next leader to finish hands every waiting call (up to `max_group`) to the first
of them, which runs them as one group and one transaction, and each caller gets its own result. So a
lone caller never waits, and sixteen threads enqueueing one job each commit a few groups per round trip
instead of sixteen single statements that queue up for the connection pool and the WAL flush.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar, cast

T = TypeVar("T")
R = TypeVar("R")


class _Slot(Generic[T, R]):
    __slots__ = ("error", "group", "item", "leads", "ready", "result")

    def __init__(self, item: T) -> None:
        self.item = item
        self.leads = False  # handed a group to run (its own call first)
        self.result: R | None = None
        self.error: BaseException | None = None
        self.group: list[_Slot[T, R]] = []
        # Held while the slot waits for work or a result: one lock per waiter wakes exactly that thread
        # (a shared condition would wake all sixteen on every hand-over).
        self.ready = threading.Lock()


class Combiner(Generic[T, R]):
    """`submit(item)` runs `run_group([items...])` for a group of concurrent submissions; `run_group`
    returns one result per item, in order, or raises (every caller of that group then raises it)."""

    def __init__(
        self,
        run_group: Callable[[list[T]], Sequence[R]],
        *,
        leaders: int,
        max_group: int,
        weight: Callable[[T], int] = lambda item: 0,
        max_weight: int = 0,
    ) -> None:
        if leaders < 1 or max_group < 1:
            raise ValueError("leaders and max_group must be at least 1")
        self._run_group = run_group
        self._leaders = leaders
        self._max_group = max_group
        # A group also stops before its items' total weight (say, payload bytes) passes max_weight, so
        # that a statement stays a sensible size; a single item goes alone whatever it weighs.
        self._weight = weight
        self._max_weight = max_weight
        self._lock = threading.Lock()
        self._leading = 0
        self._waiting: list[_Slot[T, R]] = []

    def waiting(self) -> int:
        """Calls waiting for a leader to take them (none while the leaders keep up)."""
        with self._lock:
            return len(self._waiting)

    def submit(self, item: T) -> R:
        slot: _Slot[T, R] = _Slot(item)
        waits = False
        with self._lock:
            if self._leading < self._leaders:
                self._leading += 1
                slot.leads = True
                slot.group = [slot]
            else:
                slot.ready.acquire()
                self._waiting.append(slot)
                waits = True
        if waits:
            try:
                slot.ready.acquire()  # released by the leader that hands this slot work or a result
            except BaseException:
                self._interrupted(slot)
                raise
        if slot.leads:
            self._lead(slot.group)
        if slot.error is not None:
            raise slot.error
        return cast(R, slot.result)

    def _interrupted(self, slot: _Slot[T, R]) -> None:
        """The wait of `slot` ended by an exception (Ctrl-C in the main thread). Still waiting: it
        withdraws, its item never runs. Already handed a group to lead: it runs that group first, or the
        group's other callers would wait for ever. Already in another's group: the result is dropped."""
        with self._lock:
            if slot in self._waiting:
                self._waiting.remove(slot)
                return
            lead = slot.leads
        if lead:
            self._lead(slot.group)

    def _lead(self, group: list[_Slot[T, R]]) -> None:
        results: Sequence[R] = ()
        error: BaseException | None = None
        try:
            results = self._run_group([s.item for s in group])
            if len(results) != len(group):
                error = RuntimeError(f"a group of {len(group)} calls returned {len(results)} results")
        except BaseException as exc:  # every caller of the group must hear of it, even of an interrupt
            error = exc
        for n, s in enumerate(group):
            if error is None:
                s.result = results[n]
            else:
                s.error = error
        with self._lock:
            successor = self._waiting[0] if self._waiting else None
            if successor is None:
                self._leading -= 1
            else:
                # Leadership passes on with the waiting group: this leader's own caller returns now.
                successor.group = self._next_group()
                successor.leads = True
        for s in group[1:]:
            s.ready.release()
        if successor is not None:
            successor.ready.release()

    def _next_group(self) -> list[_Slot[T, R]]:
        """(lock held) The waiting calls, oldest first, that the next group takes."""
        n, total = 0, 0
        for slot in self._waiting[: self._max_group]:
            total += self._weight(slot.item)
            if n and self._max_weight and total > self._max_weight:
                break
            n += 1
        group = self._waiting[:n]
        del self._waiting[:n]
        return group
