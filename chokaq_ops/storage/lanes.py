"""Where a PostgreSQL worker's claims find pending jobs: its lanes, their positions, its last snapshot.

A lane is the pending jobs of one (queue, priority), in claim order (due_at, id). A worker remembers, per
lane, the position where the jobs it has not claimed begin, and its claim reads each lane from there, so
the index entries of jobs claimed earlier (dead, but kept as long as any session holds an old snapshot)
are walked once, not by every claim. A job lands behind a position only through a transaction the
previous claim could not see; the claim reads those through `ready_xid` (sql/postgresql/queries.sql,
`fetch`). docs/endurance.md has the whole argument; this module keeps the worker's side of it.

SQLite needs none of this: it removes a deleted row's index entries at once.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# A lane's first candidate left by claims that took jobs after it (another session holds it locked) is
# passed once that has lasted this long: the lane reads on after it, and the claim looks it up by its
# ctid until it is claimed or gone. Holding the position there instead would make every claim walk the
# entries of all jobs claimed after it.
STUCK_S = 5.0
MAX_STUCK = 1_000
# A lane that held no pending job for this long is forgotten; a job that enters it later is made by a
# transaction the worker's next claim reads anyway.
FORGET_S = 60.0
# The columns of a claim's rows that are not the job's (see `fetch`'s result).
_EXTRA = ("kind", "snap_xmax", "snap_xip", "tid")
START = "-infinity"  # the position of a lane read from its start


@dataclass(slots=True)
class Position:
    due: str  # due_at as the server reads it back (ISO text, exact to the microsecond), or START
    id: str
    passed: bool  # the row at (due, id) itself is behind the position
    empty_since: float | None = None
    at: datetime | None = None  # due as a time, for comparisons (None: START)

    @classmethod
    def of(cls, at: datetime, job_id: str, passed: bool) -> Position:
        return cls(at.isoformat(), job_id, passed, None, at)

    def precedes(self, at: datetime, job_id: str) -> bool:
        """Whether the row at (at, job_id) lies past this position."""
        if self.at is None:
            return True
        here = (self.at, self.id)
        return (at, job_id) > here or (not self.passed and (at, job_id) == here)


class Lanes:
    """One worker's claim state. Claims of one worker run one at a time (the fetch loop); the lock keeps
    that true for any caller."""

    def __init__(self, queues: Sequence[str] | None) -> None:
        self.queues = list(queues) if queues else None
        self.positions: dict[tuple[str, int], Position] = {}
        self.xmax: str | None = None
        self.xip: list[str] = []
        self.known = False  # lanes discovered once (a worker's first claim)
        self.closed: set[str] | None = None  # queues whose lanes the last claim left out
        self.reopened: list[str] = []  # queues open again since the claim before the last
        self.held_since: dict[str, float] = {}
        # Stuck jobs by id, with the ctid each was last read at: the claim looks them up by it (a TID scan;
        # sql/postgresql/queries.sql `fetch`, "Plans").
        self.stuck: dict[str, str] = {}
        # Open queues with a cap that the last claim named: while there are any, claims keep caps (`fetch`).
        self.capped: set[str] = set()
        self._was_full = False
        self.lock = threading.Lock()

    # ------------------------------------------------------------------ one claim

    def claim(
        self,
        run: Callable[..., list[dict[str, Any]]],
        discover: Callable[..., list[dict[str, Any]]],
        params: dict[str, Any],
        *,
        full: bool = False,
    ) -> list[dict[str, Any]]:
        """Run the claim (`run(statement, **params)` with this worker's lanes added) and keep what it
        reports; returns the claimed jobs' rows. The statement is `fetch`, or `fetch_open` (the same claim
        without what stuck jobs and queue caps need) while the worker passes no job as stuck and the last
        claim named no capped queue, unless `full`. `discover(queues=...)` lists lanes with pending jobs:
        run before the first claim, and for a queue that opened again since the last one."""
        with self.lock:
            if not self.known:
                self._discovered(discover(queues=self.queues), first=True)
                self.known = True
            limit, start = int(params["limit"]), int(params["start"])
            jobs = self._run(run, params, full)
            if self.reopened:
                # A queue opened again (resumed, reactivated): its lanes were forgotten; find them and
                # claim what is left of this call's limit from them at once.
                self._discovered(discover(queues=self.reopened), first=False)
                jobs += self._rest(run, params, jobs, limit, start, full)
            elif self.capped and not self._was_full:
                # The open claim met a capped queue and took nothing: the claim is `fetch`'s.
                jobs += self._rest(run, params, jobs, limit, start, True)
            return jobs

    def _run(
        self, run: Callable[..., list[dict[str, Any]]], params: dict[str, Any], full: bool
    ) -> list[dict[str, Any]]:
        full = full or bool(self.stuck or self.capped)
        self._was_full = full
        rows = run("fetch" if full else "fetch_open", **params, **self._params(int(params["limit"]), full))
        return self._absorb(rows, time.monotonic())

    def _rest(
        self,
        run: Callable[..., list[dict[str, Any]]],
        params: dict[str, Any],
        jobs: list[dict[str, Any]],
        limit: int,
        start: int,
        full: bool,
    ) -> list[dict[str, Any]]:
        rest = limit - len(jobs)
        if rest <= 0:
            return []
        started = sum(1 for j in jobs if int(j["status"]) == 2)
        return self._run(run, dict(params, limit=rest, start=max(0, start - started)), full)

    def _params(self, limit: int, full: bool = True) -> dict[str, Any]:
        params: dict[str, Any] = {
            "lanes": [
                {"q": q, "p": p, "d": pos.due, "i": pos.id, "x": pos.passed}
                for (q, p), pos in self.positions.items()
            ],
            "xmax": self.xmax,
            "xip": self.xip,
            # Rows read per lane: the claim's own, and as many again for rows other workers hold.
            "window": max(8, 2 * limit),
        }
        if full:
            params["stuck"] = [{"id": i, "t": t} for i, t in sorted(self.stuck.items())]
        return params

    def _absorb(self, rows: list[dict[str, Any]], now: float) -> list[dict[str, Any]]:
        jobs: list[dict[str, Any]] = []
        first: dict[tuple[str, int], dict[str, Any]] = {}
        stuck: dict[str, str] = {}
        closed: set[str] = set()
        capped: set[str] = set()
        for r in rows:
            kind = r["kind"]
            if kind == "job":
                for column in _EXTRA:
                    del r[column]
                jobs.append(r)
            elif kind == "lane":
                first[(str(r["queue"]), int(r["priority"]))] = r
            elif kind == "stuck":
                stuck[str(r["id"])] = str(r["tid"])
            elif kind == "closed":
                closed.add(str(r["queue"]))
            elif kind == "capped":
                capped.add(str(r["queue"]))
            elif kind == "snap":
                self.xmax = str(r["snap_xmax"])
                self.xip = json.loads(r["snap_xip"])
        self.capped = capped
        # The last job claimed per lane, in claim order within a lane (due_at, id).
        last: dict[tuple[str, int], tuple[datetime, str]] = {}
        for j in jobs:
            lane, key = (str(j["queue"]), int(j["priority"])), (j["due_at"], str(j["id"]))
            if lane not in last or key > last[lane]:
                last[lane] = key
        seen: dict[tuple[str, int], Position] = {}
        held: dict[str, str] = {}
        for lane in self.positions.keys() | first.keys() | last.keys():
            if lane[0] in closed:
                continue  # left out, and forgotten: a reopened queue's lanes are found again
            old, f, top = self.positions.get(lane), first.get(lane), last.get(lane)
            if f is not None:
                # The lane reads on from its first candidate not taken. A job claimed after it in the same
                # lane means the claim skipped it: another session holds it.
                seen[lane] = Position.of(f["due_at"], str(f["id"]), False)
                if top is not None and top > (f["due_at"], str(f["id"])):
                    held[str(f["id"])] = str(f["tid"])
            elif top is not None:
                # Every candidate read was claimed: on after the last, unless that lay behind the position
                # (a job put back behind it, read through ready_xid).
                seen[lane] = Position.of(top[0], top[1], True) if old is None or old.precedes(*top) else old
                seen[lane].empty_since = None
            elif old is not None:
                # Nothing read: no pending job in the lane now. Forgotten after FORGET_S; a job that enters
                # it later is made by a transaction the next claim reads anyway.
                old.empty_since = now if old.empty_since is None else old.empty_since
                if now - old.empty_since <= FORGET_S:
                    seen[lane] = old
        self.positions = seen
        # Stuck jobs the claim still found pending stay stuck; newly held ones become stuck after STUCK_S.
        self.held_since = {i: self.held_since.get(i, now) for i in held}
        self.stuck = stuck
        for job_id, since in self.held_since.items():
            if now - since >= STUCK_S and len(self.stuck) < MAX_STUCK:
                self.stuck.setdefault(job_id, held[job_id])
        reopened = [] if self.closed is None else sorted(self.closed - closed)
        self.closed = closed
        self.reopened = [q for q in reopened if self.queues is None or q in self.queues]
        return jobs

    def _discovered(self, rows: list[dict[str, Any]], *, first: bool) -> None:
        """Lanes with pending jobs, read from their start by the next claim. A reopened queue's lanes
        start there even if this claim met one of them (a job made while it was closed): its jobs from
        before the pause lie behind that."""
        for r in rows:
            if r["kind"] == "lane":
                self.positions[(r["queue"], int(r["priority"]))] = Position(START, "", False)
            elif r["kind"] == "snap" and first:
                self.xmax = str(r["snap_xmax"])
                self.xip = json.loads(r["snap_xip"])


class LaneBook:
    """The Lanes of every worker of one store, by worker id."""

    def __init__(self) -> None:
        self._by_worker: dict[str, Lanes] = {}
        self._lock = threading.Lock()

    def of(self, worker_id: str, queues: Sequence[str] | None) -> Lanes:
        with self._lock:
            lanes = self._by_worker.get(worker_id)
            wanted = list(queues) if queues else None
            if lanes is None or lanes.queues != wanted:
                lanes = self._by_worker[worker_id] = Lanes(wanted)
            return lanes

    def forget(self, worker_id: str) -> None:
        with self._lock:
            self._by_worker.pop(worker_id, None)


class Peek:
    """A reader's view of the lanes (queue lag for GET /queues, the metrics and readiness): the due
    pending jobs per queue, read like a claim reads them (`peek_lanes`), from positions this reader
    remembers; it never claims. A position only ever moves to the lane's first pending row, so the next
    read walks the entries of jobs claimed since the last one, not of everything claimed before."""

    def __init__(self) -> None:
        self.positions: dict[tuple[str, int], Position] = {}
        self.xmax: str | None = None
        self.xip: list[str] = []
        self.known = False
        self.lock = threading.Lock()

    def lags(
        self, run: Callable[..., list[dict[str, Any]]], discover: Callable[..., list[dict[str, Any]]]
    ) -> dict[str, dict[str, Any]]:
        """Per queue with due pending jobs: due_pending, max_lag_s and avg_lag_s (database clock)."""
        with self.lock:
            if not self.known:
                for r in discover(queues=None):
                    if r["kind"] == "lane":
                        self.positions[(r["queue"], int(r["priority"]))] = Position(START, "", False)
                    elif r["kind"] == "snap":
                        self.xmax, self.xip = str(r["snap_xmax"]), json.loads(r["snap_xip"])
                self.known = True
            lanes = [
                {"q": q, "p": p, "d": pos.due, "i": pos.id, "x": False}
                for (q, p), pos in self.positions.items()
            ]
            rows = run(lanes=lanes, xmax=self.xmax, xip=self.xip)
            seen: dict[tuple[str, int], Position] = {}
            out: dict[str, dict[str, Any]] = {}
            for r in rows:
                if r["kind"] == "snap":
                    self.xmax, self.xip = str(r["snap_xmax"]), json.loads(r["snap_xip"])
                    continue
                seen[(str(r["queue"]), int(r["priority"]))] = Position(
                    str(r["cursor_due"]), str(r["id"]), False
                )
                n = int(r["due_n"] or 0)
                if not n:
                    continue
                q = out.setdefault(r["queue"], {"due_pending": 0, "max_lag_s": 0.0, "lag_sum": 0.0})
                q["due_pending"] += n
                q["lag_sum"] += float(r["lag_sum"] or 0.0)
                q["max_lag_s"] = max(q["max_lag_s"], float(r["max_lag_s"] or 0.0))
            # A lane with no pending job is forgotten: a job that enters it later is made by a transaction
            # the next read sees through the snapshot bookkeeping.
            self.positions = seen
        return {
            name: {
                "due_pending": q["due_pending"],
                "avg_lag_s": q["lag_sum"] / q["due_pending"],
                "max_lag_s": q["max_lag_s"],
            }
            for name, q in out.items()
        }
