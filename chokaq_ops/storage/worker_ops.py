"""The worker's operations: claim, start, heartbeat, release and finish jobs. Every write is fenced by
the worker id; a write whose reply may have been lost is checked before the worker is told it failed."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from chokaq_ops import errors
from chokaq_ops.models import FailureReason
from chokaq_ops.records import ClaimedJob, Started, claimed_job
from chokaq_ops.storage.database import Database, Tx
from chokaq_ops.storage.filters import reason_number
from chokaq_ops.storage.lanes import LaneBook

log = logging.getLogger("chokaq.storage")

# Named queries the dialect may run as prepared statements (Database, `prepared`). PostgreSQL's claim
# (`fetch`) reads every lane through its index whatever the parameters (storage/lanes.py), so one generic
# plan serves it.
PREPARED = (
    "fetch",
    "fetch_open",
    "fetch_head",
    "mark_processing",
    "heartbeat",
    "release",
    "archive_succeeded",
    "move_to_dlq",
    "reschedule",
)


@dataclass(frozen=True, slots=True)
class Dead:
    """A job a worker sends to the dead-letter queue."""

    id: str
    reason: FailureReason
    error: str
    fingerprint: str | None = None
    duration_ms: float | None = None


@dataclass(frozen=True, slots=True)
class Retry:
    id: str
    delay_s: float
    error: str | None = None
    fingerprint: str | None = None


class WorkerOps:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._uncertain_lock = threading.Lock()
        # (worker id, job id) whose mark_processing failed transiently: it may have committed.
        self._uncertain_marks: set[tuple[str, str]] = set()
        # Worker ids with a claim that failed transiently or was retried: it may have committed rows the
        # worker never saw (recover_claims finds them).
        self._uncertain_claims: set[str] = set()
        # (worker id, job id) whose finishing write failed transiently: it may have committed.
        self._uncertain_finishes: set[tuple[str, str]] = set()
        # PostgreSQL: each worker's lanes and positions (storage/lanes.py).
        self.lanes = LaneBook()

    def fetch(
        self,
        worker_id: str,
        limit: int,
        queues: Sequence[str] | None = None,
        *,
        exact_caps: bool = False,
        start: int = 0,
    ) -> list[ClaimedJob]:
        """Claim up to `limit` jobs for `worker_id`, in claim order (priority, due time, id). The first
        `start` of them go straight to processing (claim-and-start: attempt + 1, started_at and
        heartbeat_at on the database clock) and must reach user code at once, for the caller holds an
        execution slot free for each; the rest are fetched. Each row carries `status` (`fetched` or
        `processing`) and, when started, its new `attempt_count` and `started_at`. With `exact_caps`,
        fetches that may claim from max_workers queues serialise on those queue rows, so the cap is
        never exceeded.

        A claim that failed transiently, or succeeded only on a retry, may have committed rows whose
        reply was lost: `claims_uncertain(worker_id)` is then true until `recover_claims` ran."""
        start = max(0, min(int(start), int(limit)))
        params: dict[str, Any] = {
            "worker_id": worker_id,
            "limit": limit,
            "start": start,
            "queues": list(queues) if queues else None,
        }
        retries = self.db.thread_retries()
        rows: list[dict[str, Any]] = []
        try:
            if self.db.dialect.name == "postgresql":
                rows = self.lanes.of(worker_id, queues).claim(
                    lambda name, **p: self._claim(p, exact_caps, name),
                    lambda **p: self.db.run("discover_lanes", write=False, **p),
                    params,
                    full=exact_caps,
                )
            elif exact_caps:
                rows = self._claim(params, exact_caps=True)
            else:
                if not queues:
                    # The common case in a third of the time; a short answer asks the full claim for the rest.
                    rows = self.db.run("fetch_head", **params)
                    started = sum(1 for r in rows if int(r["status"]) == 2)
                    params.update(limit=limit - len(rows), start=max(0, start - started))
                if params["limit"] > 0:
                    rows += self.db.run("fetch", **params)
        except errors.TransientStorageError:
            with self._uncertain_lock:
                self._uncertain_claims.add(worker_id)
            if not rows:
                raise
        except Exception:
            if not rows:
                raise
            log.exception("the claim of the rest failed; keeping the %d jobs claimed", len(rows))
        if self.db.thread_retries() != retries:
            with self._uncertain_lock:
                self._uncertain_claims.add(worker_id)
        return _claimed(rows)

    def _claim(self, params: dict[str, Any], exact_caps: bool, name: str = "fetch") -> list[dict[str, Any]]:
        """The claim statement `name`; with `exact_caps` after locking the capped queues' rows in the same
        transaction (the claim then takes its snapshot after every other capped claim committed)."""
        if not exact_caps:
            return self.db.run(name, **params)

        def claim(tx: Tx) -> list[dict[str, Any]]:
            tx.run("lock_capped_queues", queues=params["queues"])
            return tx.run(name, **params)

        return self.db.transaction(claim)

    def claims_uncertain(self, worker_id: str) -> bool:
        """True when a claim of this worker may have committed rows it never saw."""
        with self._uncertain_lock:
            return worker_id in self._uncertain_claims

    def recover_claims(self, worker_id: str, known_ids: Iterable[str]) -> list[ClaimedJob]:
        """The rows a lost claim reply left under `worker_id`: every fetched or processing row of the
        worker whose id is not in `known_ids` (all the worker holds: buffered, starting, running,
        finishing). Rows that claim started never reached user code; they go back to fetched with the
        attempt it counted taken back, so the worker buffers them like any claimed row (or releases
        them), and none becomes a false zombie. Returned in claim order, as `fetch` returns them."""
        with self._uncertain_lock:
            self._uncertain_claims.discard(worker_id)
        try:
            rows = self.db.run("recover_claims", worker_id=worker_id, ids=sorted(set(known_ids)))
        except Exception:
            with self._uncertain_lock:
                self._uncertain_claims.add(worker_id)
            raise
        return _claimed(rows)

    def mark_processing(self, worker_id: str, job_ids: Sequence[str]) -> dict[str, Started]:
        """fetched -> processing for the jobs this worker still owns; returns those rows by id."""
        if not job_ids:
            return {}
        ids = list(job_ids)
        rows, uncertain = self._run_noting_uncertainty(
            "mark_processing", worker_id, ids, self._uncertain_marks, ids=ids
        )
        marked = {r["id"]: Started.from_row(r) for r in rows}
        # An attempt that committed but lost its reply (the connection died after the commit) leaves its
        # rows processing under this worker, and a retry finds nothing to mark: those rows are this
        # worker's to run, or they would become false zombies. A plain replay is still refused.
        maybe = [i for i in ids if i not in marked and i in uncertain]
        if maybe:
            owned = self._settling(
                self._uncertain_marks,
                worker_id,
                ids,
                lambda: self.db.run("owned_processing", write=False, worker_id=worker_id, ids=maybe),
            )
            marked.update((r["id"], Started.from_row(r)) for r in owned)
        return marked

    def heartbeat(self, worker_id: str, job_ids: Sequence[str]) -> set[str]:
        """Refresh the heartbeat of running jobs in one statement; returns the ids refreshed."""
        return self.beat(worker_id, job_ids)[0]

    def beat(self, worker_id: str, job_ids: Sequence[str]) -> tuple[set[str], set[str]]:
        """Refresh the heartbeat of running jobs in one statement: (refreshed, blocked). A blocked job is
        still this worker's but another session holds its row locked, so it was skipped, not waited for;
        an id in neither set is no longer this worker's."""
        if not job_ids:
            return set(), set()
        rows = self.db.run("heartbeat", worker_id=worker_id, ids=list(job_ids))
        return {r["id"] for r in rows if r["beat"]}, {r["id"] for r in rows if not r["beat"]}

    def release(self, worker_id: str, job_ids: Sequence[str]) -> list[str]:
        """Prefetched jobs back to pending (attempts unchanged), only while still fetched by this worker
        (or processing under it after a start of theirs failed in a way that may have committed)."""
        if not job_ids:
            return []
        done = [r["id"] for r in self.db.run("release", worker_id=worker_id, ids=list(job_ids))]
        with self._uncertain_lock:
            uncertain = [i for i in job_ids if i not in done and (worker_id, i) in self._uncertain_marks]
        if uncertain:
            # A start that failed for this worker may still have committed: the worker never ran those jobs.
            done += [r["id"] for r in self.db.run("release_unstarted", worker_id=worker_id, ids=uncertain)]
        with self._uncertain_lock:
            self._uncertain_marks.difference_update((worker_id, i) for i in job_ids)
        return done

    def release_unstarted(self, worker_id: str, job_ids: Sequence[str]) -> list[str]:
        """Jobs this worker's claim started but that never reached user code (the claim's reply came
        back as the worker was shutting down): back to pending, the attempt the start counted taken
        back. Only rows still processing under this worker."""
        if not job_ids:
            return []
        return [r["id"] for r in self.db.run("release_unstarted", worker_id=worker_id, ids=list(job_ids))]

    def archive_succeeded(self, worker_id: str, items: Sequence[tuple[str, float | None]]) -> list[str]:
        """Processing -> archive with handler durations (ms); a job no longer owned is left alone."""
        if not items:
            return []
        payload = [{"id": job_id, "duration_ms": ms} for job_id, ms in items]
        return self._finish("archive_succeeded", worker_id, payload, lambda p: {"id": p["id"], "kind": "ok"})

    def move_to_dlq(self, worker_id: str, items: Sequence[Dead]) -> list[str]:
        if not items:
            return []
        payload = [
            {
                "id": d.id,
                "reason": reason_number(d.reason),
                "error": d.error,
                "fingerprint": d.fingerprint,
                "duration_ms": d.duration_ms,
            }
            for d in items
        ]
        return self._finish(
            "move_to_dlq",
            worker_id,
            payload,
            lambda p: {"id": p["id"], "kind": "dead", "reason": p["reason"]},
        )

    def reschedule(self, worker_id: str, items: Sequence[Retry]) -> list[str]:
        """Processing -> pending after `delay_s` seconds of database time; counts as a retry."""
        if not items:
            return []
        payload = [
            {
                "id": r.id,
                "delay_s": max(0.0, float(r.delay_s)),
                "error": r.error,
                "fingerprint": r.fingerprint,
            }
            for r in items
        ]
        return self._finish(
            "reschedule", worker_id, payload, lambda p: {"id": p["id"], "kind": "retry", "error": p["error"]}
        )

    def _finish(
        self,
        query: str,
        worker_id: str,
        payload: list[dict[str, Any]],
        probe: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> list[str]:
        """Run a fenced finishing move. A write whose earlier attempt failed transiently (here, retried
        inside this call, or raised to the caller who now tries again) may have committed and lost its
        reply; the ids it then no longer finds are checked, so a job this worker did finish is reported
        as applied rather than as a conflict."""
        ids = [p["id"] for p in payload]
        try:
            rows, uncertain = self._run_noting_uncertainty(
                query, worker_id, ids, self._uncertain_finishes, items=payload
            )
        except errors.Conflict:
            if f"{query}_displacing" not in self.db.queries:
                raise
            # An id of the batch has an older copy in the target table (a job in two tables): the fast
            # statement failed whole on the duplicate key; this one displaces the copy and moves them all.
            rows, uncertain = self._run_noting_uncertainty(
                f"{query}_displacing", worker_id, ids, self._uncertain_finishes, items=payload
            )
        report_twins(query, rows)
        done = [r["id"] for r in rows]
        applied = set(done)
        # What finished_unseen checks for an item, built only for the rare uncertain ones.
        maybe = (
            [probe(p) for p in payload if p["id"] in uncertain and p["id"] not in applied]
            if uncertain
            else []
        )
        if maybe:
            found = self._settling(
                self._uncertain_finishes,
                worker_id,
                ids,
                lambda: self.db.run("finished_unseen", write=False, worker_id=worker_id, items=maybe),
            )
            done += [r["id"] for r in found]
        return done

    def _settling(
        self,
        pending: set[tuple[str, str]],
        worker_id: str,
        job_ids: list[str],
        read: Callable[[], list[dict[str, Any]]],
    ) -> list[dict[str, Any]]:
        """Run the read that settles a write's uncertain ids. If it fails, the caller is told the whole
        call failed and will send the set again, yet the write did apply to some ids (and the ones it
        was settling stay unknown): every id of the call is noted uncertain again, so the retry finds
        them done rather than refusing them (a start refused so became a false zombie)."""
        try:
            return read()
        except Exception:
            with self._uncertain_lock:
                pending.update((worker_id, i) for i in job_ids)
            raise

    def _run_noting_uncertainty(
        self, query: str, worker_id: str, job_ids: list[str], pending: set[tuple[str, str]], **params: Any
    ) -> tuple[list[dict[str, Any]], set[str]]:
        """Run a fenced write of this worker on `job_ids`; return its rows and the ids an attempt of which
        may have committed unseen: retried inside this call, or failed transiently in an earlier call
        (noted in `pending`, which this call settles)."""
        retries = self.db.thread_retries()
        try:
            rows = self.db.run(query, worker_id=worker_id, **params)
        except errors.TransientStorageError:
            with self._uncertain_lock:
                pending.update((worker_id, i) for i in job_ids)
            raise
        with self._uncertain_lock:
            # Nearly always empty: then the batch (up to hundreds of ids) is not walked twice per write.
            uncertain = {i for i in job_ids if (worker_id, i) in pending} if pending else set()
            if uncertain:
                pending.difference_update((worker_id, i) for i in uncertain)
        if self.db.thread_retries() != retries:
            uncertain = set(job_ids)
        return rows, uncertain


def report_twins(operation: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Log the moved jobs whose id was in a second table (the statement displaced that older copy to the
    audit log and wrote a `conflict` event); returns the rows without their `twin` column."""
    for r in rows:
        twin = r.pop("twin", None)
        if twin:
            log.warning(
                "%s: job %s was in two tables; its older copy in the %s was replaced (kept in the audit "
                "log, event 'conflict')",
                operation,
                r["id"],
                twin,
            )
    return rows


def _claimed(rows: list[dict[str, Any]]) -> list[ClaimedJob]:
    return sorted((claimed_job(r) for r in rows), key=ClaimedJob.sort_key)
