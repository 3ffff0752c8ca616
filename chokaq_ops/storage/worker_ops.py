"""Producer, worker and rescue operations. Every worker write is fenced by the worker id."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from chokaq_ops import errors, ids, validation
from chokaq_ops.models import EnqueueResult, FailureReason, NewJob
from chokaq_ops.storage import signals
from chokaq_ops.storage.core import StoreCore, Tx

log = logging.getLogger("chokaq.storage")

# Explicit ids whose enqueue raised a transient error, remembered for the producer's own retry (oldest
# forgotten first past this many).
MAX_UNCERTAIN_ENQUEUES = 100_000


def reason_number(value: Any, field: str = "reason") -> int:
    """A failure reason (member, number or name) as stored; anything else is a ValidationError."""
    try:
        return int(value if isinstance(value, FailureReason) else FailureReason.parse(value))
    except (TypeError, ValueError):
        names = ", ".join(m.name for m in FailureReason)
        raise errors.ValidationError(f"{field} must be one of {names}", field=field) from None


AUDIT_MAX_IDS = 1000  # ids listed on one audit row of a sweep; `count` has the full number


@dataclass(frozen=True, slots=True)
class Audit:
    """Who asked for an operation that is otherwise unattended (a forced rescue sweep), and its action."""

    actor: str
    action: str


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


class WorkerOps(StoreCore):
    PREPARED = (
        "fetch_head",
        "mark_processing",
        "heartbeat",
        "release",
        "archive_succeeded",
        "move_to_dlq",
        "reschedule",
    )
    # The full claim runs on the same rule-planned connections, unprepared: its plan depends on its
    # parameters (queue filter, caps), but planned by statistics that lag a burst of enqueues it sorted
    # the whole backlog on every claim.
    RULE_PLANNED = ("fetch",)

    # ------------------------------------------------------------------ producer

    def enqueue(self, jobs: Iterable[NewJob]) -> list[EnqueueResult]:
        """Insert jobs in one statement. Per item: `new`, `duplicate` (an active job holds its idempotency
        key; `id` is that job's) or `conflict` (the id exists already in hot, archive or DLQ; nothing
        inserted).

        An enqueue whose earlier attempt may have committed unseen (retried inside this call, or an
        explicit id whose last enqueue raised a transient error) reports the jobs that attempt created
        as `new`, not as a conflict with themselves."""
        items, explicit = self._enqueue_items(jobs)
        if not items:
            return []
        retries = self.thread_retries()
        try:
            rows = self._enqueue_rows(items, explicit)
        except errors.TransientStorageError:
            self._note_uncertain_enqueues(explicit)
            raise
        uncertain = {i["id"] for i in items} if self.thread_retries() != retries else set()
        with self._uncertain_lock:
            remembered = {i for i in explicit if i in self._uncertain_enqueues}
            for i in remembered:
                del self._uncertain_enqueues[i]
        uncertain |= remembered
        maybe = [items[r["ord"]] for r in rows if r["status"] != "new" and items[r["ord"]]["id"] in uncertain]
        if maybe:
            mine = {r["id"] for r in self.run("enqueued_unseen", write=False, items=maybe)}
            for r in rows:
                if r["status"] != "new" and items[r["ord"]]["id"] in mine:
                    r.update(status="new", id=items[r["ord"]]["id"])
        if any(r["status"] == "new" for r in rows):
            signals.publish(self.dialect.url)
        return self._results(self.run, items, rows)

    def next_due(self, queues: Sequence[str] | None = None) -> float | None:
        """Seconds (database clock) until the next pending job of `queues` (None: any) that is not due
        yet becomes due; None when no such job waits."""
        rows = self.run("next_due", write=False, queues=list(queues) if queues else None)
        return max(0.0, float(rows[0]["wait_s"])) if rows else None

    def enqueue_on(self, conn: Any, jobs: Iterable[NewJob]) -> list[EnqueueResult]:
        """Enqueue inside the caller's own open transaction on `conn` (a sqlite3 connection to this
        store's file, or a pyodbc connection to this store's PostgreSQL database): the jobs commit or roll
        back with the caller's transaction, which this call neither commits nor rolls back. The same
        named statements as `enqueue`; nothing is retried here (a failure fails the caller's
        transaction, which the caller retries whole)."""
        items, explicit = self._enqueue_items(jobs)
        if not items:
            return []
        self.dialect.join_transaction(conn)
        tx = Tx(self, conn)
        # Always NOTIFY: the application's transaction may have begun before a worker went idle, so the
        # idle-worker gate (see the enqueue SQL) could miss that worker.
        return self._results(tx.run, items, self._enqueue_in(tx, items, explicit, notify=True))

    def _results(
        self, run: Any, items: list[dict[str, Any]], rows: list[dict[str, Any]]
    ) -> list[EnqueueResult]:
        """The enqueue statement's rows as results; `run` is the store's, or an open transaction's."""
        missing = [
            items[r["ord"]]["idempotency_key"] for r in rows if r["status"] == "duplicate" and not r["id"]
        ]
        winners: dict[str, str] = {}
        if missing:
            # Lost a concurrent race on the key: the winner committed after our snapshot was taken.
            winners = {r["idempotency_key"]: r["id"] for r in run("find_idempotency_keys", keys=missing)}
        return [
            EnqueueResult(
                id=r["id"] or winners.get(items[r["ord"]]["idempotency_key"]) or items[r["ord"]]["id"],
                created=r["status"] == "new",
                status=r["status"],
            )
            for r in sorted(rows, key=lambda r: r["ord"])
        ]

    def _enqueue_rows(self, items: list[dict[str, Any]], explicit: set[str]) -> list[dict[str, Any]]:
        """Run the enqueue statement. Where a statement reads one snapshot while moves commit around it
        (PostgreSQL), an enqueue of explicit ids takes back, in a second statement of the same
        transaction, the ids it inserted that a move committed into the archive or the DLQ meanwhile;
        those answer `conflict`. Generated ids are new by construction and keep the one-statement path."""
        if not explicit or not self.dialect.snapshot_per_statement:
            return self.run("enqueue", items=items, notify=False)
        return self.transaction(lambda tx: self._enqueue_in(tx, items, explicit))

    def _enqueue_in(
        self, tx: Tx, items: list[dict[str, Any]], explicit: set[str], *, notify: bool = False
    ) -> list[dict[str, Any]]:
        """The enqueue statement (and its re-check, see _enqueue_rows) inside an open transaction."""
        rows = tx.run("enqueue", items=items, notify=notify)
        if explicit and self.dialect.snapshot_per_statement:
            inserted = [items[r["ord"]]["id"] for r in rows if r["status"] == "new"]
            inserted = [i for i in inserted if i in explicit]
            raced = {r["id"] for r in tx.run("enqueue_undo_raced", ids=inserted)} if inserted else set()
            for r in rows:
                if r["status"] == "new" and r["id"] in raced:
                    r["status"] = "conflict"
            if raced:
                log.info("enqueue: %d id(s) were moved out of hot while it ran: conflict", len(raced))
        return rows

    def _note_uncertain_enqueues(self, ids: Iterable[str]) -> None:
        with self._uncertain_lock:
            for i in ids:
                self._uncertain_enqueues[i] = None
            while len(self._uncertain_enqueues) > MAX_UNCERTAIN_ENQUEUES:
                del self._uncertain_enqueues[next(iter(self._uncertain_enqueues))]

    def _enqueue_items(self, jobs: Iterable[NewJob]) -> tuple[list[dict[str, Any]], set[str]]:
        """The statement's items (validated) and the ids among them the producer chose."""
        jobs = list(jobs)
        items = [self._enqueue_item(i, job) for i, job in enumerate(jobs)]
        if len({i["id"] for i in items}) < len(items):
            raise errors.ValidationError("the same job id appears twice in one enqueue", field="id")
        return items, {item["id"] for item, job in zip(items, jobs, strict=True) if job.id is not None}

    def _enqueue_item(self, ord_: int, job: NewJob) -> dict[str, Any]:
        if job.delay_seconds is not None and job.scheduled_at is not None:
            raise errors.ValidationError(
                "give delay_seconds or scheduled_at, not both", field="delay_seconds"
            )
        if job.delay_seconds is not None and not 0 <= job.delay_seconds <= 10 * 365 * 86400:
            raise errors.ValidationError(
                "delay_seconds must be between 0 and ten years", field="delay_seconds"
            )
        if job.scheduled_at is not None and job.scheduled_at.tzinfo is None:
            raise errors.ValidationError("scheduled_at must carry a time zone (UTC)", field="scheduled_at")
        priority = validation.priority(job.priority)
        return {
            "ord": ord_,
            "id": validation.job_id(job.id) if job.id is not None else ids.new_id(),
            "queue": validation.queue(job.queue),
            "type": validation.text(job.type, "type", max_len=validation.MAX_TYPE),
            "payload": validation.payload(job.payload, max_bytes=self.max_payload_bytes, require_json=False),
            "tags": validation.tags(job.tags),
            "idempotency_key": validation.text(
                job.idempotency_key, "idempotency_key", max_len=validation.MAX_KEY, required=False
            ),
            "priority": 10 if priority is None else priority,
            "delay_s": job.delay_seconds,
            "scheduled_at": self.format_time(job.scheduled_at) if job.scheduled_at else None,
            "created_by": validation.text(
                job.created_by, "created_by", max_len=validation.MAX_ACTOR, required=False
            ),
        }

    # ------------------------------------------------------------------ worker

    def fetch(
        self,
        worker_id: str,
        limit: int,
        queues: Sequence[str] | None = None,
        *,
        exact_caps: bool = False,
        start: int = 0,
    ) -> list[dict[str, Any]]:
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
        params = {
            "worker_id": worker_id,
            "limit": limit,
            "start": start,
            "queues": list(queues) if queues else None,
        }
        retries = self.thread_retries()
        rows: list[dict[str, Any]] = []
        try:
            if exact_caps:

                def claim(tx: Tx) -> list[dict[str, Any]]:
                    tx.run("lock_capped_queues", queues=params["queues"])
                    return tx.run("fetch", **params)

                rows = self.transaction(claim)
            else:
                if not queues:
                    # The common case in a third of the time; a short answer asks the full claim for the rest.
                    rows = self.run("fetch_head", **params)
                    started = sum(1 for r in rows if int(r["status"]) == 2)
                    params.update(limit=limit - len(rows), start=max(0, start - started))
                if params["limit"] > 0:
                    rows += self.run("fetch", **params)
        except errors.TransientStorageError:
            with self._uncertain_lock:
                self._uncertain_claims.add(worker_id)
            if not rows:
                raise
        except Exception:
            if not rows:
                raise
            log.exception("the claim of the rest failed; keeping the %d jobs claimed", len(rows))
        if self.thread_retries() != retries:
            with self._uncertain_lock:
                self._uncertain_claims.add(worker_id)
        return _claimed(rows)

    def claims_uncertain(self, worker_id: str) -> bool:
        """True when a claim of this worker may have committed rows it never saw."""
        with self._uncertain_lock:
            return worker_id in self._uncertain_claims

    def recover_claims(self, worker_id: str, known_ids: Iterable[str]) -> list[dict[str, Any]]:
        """The rows a lost claim reply left under `worker_id`: every fetched or processing row of the
        worker whose id is not in `known_ids` (all the worker holds: buffered, starting, running,
        finishing). Rows that claim started never reached user code; they go back to fetched with the
        attempt it counted taken back, so the worker buffers them like any claimed row (or releases
        them), and none becomes a false zombie. Returned in claim order, as `fetch` returns them."""
        with self._uncertain_lock:
            self._uncertain_claims.discard(worker_id)
        try:
            rows = self.run("recover_claims", worker_id=worker_id, ids=sorted(set(known_ids)))
        except Exception:
            with self._uncertain_lock:
                self._uncertain_claims.add(worker_id)
            raise
        return _claimed(rows)

    def mark_processing(self, worker_id: str, job_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """fetched -> processing for the jobs this worker still owns; returns those rows by id."""
        if not job_ids:
            return {}
        ids = list(job_ids)
        rows, uncertain = self._run_noting_uncertainty(
            "mark_processing", worker_id, ids, self._uncertain_marks, ids=ids
        )
        marked = {r["id"]: r for r in rows}
        # An attempt that committed but lost its reply (the connection died after the commit) leaves its
        # rows processing under this worker, and a retry finds nothing to mark: those rows are this
        # worker's to run, or they would become false zombies. A plain replay is still refused.
        maybe = [i for i in ids if i not in marked and i in uncertain]
        if maybe:
            owned = self.run("owned_processing", write=False, worker_id=worker_id, ids=maybe)
            marked.update((r["id"], r) for r in owned)
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
        rows = self.run("heartbeat", worker_id=worker_id, ids=list(job_ids))
        return {r["id"] for r in rows if r["beat"]}, {r["id"] for r in rows if not r["beat"]}

    def release(self, worker_id: str, job_ids: Sequence[str]) -> list[str]:
        """Prefetched jobs back to pending (attempts unchanged), only while still fetched by this worker
        (or processing under it after a start of theirs failed in a way that may have committed)."""
        if not job_ids:
            return []
        done = [r["id"] for r in self.run("release", worker_id=worker_id, ids=list(job_ids))]
        with self._uncertain_lock:
            uncertain = [i for i in job_ids if i not in done and (worker_id, i) in self._uncertain_marks]
        if uncertain:
            # A start that failed for this worker may still have committed: the worker never ran those jobs.
            done += [r["id"] for r in self.run("release_unstarted", worker_id=worker_id, ids=uncertain)]
        with self._uncertain_lock:
            self._uncertain_marks.difference_update((worker_id, i) for i in job_ids)
        return done

    def release_unstarted(self, worker_id: str, job_ids: Sequence[str]) -> list[str]:
        """Jobs this worker's claim started but that never reached user code (the claim's reply came
        back as the worker was shutting down): back to pending, the attempt the start counted taken
        back. Only rows still processing under this worker."""
        if not job_ids:
            return []
        return [r["id"] for r in self.run("release_unstarted", worker_id=worker_id, ids=list(job_ids))]

    def archive_succeeded(self, worker_id: str, items: Sequence[tuple[str, float | None]]) -> list[str]:
        """Processing -> archive with handler durations (ms); a job no longer owned is left alone."""
        if not items:
            return []
        payload = [{"id": job_id, "duration_ms": ms} for job_id, ms in items]
        probes = [{"id": job_id, "kind": "ok"} for job_id, _ in items]
        return self._finish("archive_succeeded", worker_id, payload, probes)

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
        probes = [{"id": p["id"], "kind": "dead", "reason": p["reason"]} for p in payload]
        return self._finish("move_to_dlq", worker_id, payload, probes)

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
        probes = [{"id": r.id, "kind": "retry", "error": r.error} for r in items]
        return self._finish("reschedule", worker_id, payload, probes)

    def _finish(
        self, query: str, worker_id: str, payload: list[dict[str, Any]], probes: list[dict[str, Any]]
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
            if f"{query}_displacing" not in self.queries:
                raise
            # An id of the batch has an older copy in the target table (a job in two tables): the fast
            # statement failed whole on the duplicate key; this one displaces the copy and moves them all.
            rows, uncertain = self._run_noting_uncertainty(
                f"{query}_displacing", worker_id, ids, self._uncertain_finishes, items=payload
            )
        report_twins(query, rows)
        done = [r["id"] for r in rows]
        applied = set(done)
        maybe = [p for p in probes if p["id"] in uncertain and p["id"] not in applied]
        if maybe:
            found = self.run("finished_unseen", write=False, worker_id=worker_id, items=maybe)
            done += [r["id"] for r in found]
        return done

    def _run_noting_uncertainty(
        self, query: str, worker_id: str, job_ids: list[str], pending: set[tuple[str, str]], **params: Any
    ) -> tuple[list[dict[str, Any]], set[str]]:
        """Run a fenced write of this worker on `job_ids`; return its rows and the ids an attempt of which
        may have committed unseen: retried inside this call, or failed transiently in an earlier call
        (noted in `pending`, which this call settles)."""
        retries = self.thread_retries()
        try:
            rows = self.run(query, worker_id=worker_id, **params)
        except errors.TransientStorageError:
            with self._uncertain_lock:
                pending.update((worker_id, i) for i in job_ids)
            raise
        with self._uncertain_lock:
            uncertain = {i for i in job_ids if (worker_id, i) in pending}
            pending.difference_update((worker_id, i) for i in job_ids)
        if self.thread_retries() != retries:
            uncertain = set(job_ids)
        return rows, uncertain

    # ------------------------------------------------------------------ rescue

    def recover_abandoned(self, timeout_s: float, *, audit: Audit | None = None) -> list[dict[str, Any]]:
        """Fetched jobs untouched for `timeout_s` -> pending, oldest first, in CleanupBatchSize
        transactions. `audit`: an operator asked for this sweep; each batch's audit row (count and ids)
        commits in the same transaction as its moves."""
        batches = self.run_batches(
            "recover_abandoned",
            cursor=_resume,
            each=self._audit_batches(audit),
            timeout_s=float(timeout_s),
            after_at=None,
        )
        return [_moved(r) for rows in batches for r in rows]

    def recover_orphaned(self, gone_s: float, *, audit: Audit | None = None) -> list[dict[str, Any]]:
        """Fetched jobs of workers whose registry row is older than `gone_s` -> pending at once (user
        code never ran; the attempt count is unchanged), in CleanupBatchSize transactions. `audit`: as
        for recover_abandoned."""
        batches = self.run_batches("recover_orphaned", each=self._audit_batches(audit), gone_s=float(gone_s))
        return [r for rows in batches for r in rows]

    def archive_zombies(
        self,
        global_timeout_s: float,
        overrides: Mapping[str, float] | None = None,
        fingerprint: str | None = None,
        within: float | None = None,
        *,
        audit: Audit | None = None,
    ) -> list[dict[str, Any]]:
        """Processing jobs with an expired heartbeat -> DLQ as Zombie. Timeout per job: the queue row's
        zombie_timeout_seconds, else `overrides[queue]` (configuration), else `global_timeout_s`.
        Stalest first, in CleanupBatchSize transactions: a crash between batches leaves each job wholly
        moved or wholly hot. With `within` (seconds), each batch moves only if the server runs it within
        that long of the database time read just before it: a server paused after the sweep decided
        must not judge heartbeats it kept workers from writing (such a batch moves nothing, and the loop
        ends). `audit`: as for recover_abandoned."""

        def decided() -> dict[str, Any]:
            return {"not_after": None if within is None else self.now() + timedelta(seconds=within)}

        batches = self.run_batches(
            "archive_zombies",
            cursor=lambda rows: _resume(rows) | decided(),
            each=self._audit_batches(audit),
            global_s=float(global_timeout_s),
            overrides={k: float(v) for k, v in (overrides or {}).items()},
            fingerprint=fingerprint,
            after_at=None,
            **decided(),
        )
        return report_twins("archive_zombies", [_moved(r) for rows in batches for r in rows])

    @staticmethod
    def _audit_batches(audit: Audit | None) -> Callable[[Tx, list[dict[str, Any]]], None] | None:
        """What writes a sweep phase's audit rows inside each batch's transaction: one per batch that
        moved jobs, and one for the phase even when it moved none. None for the scheduled sweep (events,
        no audit rows: no person asked for it)."""
        if audit is None:
            return None
        first = [True]

        def write(tx: Tx, rows: list[dict[str, Any]]) -> None:
            if not rows and not first[0]:
                return
            first[0] = False
            tx.run(
                "audit_one",
                actor=audit.actor,
                action=audit.action,
                job_id=None,
                plan_id=None,
                count=len(rows),
                details={
                    "ids": [r["id"] for r in rows[:AUDIT_MAX_IDS]],
                    "truncated": len(rows) > AUDIT_MAX_IDS,
                },
            )

        return write

    def try_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        """Take or renew a named lease on the database clock; True when `holder` has it."""
        return bool(self.run("try_lease", name=name, holder=holder, ttl_s=float(ttl_s)))

    def release_lease(self, name: str, holder: str) -> None:
        self.run("release_lease", name=name, holder=holder)

    def add_event(self, kind: str, message: str, data: Mapping[str, Any] | None = None) -> int:
        rows = self.run(
            "add_event", kind=kind, message=message, data=dict(data) if data is not None else None
        )
        return int(rows[0]["id"])


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


def _claimed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for r in rows:
        r["status"] = "processing" if int(r["status"]) == 2 else "fetched"
    rows.sort(key=lambda r: (-r["priority"], r["due_at"], r["id"]))
    return rows


def _resume(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Where a rescue batch ended (PostgreSQL reports it as `last_at`; SQLite needs no cursor)."""
    return {"after_at": max((r["last_at"] for r in rows if r.get("last_at") is not None), default=None)}


def _moved(row: dict[str, Any]) -> dict[str, Any]:
    row.pop("last_at", None)
    return row
