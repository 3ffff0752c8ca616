"""Operator mutations of jobs and queues: edit, resurrect, cancel, purge, queue settings. Each writes its
audit rows in the same transaction as the change."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from chokaq_ops import errors, validation
from chokaq_ops.fingerprint import fingerprint_text
from chokaq_ops.models import Actor, BulkResult, DlqFilter
from chokaq_ops.records import JobRecord
from chokaq_ops.storage.audit import audit_in, person
from chokaq_ops.storage.bulk_streams import Streams
from chokaq_ops.storage.database import Database, Tx
from chokaq_ops.storage.filters import dlq_filter_params, filter_json
from chokaq_ops.storage.inputs import edit_payload
from chokaq_ops.storage.read_ops import ReadOps
from chokaq_ops.storage.worker_ops import report_twins

log = logging.getLogger("chokaq.storage")

RESURRECT_CHUNK = 1000  # bulk resurrect commits at most 1000 jobs per transaction
# How far back the audit log is searched for an operator move whose reply was lost (audited_unseen): it
# covers the call's own retries and a caller retrying after the error it was given.
LOST_REPLY_WINDOW_S = 3600.0
# (actor, job id) of single resurrects that raised a transient error, remembered for the caller's retry.
MAX_UNCERTAIN_RESURRECTS = 10_000
UNSET: Any = object()
Progress = Callable[[int], None]

CANCELLED_FINGERPRINT = fingerprint_text("Cancelled by admin").id
MAX_SPREAD_S = 7 * 86400.0  # a resurrect spread over more than a week is a mistake, not a plan
# The upper end of a filter chunk's range (dlq_chunk_bounds): none, for the one-at-a-time loop.
_UNBOUNDED = {"through_at": None, "through_id": None}


class AdminOps:
    def __init__(self, db: Database, reads: ReadOps) -> None:
        self.db = db
        self.reads = reads  # the job a refused edit or resurrect names, and what a rate-paced one counts
        # (actor, job id) of single resurrects that failed transiently: they may have committed.
        self._uncertain_resurrects: dict[tuple[str, str], None] = {}
        self._uncertain_lock = threading.Lock()

    # ------------------------------------------------------------------ edits

    def _edit_payload(self, payload: Any) -> str | None:
        return edit_payload(payload, self.db.max_payload_bytes)

    def edit_pending(
        self, job_id: str, *, actor: Actor, payload: Any = None, tags: Any = None, priority: int | None = None
    ) -> JobRecord:
        """Edit a hot job while it is pending (null keeps a field); InvalidState once a worker holds it."""
        actor = person(actor)
        job_id = validation.job_id(job_id)
        params: dict[str, Any] = {
            "payload": self._edit_payload(payload),
            "tags": validation.tags(tags),
            "priority": validation.priority(priority),
        }
        if all(v is None for v in params.values()):
            raise errors.ValidationError("nothing to change: give payload, tags or priority", field="payload")
        if not self.db.run("edit_pending", id=job_id, actor=actor.name, plan_id=actor.plan_id, **params):
            job = self.reads.get_job(job_id)
            raise errors.InvalidState(
                f"job {job_id} is {job.get('status') or job['location']}; only pending hot jobs can be edited"
            )
        return self.reads.get_job(job_id)

    def edit_dlq(self, job_id: str, *, actor: Actor, payload: Any = None, tags: Any = None) -> JobRecord:
        actor = person(actor)
        job_id = validation.job_id(job_id)
        params: dict[str, Any] = {"payload": self._edit_payload(payload), "tags": validation.tags(tags)}
        if all(v is None for v in params.values()):
            raise errors.ValidationError("nothing to change: give payload or tags", field="payload")
        if not self.db.run("edit_dlq", id=job_id, actor=actor.name, plan_id=actor.plan_id, **params):
            self.reads.get_job(job_id)  # 404 when it exists nowhere
            raise errors.InvalidState(f"job {job_id} is not in the dead-letter queue")
        return self.reads.get_job(job_id)

    # ------------------------------------------------------------------ resurrect

    def resurrect(
        self,
        job_id: str,
        *,
        actor: Actor,
        payload: Any = None,
        tags: Any = None,
        priority: int | None = None,
        renew: bool = True,
    ) -> JobRecord:
        """DLQ -> hot as a fresh pending job, with optional payload/tags/priority replacements. `renew`
        (default) restarts its lifetime clock (Retry.MaxJobAge) now; attempts restart at 0 either way."""
        actor = person(actor)
        renew = checked_renew(renew)
        item: dict[str, Any] = {
            "id": validation.job_id(job_id),
            "payload": self._edit_payload(payload),
            "tags": validation.tags(tags),
            "priority": validation.priority(priority),
        }
        key = (actor.name, item["id"])
        retries = self.db.thread_retries()
        try:
            moved = self._resurrect_items([item], actor, None, renew=renew)
        except errors.TransientStorageError:
            with self._uncertain_lock:
                self._uncertain_resurrects[key] = None
                while len(self._uncertain_resurrects) > MAX_UNCERTAIN_RESURRECTS:
                    del self._uncertain_resurrects[next(iter(self._uncertain_resurrects))]
            raise
        with self._uncertain_lock:
            remembered = key in self._uncertain_resurrects
            self._uncertain_resurrects.pop(key, None)
        if not moved and (remembered or self.db.thread_retries() != retries):
            # An attempt may have committed and lost its reply: the job is then back in hot (or already
            # run), and its latest audit row is this actor's resurrect. That is success, not a 409.
            moved = self.moved_unseen("resurrect", actor, [item["id"]])
        if not moved:
            job = self.reads.get_job(item["id"])
            raise errors.InvalidState(
                f"job {item['id']} is in {job['location']}, not in the dead-letter queue"
            )
        return self.reads.get_job(item["id"])

    def moved_unseen(self, action: str, actor: Actor, ids: Sequence[str]) -> list[str]:
        """Which of `ids` an operator move (`action`: resurrect, cancel, purge_dlq) of `actor` did move in an
        attempt whose reply was lost: their latest audit row, written in the move's transaction, says so."""
        if not ids:
            return []
        rows = self.db.run(
            "audited_unseen",
            write=False,
            ids=list(ids),
            action=action,
            actor=actor.name,
            plan_id=actor.plan_id,
            window_s=LOST_REPLY_WINDOW_S,
        )
        return [r["id"] for r in rows]

    def _resurrect_items(
        self,
        items: list[dict[str, Any]],
        actor: Actor,
        details: Any,
        spread_s: float = 0.0,
        *,
        renew: bool = True,
    ) -> list[str]:
        rows = self.db.run(
            "resurrect",
            items=items,
            actor=actor.name,
            plan_id=actor.plan_id,
            details=details,
            spread_s=spread_s,
            renew=int(renew),
        )
        return resurrected(rows)

    def resurrect_window(
        self,
        *,
        spread: float | None = None,
        rate: float | None = None,
        ids: Sequence[str] | None = None,
        flt: DlqFilter | None = None,
        max_jobs: int | None = None,
    ) -> float:
        """The window, in seconds, over which a bulk resurrect's due times are spread: `spread`, or at
        least as long as `rate` (jobs per second) needs for the jobs it will move, whichever is longer."""
        window = 0.0
        if spread is not None:
            if (
                isinstance(spread, bool)
                or not isinstance(spread, int | float)
                or not 0 <= spread <= MAX_SPREAD_S
            ):
                raise errors.ValidationError(f"spread must be 0 to {MAX_SPREAD_S:g} seconds", field="spread")
            window = float(spread)
        if rate is not None:
            if isinstance(rate, bool) or not isinstance(rate, int | float) or not rate > 0:
                raise errors.ValidationError(
                    "rate must be a positive number of jobs per second", field="rate"
                )
            if ids is not None:
                n = len(validation.ids(ids, max_count=10**7))
            else:
                n = self.reads.count_dlq(flt)
            n = min(n, max_jobs) if max_jobs else n
            window = max(window, n / float(rate))
        return min(window, MAX_SPREAD_S)

    def resurrect_many(
        self,
        *,
        actor: Actor,
        ids: Sequence[str] | None = None,
        flt: DlqFilter | None = None,
        max_jobs: int | None = None,
        edits: Mapping[str, Mapping[str, Any]] | None = None,
        progress: Progress | None = None,
        spread: float | None = None,
        rate: float | None = None,
        renew: bool = True,
    ) -> BulkResult:
        """Resurrect by ids or by filter in consecutive transactions of at most 1000 jobs. `edits` maps an
        id to replacement payload/tags/priority. A crash between chunks leaves each job in exactly one table.
        `spread` (seconds) jitters the jobs' due times uniformly over that window; `rate` (jobs per second)
        widens the window to as long as that rate needs for all of them (see `resurrect_window`).
        `renew` (default) restarts each job's lifetime clock (Retry.MaxJobAge) at the resurrect.
        """
        actor = person(actor)
        renew = checked_renew(renew)
        spread_s = self.resurrect_window(spread=spread, rate=rate, ids=ids, flt=flt, max_jobs=max_jobs)
        # Every edit is checked before the first chunk commits: bad input must change no row.
        checked = {
            validation.job_id(job_id, "edits"): {
                "payload": self._edit_payload(e.get("payload")),
                "tags": validation.tags(e.get("tags")),
                "priority": validation.priority(e.get("priority")),
            }
            for job_id, e in (edits or {}).items()
        }
        unchanged = {"payload": None, "tags": None, "priority": None}

        def move(chunk: list[str], details: Any) -> list[str]:
            items = [{"id": job_id, **checked.get(job_id, unchanged)} for job_id in chunk]
            return self._resurrect_items(items, actor, details, spread_s, renew=renew)

        def move_matching(limit: int, params: dict[str, Any]) -> list[dict[str, Any]]:
            rows = self.db.run(
                "resurrect_matching",
                limit=limit,
                actor=actor.name,
                plan_id=actor.plan_id,
                spread_s=spread_s,
                renew=int(renew),
                **params,
            )
            if rows and rows[0]["twins"]:
                log.warning(
                    "resurrect: %d dead job(s) already had their id in hot; those DLQ copies were "
                    "displaced to the audit log (events 'conflict')",
                    rows[0]["twins"],
                )
            return rows

        return self._chunked(
            move,
            ids=ids,
            flt=flt,
            max_jobs=max_jobs,
            chunk=RESURRECT_CHUNK,
            progress=progress,
            matching=None if checked else move_matching,
            audited=("resurrect", actor),
        )

    # ------------------------------------------------------------------ cancel and purge

    def cancel_many(self, ids: Sequence[str], *, actor: Actor) -> tuple[list[str], list[str]]:
        """Pending/fetched -> DLQ as Cancelled in one transaction; returns (cancelled, skipped). Running jobs
        are skipped: stopping user code mid-flight is the owning worker's call."""
        actor = person(actor)
        wanted = validation.ids(ids)
        retries = self.db.thread_retries()
        rows = self.db.run(
            "cancel",
            ids=wanted,
            actor=actor.name,
            plan_id=actor.plan_id,
            action="cancel",
            details=None,
            fingerprint=CANCELLED_FINGERPRINT,
        )
        done = {r["id"] for r in report_twins("cancel", rows)}
        if self.db.thread_retries() != retries:  # an attempt may have committed and lost its reply
            done.update(self.moved_unseen("cancel", actor, [i for i in wanted if i not in done]))
        return [i for i in wanted if i in done], [i for i in wanted if i not in done]

    def purge_dlq(
        self,
        *,
        actor: Actor,
        ids: Sequence[str] | None = None,
        flt: DlqFilter | None = None,
        max_jobs: int | None = None,
        progress: Progress | None = None,
    ) -> BulkResult:
        """Delete dead jobs by ids or filter in transactions of Storage.CleanupBatchSize rows."""
        actor = person(actor)

        def delete(chunk: list[str], details: Any) -> list[str]:
            rows = self.db.run(
                "purge_dlq",
                ids=chunk,
                batch=len(chunk),
                actor=actor.name,
                plan_id=actor.plan_id,
                action="purge_dlq",
                details=details,
            )
            return [r["id"] for r in rows]

        def delete_matching(limit: int, params: dict[str, Any]) -> list[dict[str, Any]]:
            return self.db.run(
                "purge_dlq_matching",
                limit=limit,
                actor=actor.name,
                plan_id=actor.plan_id,
                action="purge_dlq",
                **params,
            )

        return self._chunked(
            delete,
            ids=ids,
            flt=flt,
            max_jobs=max_jobs,
            chunk=self.db.cleanup_batch_size,
            progress=progress,
            matching=delete_matching,
            audited=("purge_dlq", actor),
        )

    def _chunked(
        self,
        action: Callable[[list[str], Any], list[str]],
        *,
        ids: Sequence[str] | None,
        flt: DlqFilter | None,
        max_jobs: int | None,
        chunk: int,
        progress: Progress | None,
        matching: Callable[[int, dict[str, Any]], list[dict[str, Any]]] | None = None,
        audited: tuple[str, Actor] | None = None,
    ) -> BulkResult:
        """`matching(limit, params)`, when given, selects and acts on the next chunk of a filter in one
        statement (one round trip instead of two) and returns one row: `n` moved and the cursor after
        the rows it took (no row when nothing matched; `n` may be 0 when every row it took was
        displaced instead, which is still progress); else ids are read, then acted on.

        `audited` = (audit action, actor) of the per-job audit rows the action writes. A chunk retried
        after a transient error may have committed an attempt whose reply was lost; its jobs are then
        counted from those audit rows (which commit with the move), so the count is what committed."""
        if (ids is None) == (flt is None):
            raise errors.ValidationError("give either ids or a filter", field="ids")
        if max_jobs is not None and max_jobs < 1:
            raise errors.ValidationError("max_jobs must be at least 1", field="max_jobs")
        if ids is not None:
            wanted = validation.ids(ids, max_count=10**7)[: max_jobs or None]
            return self._chunked_ids(action, wanted, chunk, progress, audited)
        params = dlq_filter_params(flt)
        # Freeze the match at the start: jobs that die while the operation runs are not swept up by it.
        # The window is half-open, so its end is one millisecond (SQLite's clock step) past now: a job
        # that died in this very millisecond is in.
        started = self.db.now()
        cutoff = started + timedelta(milliseconds=1)
        if params["failed_to"] is None or params["failed_to"] > cutoff:
            params["failed_to"] = cutoff
        details = filter_json(flt) | {"max_jobs": max_jobs} if max_jobs else filter_json(flt)
        cursor: dict[str, Any] = {"before_at": None, "before_id": None}
        retries = self.db.thread_retries()
        done = batches = 0
        retried = False
        if matching is not None and self.db.bulk_streams > 1:
            done, batches, cursor, retried = self._matching_streams(
                matching, params, {"details": {"filter": details}}, chunk, max_jobs, progress
            )
        while max_jobs is None or done < max_jobs:
            limit = chunk if max_jobs is None else min(chunk, max_jobs - done)
            if matching is not None:
                rows = matching(limit, params | cursor | _UNBOUNDED | {"details": {"filter": details}})
                if not rows:
                    if cursor["before_at"] is None:
                        break  # nothing left, or only rows another operation holds
                    # One last pass from the top for rows passed over (held by another operation).
                    cursor = {"before_at": None, "before_id": None}
                    continue
                n = int(rows[0]["n"])
                cursor = {"before_at": rows[0]["cursor_at"], "before_id": rows[0]["cursor_id"]}
            else:
                picked = [r["id"] for r in self.db.run("dlq_ids", write=False, limit=limit, **params)]
                if not picked:
                    break
                n = len(action(picked, {"filter": details}))
            done, batches = done + n, batches + 1
            if progress:
                progress(done)
            if not n and matching is None:
                break  # everything we saw was taken by someone else; stop rather than spin
        if audited and (retried or self.db.thread_retries() != retries):
            # A chunk was retried: an attempt of it may have committed unseen (the retry then took the next
            # rows). Every job this run moved has one audit row with its details, since `started` (a chunk
            # may begin within the millisecond `cutoff` adds).
            action_name, who = audited
            done = int(
                self.db.run(
                    "audited_count",
                    write=False,
                    actor=who.name,
                    plan_id=who.plan_id,
                    action=action_name,
                    since=started,
                    details={"filter": details},
                )[0]["n"]
            )
        return BulkResult(count=done, batches=batches)

    def _chunked_ids(
        self,
        action: Callable[[list[str], Any], list[str]],
        wanted: list[str],
        chunk: int,
        progress: Progress | None,
        audited: tuple[str, Actor] | None,
    ) -> BulkResult:
        """`_chunked` by ids: consecutive slices of `chunk` ids, Storage.BulkStreams of them at once."""

        def one(part: list[str]) -> list[str]:
            retries = self.db.thread_retries()
            moved = action(part, None)
            if audited and self.db.thread_retries() != retries:
                seen = set(moved)
                moved = moved + self.moved_unseen(*audited, [i for i in part if i not in seen])
            return moved

        done = batches = 0

        def committed(moved: list[str]) -> None:
            nonlocal done, batches
            done, batches = done + len(moved), batches + 1
            if progress:
                progress(done)

        parts = (wanted[i : i + chunk] for i in range(0, len(wanted), chunk))
        Streams[list[str]](self.db).run((partial(one, part) for part in parts), committed)
        return BulkResult(count=done, batches=batches)

    def _matching_streams(
        self,
        matching: Callable[[int, dict[str, Any]], list[dict[str, Any]]],
        params: dict[str, Any],
        extra: dict[str, Any],
        chunk: int,
        max_jobs: int | None,
        progress: Progress | None,
    ) -> tuple[int, int, dict[str, Any], bool]:
        """`_chunked` by filter with Storage.BulkStreams chunks in flight (storage/bulk_streams.py). The
        chunks are planned ahead by `dlq_chunk_bounds` (where each of the next ones ends), one `matching`
        per range (before, through], so chunks in flight take disjoint rows. Returns (done, batches,
        cursor, retried) for `_chunked`'s one-at-a-time loop, which finishes: it finds what is left after
        the cursor (nothing, unless rows were held) and makes the pass from the top for passed-over rows."""
        done = batches = 0
        cursor: dict[str, Any] = {"before_at": None, "before_id": None}
        streams = Streams[list[dict[str, Any]]](self.db)

        def chunks() -> Iterator[Callable[[], list[dict[str, Any]]]]:
            nonlocal cursor
            planned = 0
            while max_jobs is None or planned < max_jobs:
                want = chunk * streams.width
                want = want if max_jobs is None else min(want, max_jobs - planned)
                bounds = self.db.run(
                    "dlq_chunk_bounds", write=False, limit=want, chunk=chunk, **params, **cursor
                )
                for bound in bounds:
                    through = {"through_at": bound["through_at"], "through_id": bound["through_id"]}
                    call = partial(matching, chunk, params | cursor | through | extra)
                    cursor = {"before_at": bound["through_at"], "before_id": bound["through_id"]}
                    yield call
                planned += int(bounds[-1]["taken"]) if bounds else 0
                if not bounds or int(bounds[-1]["taken"]) < want:
                    return  # the match ends here

        def committed(rows: list[dict[str, Any]]) -> None:
            nonlocal done, batches
            done, batches = done + (int(rows[0]["n"]) if rows else 0), batches + 1
            if progress:
                progress(done)

        streams.run(chunks(), committed)
        return done, batches, cursor, streams.retried

    def purge_archive(
        self, older_than: datetime, *, actor: Actor, progress: Progress | None = None
    ) -> BulkResult:
        """Delete archive rows finished before `older_than`, oldest first, in CleanupBatchSize batches."""
        actor = person(actor)
        if older_than.tzinfo is None:
            raise errors.ValidationError("older_than must carry a time zone", field="older_than")
        details = {"older_than": older_than.isoformat()}
        done = batches = 0
        after: dict[str, Any] = {"after_at": None, "after_id": None}  # keyset cursor: where a batch ended
        while True:
            rows = self.db.run(
                "purge_archive",
                cutoff=older_than,
                batch=self.db.cleanup_batch_size,
                actor=actor.name,
                details=details,
                **after,
            )
            n = int(rows[0]["purged"]) if rows else 0
            if n == 0:
                break
            after = {"after_at": rows[0]["last_at"], "after_id": rows[0]["last_id"]}
            done, batches = done + n, batches + 1
            if progress:
                progress(done)
            if n < self.db.cleanup_batch_size:
                break
        return BulkResult(count=done, batches=batches)

    # ------------------------------------------------------------------ queues

    def set_queue(
        self,
        name: str,
        *,
        actor: Actor,
        paused: bool = UNSET,
        active: bool = UNSET,
        zombie_timeout_seconds: int | None = UNSET,
        max_workers: int | None = UNSET,
        min_zombie_timeout: float = 0.0,
        tx: Any = None,
    ) -> dict[str, Any]:
        """Upsert a queue's control row; UNSET leaves a field, None clears an override. `tx`: run inside
        that open transaction instead of one of its own."""
        actor = person(actor)
        name = validation.queue(name, "name")
        if zombie_timeout_seconds not in (UNSET, None):
            _int_in(zombie_timeout_seconds, "zombie_timeout_seconds", 1, validation.MAX_ZOMBIE_TIMEOUT)
            if zombie_timeout_seconds <= min_zombie_timeout:
                raise errors.ValidationError(
                    "zombie_timeout_seconds must exceed 3 x Execution.HeartbeatIntervalMax "
                    f"({min_zombie_timeout:g}s)",
                    field="zombie_timeout_seconds",
                )
        if max_workers not in (UNSET, None):
            _int_in(max_workers, "max_workers", 1, validation.MAX_MAX_WORKERS)
        for flag, value in (("paused", paused), ("active", active)):
            if value is not UNSET and not isinstance(value, bool):
                raise errors.ValidationError(f"{flag} must be true or false", field=flag)
        if all(v is UNSET for v in (paused, active, zombie_timeout_seconds, max_workers)):
            raise errors.ValidationError("nothing to change", field="paused")
        rows = (tx.run if tx is not None else self.db.run)(
            "set_queue",
            name=name,
            actor=actor.name,
            paused=None if paused is UNSET else paused,
            paused_set=int(paused is not UNSET),
            active=None if active is UNSET else active,
            active_set=int(active is not UNSET),
            zombie_timeout_seconds=None if zombie_timeout_seconds is UNSET else zombie_timeout_seconds,
            zombie_set=int(zombie_timeout_seconds is not UNSET),
            max_workers=None if max_workers is UNSET else max_workers,
            max_workers_set=int(max_workers is not UNSET),
        )
        return rows[0]

    def update_queue(self, name: str, *, actor: Actor, **changes: Any) -> dict[str, Any]:
        """PATCH /queues/{name}: change an existing queue (QueueNotFound for an unknown name, so a typo or a
        script cannot create queues). The check and the change share one transaction."""
        min_zombie = changes.pop("min_zombie_timeout", 0.0)
        name = validation.queue(name, "name")

        def update(tx: Tx) -> dict[str, Any]:
            if not tx.run("queue_rows", name=name):
                raise QueueNotFound(f"no queue named {name!r}", field="name")
            return self.set_queue(name, actor=actor, min_zombie_timeout=min_zombie, tx=tx, **changes)

        return self.db.transaction(update)

    # ------------------------------------------------------------------ audit

    def audit(
        self, actor: Actor, action: str, *, job_id: str | None = None, count: int = 1, details: Any = None
    ) -> None:
        """One audit row for an operator action that has no job-level statement of its own."""
        who = person(actor)
        self.db.transaction(lambda tx: audit_in(tx, who, action, job_id=job_id, count=count, details=details))


def checked_renew(renew: Any) -> bool:
    """`renew` as given to a resurrect: a bool, nothing else (a truthy string is a mistake, not a yes)."""
    if not isinstance(renew, bool):
        raise errors.ValidationError("renew must be true or false", field="renew")
    return renew


def resurrected(rows: list[dict[str, Any]]) -> list[str]:
    """The ids a `resurrect` statement put back into hot; the ones it displaced instead (their id was
    already in hot) are logged."""
    for r in rows:
        if r["twin"]:
            log.warning(
                "resurrect: job %s is already in hot; its DLQ copy was displaced to the audit log "
                "(event 'conflict')",
                r["id"],
            )
    return [r["id"] for r in rows if not r["twin"]]


def _int_in(value: Any, field: str, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise errors.ValidationError(f"{field} must be an integer between {low} and {high}", field=field)


class QueueNotFound(errors.JobNotFound):
    """No such queue."""
