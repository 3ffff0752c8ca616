"""The producer's operations: enqueue (plain, inside the caller's transaction, or audited for the API)
and the next due time. An enqueue whose reply may have been lost is checked before it reports a conflict."""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

from chokaq_ops import errors, ids, tracing, validation
from chokaq_ops.models import DEFAULT_PRIORITY, Actor, EnqueueResult, NewJob
from chokaq_ops.storage import plain_batch, signals
from chokaq_ops.storage.audit import audit_in, person
from chokaq_ops.storage.combining import Combiner
from chokaq_ops.storage.database import Database, Tx

log = logging.getLogger("chokaq.storage")

# Explicit ids whose enqueue raised a transient error, remembered for the producer's own retry (oldest
# forgotten first past this many).
MAX_UNCERTAIN_ENQUEUES = 100_000
# Named queries the dialect runs as prepared statements on the producer's connections (Database,
# `producer_prepared`).
PREPARED = ("enqueue_one", "enqueue_one_known", "enqueue_fresh", "enqueue_fresh_known")
# A queue whose row a single-job enqueue committed is taken to exist for this long (seconds), and its
# next single-job enqueues skip the queues table (a tenth of their statement's server time). chokaq never
# deletes a queue row; one deleted by hand comes back at the first enqueue after this.
KNOWN_QUEUE_S = 60.0
MAX_KNOWN_QUEUES = 10_000
# Single-job enqueues from many threads (storage/combining.py): this many run as statements of their own
# at once; callers arriving meanwhile go out together, at most SINGLES_GROUP (and SINGLES_GROUP_PAYLOAD)
# to a statement. One at a time gathers the largest groups: 16 threads enqueued 3,331 jobs/s with 1,
# 2,727 with 2, 1,826 with 4 and 1,771 with none (PostgreSQL, docs/benchmarks.md).
SINGLES_LEADERS = 1
SINGLES_GROUP = 1000
SINGLES_GROUP_PAYLOAD = 4_000_000  # characters of payload in one group at most (a lone job goes alone)


class Producer:
    def __init__(self, db: Database) -> None:
        self.db = db
        # Explicit job ids whose enqueue failed transiently: it may have committed. An insertion-ordered
        # dict used as a bounded set.
        self._uncertain_enqueues: dict[str, None] = {}
        self._uncertain_lock = threading.Lock()
        # Queue name -> monotonic time until which its row is taken to exist (see KNOWN_QUEUE_S).
        self._known_queues: dict[str, float] = {}
        self._singles: Combiner[dict[str, Any], EnqueueResult] = Combiner(
            self._enqueue_singles,
            leaders=SINGLES_LEADERS,
            max_group=SINGLES_GROUP,
            weight=lambda item: len(item["payload"] or ""),
            max_weight=SINGLES_GROUP_PAYLOAD,
        )

    def enqueue(self, jobs: Iterable[NewJob]) -> list[EnqueueResult]:
        """Insert jobs in one statement. Per item: `new`, `duplicate` (an active job holds its idempotency
        key; `id` is that job's) or `conflict` (the id exists already in hot, archive or DLQ; nothing
        inserted).

        An enqueue whose earlier attempt may have committed unseen (retried inside this call, or an
        explicit id whose last enqueue raised a transient error) reports the jobs that attempt created
        as `new`, not as a conflict with themselves."""
        jobs = list(jobs)
        if not jobs:
            return []
        # Generated ids, no keys: nothing to look up in the archive, the DLQ or the keys. Several jobs go
        # by the prepared multi-row statement (a third of the general one's server time,
        # docs/benchmarks.md), a plain batch's parameter written as text (storage/plain_batch.py); one job
        # through the combiner (threads' single enqueues share statements).
        if len(jobs) > 1:
            batch = plain_batch.build(jobs, self.db.max_payload_bytes)
            if batch is not None:
                return self._enqueue_fresh(batch.text, batch.ids, batch.counts, batch.items)
        else:
            item = self._plain_item(jobs[0])
            if item is not None:
                return [self._singles.submit(item)]
        items, explicit = self._enqueue_items(jobs)
        if explicit or any(i["idempotency_key"] is not None for i in items):
            return self._enqueue_checked(items, explicit)
        if len(items) == 1:
            return [self._singles.submit(items[0])]
        return self._enqueue_singles(items)

    def _enqueue_checked(self, items: list[dict[str, Any]], explicit: set[str]) -> list[EnqueueResult]:
        """`enqueue` by the general statement, with its lost-reply checks."""
        retries = self.db.thread_retries()
        try:
            rows = self._enqueue_rows(items, explicit)
        except errors.TransientStorageError:
            self._note_uncertain_enqueues(explicit)
            raise
        uncertain = {i["id"] for i in items} if self.db.thread_retries() != retries else set()
        with self._uncertain_lock:
            remembered = {i for i in explicit if i in self._uncertain_enqueues}
            for i in remembered:
                del self._uncertain_enqueues[i]
        uncertain |= remembered
        maybe = [items[r["ord"]] for r in rows if r["status"] != "new" and items[r["ord"]]["id"] in uncertain]
        if maybe:
            mine = {r["id"] for r in self.db.run("enqueued_unseen", write=False, items=maybe)}
            for r in rows:
                if r["status"] != "new" and items[r["ord"]]["id"] in mine:
                    r.update(status="new", id=items[r["ord"]]["id"])
        if any(r["status"] == "new" for r in rows):
            signals.publish(self.db.dialect.url)
        return self._results(self.db.run, items, rows)

    def _enqueue_singles(self, items: list[dict[str, Any]]) -> list[EnqueueResult]:
        """Jobs with generated ids and no idempotency keys: one alone by the lean statement, several
        together by its multi-row form (the Combiner's group of concurrent single enqueues, or an
        `enqueue_many` of jobs that are not plain; their ids are generated, so none can conflict with
        another)."""
        if len(items) == 1:
            return [self._enqueue_one(items[0])]
        counts = collections.Counter(i["queue"] for i in items)
        return self._enqueue_fresh(_fresh(items), [i["id"] for i in items], counts, lambda: items)

    def _enqueue_fresh(
        self,
        param: list[dict[str, Any]] | str,
        job_ids: list[str],
        counts: Mapping[str, int],
        items: Callable[[], list[dict[str, Any]]],
    ) -> list[EnqueueResult]:
        """`enqueue_fresh` of jobs with generated ids (`param`: its items, or their JSON text; `counts`:
        how many go to each queue), in one transaction. `items()` gives them as dicts for the paths that
        look again after a lost reply."""
        now = time.monotonic()
        queues = counts.keys()
        known = all(self._known_queues.get(q, 0.0) > now for q in queues)
        counted = [{"queue": q, "n": n} for q, n in counts.items()]
        try:
            rows = self.db.run_once(
                "enqueue_fresh_known" if known else "enqueue_fresh", items=param, counts=counted
            )
        except errors.TransientStorageError:
            return self._enqueue_unsure(items())
        inserted = int(rows[0]["n"]) if rows else 0
        if inserted:
            signals.publish(self.db.dialect.url)
            if not known:
                self._know(queues, now)
        if inserted == len(job_ids):  # by position: _generated's keywords cost 0.16 us a job more
            return [EnqueueResult(i, True) for i in job_ids]
        # Short (never in practice for generated ids): the items whose id holds this content are ours.
        mine = {r["id"] for r in self.db.run("enqueued_unseen", write=False, items=items())}
        return [_generated(i, i in mine) for i in job_ids]

    def _enqueue_unsure(self, items: list[dict[str, Any]]) -> list[EnqueueResult]:
        """The lean statements for generated ids failed transiently: they may have committed, and a job
        of theirs may even have been claimed and archived since. Sent again by those statements, such a
        job (gone from hot) would be inserted, and run, a second time; so they go again as explicit ids
        by the checked statement, which looks in the archive and the DLQ and answers `new` for the jobs
        the lost attempt created (enqueued_unseen)."""
        ids_ = {i["id"] for i in items}
        self._note_uncertain_enqueues(ids_)
        # The checked statement answers by ordinal, so the items are numbered by their place here: plain
        # items carry none (_plain_item, plain_batch), and a Combiner's group joins items of one-job
        # calls, each 0.
        numbered = [{**item, "ord": n} for n, item in enumerate(items)]
        return self._enqueue_checked(numbered, ids_)

    def _know(self, queues: Iterable[str], now: float) -> None:
        """Remember that these queues' rows were committed (see KNOWN_QUEUE_S)."""
        if len(self._known_queues) >= MAX_KNOWN_QUEUES:
            self._known_queues.clear()
        for q in queues:
            self._known_queues[q] = now + KNOWN_QUEUE_S

    def _enqueue_one(self, item: dict[str, Any]) -> EnqueueResult:
        """The commonest enqueue, one job with a generated id and no idempotency key, by the lean
        statement (a third of the general one's cost on PostgreSQL, docs/benchmarks.md). Not retried as
        it is (see _enqueue_unsure). It inserts the job or fails: a generated id is in no table yet (another
        job holding it, a unique violation, never happens in practice)."""
        params = _one_params(item)
        queue = item["queue"]
        now = time.monotonic()
        known = self._known_queues.get(queue, 0.0) > now
        # No `notify`: the statement wakes workers only while one is marked idle, as `enqueue` does.
        try:
            self.db.run_once("enqueue_one_known" if known else "enqueue_one", **params)
        except errors.TransientStorageError:
            return self._enqueue_unsure([item])[0]
        signals.publish(self.db.dialect.url)
        if not known:
            self._know((queue,), now)
        return _generated(item["id"], True)

    def next_due(self, queues: Sequence[str] | None = None) -> float | None:
        """Seconds (database clock) until the next pending job of `queues` (None: any) that is not due
        yet becomes due; None when no such job waits."""
        rows = self.db.run("next_due", write=False, queues=list(queues) if queues else None)
        return max(0.0, float(rows[0]["wait_s"])) if rows else None

    def enqueue_on(self, conn: Any, jobs: Iterable[NewJob]) -> list[EnqueueResult]:
        """Enqueue inside the caller's own open transaction on `conn` (a sqlite3 connection to this
        store's file, or a pyodbc connection to this store's PostgreSQL database): the jobs commit or roll
        back with the caller's transaction, which this call neither commits nor rolls back. The same
        named statements as `enqueue`; nothing is retried here (a failure fails the caller's
        transaction, which the caller retries whole)."""
        self.db.dialect.join_transaction(conn)
        return self.enqueue_in(Tx(self.db, conn), jobs)

    def enqueue_in(self, tx: Tx, jobs: Iterable[NewJob]) -> list[EnqueueResult]:
        """Enqueue inside a transaction already open on this store (`Database.transaction`), with the other
        writes of that transaction (the alert loop's deliveries commit with its group state, a schedule's
        tick with its ledger row); the caller commits."""
        items, explicit = self._enqueue_items(jobs)
        if not items:
            return []
        # Always NOTIFY: the application's transaction may have begun before a worker went idle, so the
        # idle-worker gate (see the enqueue SQL) could miss that worker.
        return self._results(tx.run, items, self._enqueue_in(tx, items, explicit, notify=True))

    def enqueue_audited(self, job: NewJob, *, actor: Actor, max_queues: int | None = None) -> EnqueueResult:
        """Enqueue one job on an operator's behalf (the API): `created_by` is the actor, and a new job's
        audit row commits in the same transaction. With `max_queues`, a job for a queue that does not exist
        yet is refused (422) once that many queues exist; existing queues keep working."""
        actor = person(actor)
        context = tracing.current_context() if tracing.ENABLED else None
        item = self._enqueue_item(0, replace(job, created_by=actor.name), context)
        if job.id is None and item["idempotency_key"] is None:
            return self._enqueue_one_audited(item, actor, max_queues)

        def enqueue(tx: Any) -> EnqueueResult:
            if max_queues is not None:
                self._admit_queue(tx, item["queue"], max_queues)
            explicit = {item["id"]} if job.id is not None else set()
            result = self._results(tx.run, [item], self._enqueue_in(tx, [item], explicit))[0]
            if result.created:
                audit_in(tx, actor, "enqueue", job_id=result.id)
            return result

        retries = self.db.thread_retries()
        result = self.db.transaction(enqueue)
        # Retried: the conflict or duplicate may be this call's own job, which an attempt committed (with
        # its audit row) before its reply was lost.
        retried = not result.created and self.db.thread_retries() != retries
        if retried and self.db.run("enqueued_unseen", write=False, items=[item]):
            return EnqueueResult(id=item["id"], created=True, status="new")
        return result

    def _enqueue_one_audited(
        self, item: dict[str, Any], actor: Actor, max_queues: int | None
    ) -> EnqueueResult:
        """enqueue_audited's commonest call (a generated id, no idempotency key) as one statement that also
        writes the audit row. No row back: refused by `max_queues` (raised here, 422), or an earlier
        attempt of this call committed, audit row and all, and lost its reply (the store retried)."""
        params = _one_params(item)
        for _ in range(2):
            retries = self.db.thread_retries()
            rows = self.db.run("enqueue_one_audited", actor=actor.name, max_queues=max_queues, **params)
            if rows or self.db.thread_retries() != retries:
                signals.publish(self.db.dialect.url)
                return _generated(item["id"], True)
            if max_queues is None:
                break
            # Refused, unless another request made the queue in between: then it is admitted now.
            self._admit_queue(self.db, item["queue"], max_queues)
        return _generated(item["id"], False)

    def _admit_queue(self, tx: Any, name: str, max_queues: int) -> None:
        row = tx.run("queue_admission", queue=name, max_queues=max_queues)[0]
        if not row["ok"]:
            raise errors.ValidationError(
                f"queue {name!r} does not exist and {int(row['n']):,} queues do (Api.MaxQueues is "
                f"{max_queues:,}): use an existing queue, or ask an admin to raise the limit",
                field="queue",
            )

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
                id=r["id"] or winners.get(items[r["ord"]].get("idempotency_key")) or items[r["ord"]]["id"],
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
        if not explicit or not self.db.dialect.snapshot_per_statement:
            return self.db.run("enqueue", items=items, notify=False)
        return self.db.transaction(lambda tx: self._enqueue_in(tx, items, explicit))

    def _enqueue_in(
        self, tx: Tx, items: list[dict[str, Any]], explicit: set[str], *, notify: bool = False
    ) -> list[dict[str, Any]]:
        """The enqueue statement (and its re-check, see _enqueue_rows) inside an open transaction."""
        rows = tx.run("enqueue", items=items, notify=notify)
        if explicit and self.db.dialect.snapshot_per_statement:
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
        # One call, one caller's trace context: read once, not per job (OpenTelemetry's lookup was a sixth
        # of the Python time of a 1000-job enqueue).
        context = tracing.current_context() if tracing.ENABLED else None
        fresh = iter(ids.new_ids(sum(1 for job in jobs if job.id is None)))
        items = [self._enqueue_item(i, job, context, fresh) for i, job in enumerate(jobs)]
        if len({i["id"] for i in items}) < len(items):
            raise errors.ValidationError("the same job id appears twice in one enqueue", field="id")
        return items, {item["id"] for item, job in zip(items, jobs, strict=True) if job.id is not None}

    def _plain_item(self, job: NewJob) -> dict[str, Any] | None:
        """The item of a job that gives nothing but a type, a queue, a payload and a priority (the usual
        single enqueue), built as enqueue_one reads it: validated as _enqueue_item validates those
        fields, null ones and the ordinal left out (`_enqueue_unsure` numbers items if the checked
        statement must read them). None when the job gives more, or a trace context applies."""
        if plain_batch.gives_more(job) or (tracing.ENABLED and tracing.current_context() is not None):
            return None
        queue, type_, payload, priority = self._fields(job)
        item = {"id": ids.new_id(), "queue": queue, "type": type_, "priority": priority}
        if payload is not None:
            item["payload"] = payload
        return item

    def _fields(self, job: NewJob) -> tuple[str, str, str | None, int]:
        """The fields every item has, validated: queue, type, payload and priority (DEFAULT_PRIORITY when
        not given)."""
        priority = validation.priority(job.priority)
        queue = validation.queue(job.queue)
        type_ = cast(str, validation.text(job.type, "type", max_len=validation.MAX_TYPE))
        payload = validation.payload(job.payload, max_bytes=self.db.max_payload_bytes, require_json=False)
        return queue, type_, payload, DEFAULT_PRIORITY if priority is None else priority

    def _enqueue_item(
        self, ord_: int, job: NewJob, context: str | None = None, fresh: Iterator[str] | None = None
    ) -> dict[str, Any]:
        """A validated job as the enqueue statements' item; `context`: the caller's trace context (W3C
        traceparent), for a job that does not carry its own; `fresh`: ids for jobs without one."""
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
        queue, type_, payload, priority = self._fields(job)
        return {
            "ord": ord_,
            "id": validation.job_id(job.id)
            if job.id is not None
            else (next(fresh) if fresh is not None else ids.new_id()),
            "queue": queue,
            "type": type_,
            "payload": payload,
            "tags": validation.tags(job.tags),
            "idempotency_key": validation.text(
                job.idempotency_key, "idempotency_key", max_len=validation.MAX_KEY, required=False
            ),
            "priority": priority,
            "delay_s": job.delay_seconds,
            "scheduled_at": self.db.format_time(job.scheduled_at) if job.scheduled_at else None,
            "created_by": validation.text(
                job.created_by, "created_by", max_len=validation.MAX_ACTOR, required=False
            ),
            # Without OpenTelemetry a constant None: the flag is the whole cost (docs/tracing.md).
            "trace_context": (
                validation.text(job.trace_context, "trace_context", max_len=tracing.MAX_CONTEXT_CHARS)
                if job.trace_context is not None
                else context
            ),
        }


def _fresh(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items as enqueue_fresh reads them: no ordinal, no null values (a missing key reads as null).
    A 1000-job statement's JSON shrank by half, and its server time by a fifth (docs/benchmarks.md)."""
    return [{k: v for k, v in item.items() if v is not None and k != "ord"} for item in items]


def _one_params(item: dict[str, Any]) -> dict[str, Any]:
    """A validated item as the one-job statements' parameters (they take no key and no ordinal)."""
    return {k: v for k, v in item.items() if k not in ("ord", "idempotency_key")}


def _generated(job_id: str, created: bool) -> EnqueueResult:
    """The result of a job whose id the store generated: new, or (never in practice) another job's id."""
    return EnqueueResult(id=job_id, created=created, status="new" if created else "conflict")
