"""The Store: every storage operation (docs/storage-contract.md) over one database URL.

A Database (pool, dialect, named queries, transactions, retries) and one small part per concern over it;
the Store builds them and forwards each public operation to the part that holds it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from chokaq_ops.models import (
    Actor,
    ArchiveFilter,
    BulkResult,
    DlqFilter,
    EnqueueResult,
    FailureFilter,
    HotFilter,
    NewJob,
    Page,
)
from chokaq_ops.records import ArchivedJob, AuditEntry, ClaimedJob, DeadJob, HotJob, JobRecord, Started
from chokaq_ops.storage import filters, producer, queries, worker_ops
from chokaq_ops.storage.admin_ops import UNSET, AdminOps, Progress
from chokaq_ops.storage.circuit_ops import CircuitOps
from chokaq_ops.storage.database import Database, Tx
from chokaq_ops.storage.dialects import Dialect
from chokaq_ops.storage.events import Events
from chokaq_ops.storage.failure_ops import FailureOps
from chokaq_ops.storage.leases import Leases
from chokaq_ops.storage.plan_ops import PLAN_CHUNK, PlanOps
from chokaq_ops.storage.pool import Pool
from chokaq_ops.storage.read_ops import TOP_ERROR_SAMPLE, ReadOps
from chokaq_ops.storage.registry_ops import RegistryOps
from chokaq_ops.storage.rescue import Audit, Rescue
from chokaq_ops.storage.tokens import Tokens
from chokaq_ops.storage.worker_ops import Dead, Retry, WorkerOps

if TYPE_CHECKING:
    from chokaq_ops.settings import Settings

T = TypeVar("T")


class Store:
    """Producer, worker, rescue, operator, read and bulk-plan operations; safe to share between threads."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 16,
        cleanup_batch_size: int = 1000,
        max_transient_retries: int = 3,
        transient_retry_base_delay: float = 0.2,
        max_payload_bytes: int = 1_000_000,
        command_timeout: float = 30.0,
        lock_timeout: float = 5.0,
        connect_timeout: float = 10.0,
    ) -> None:
        self.db = Database(
            url,
            pool_size=pool_size,
            cleanup_batch_size=cleanup_batch_size,
            max_transient_retries=max_transient_retries,
            transient_retry_base_delay=transient_retry_base_delay,
            max_payload_bytes=max_payload_bytes,
            command_timeout=command_timeout,
            lock_timeout=lock_timeout,
            connect_timeout=connect_timeout,
            prepared=worker_ops.PREPARED,
            rule_planned=worker_ops.RULE_PLANNED,
            producer_prepared=producer.PREPARED,
        )
        self.producer = producer.Producer(self.db)
        self.worker = WorkerOps(self.db)
        self.rescue = Rescue(self.db)
        self.leases = Leases(self.db)
        self.reads = ReadOps(self.db)
        self.admin = AdminOps(self.db, self.reads)
        self.tokens = Tokens(self.db)
        self.plans = PlanOps(self.db)
        self.circuits = CircuitOps(self.db)
        self.registry = RegistryOps(self.db)
        self.failures = FailureOps(self.db)
        self.events = Events(self.db)

    @classmethod
    def from_settings(cls, settings: Settings, url: str | None = None) -> Store:
        s = settings.storage
        return cls(
            url or s.url,
            pool_size=s.pool_size,
            cleanup_batch_size=s.cleanup_batch_size,
            max_transient_retries=s.max_transient_retries,
            transient_retry_base_delay=s.transient_retry_base_delay,
            max_payload_bytes=settings.serialization.max_payload_bytes,
            command_timeout=s.command_timeout,
            lock_timeout=s.lock_timeout,
            connect_timeout=s.connect_timeout,
        )

    # ------------------------------------------------------------------ the database (Database)

    @property
    def url(self) -> str:
        return self.db.url

    @property
    def dialect(self) -> Dialect:
        return self.db.dialect

    @property
    def pool(self) -> Pool:
        return self.db.pool

    @property
    def queries(self) -> dict[str, queries.Query]:
        return self.db.queries

    @queries.setter
    def queries(self, value: dict[str, queries.Query]) -> None:
        # The bench and the demo add their own named queries to a store's.
        self.db.queries = value

    @property
    def cleanup_batch_size(self) -> int:
        return self.db.cleanup_batch_size

    @cleanup_batch_size.setter
    def cleanup_batch_size(self, value: int) -> None:
        self.db.cleanup_batch_size = value

    @property
    def max_payload_bytes(self) -> int:
        return self.db.max_payload_bytes

    @property
    def command_timeout(self) -> float | None:
        return self.db.command_timeout

    @property
    def max_transient_retries(self) -> int:
        return self.db.max_transient_retries

    @property
    def transient_retry_base_delay(self) -> float:
        return self.db.transient_retry_base_delay

    @property
    def retries_done(self) -> int:
        return self.db.retries_done

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, name: str, /, *, write: bool = True, **params: Any) -> list[dict[str, Any]]:
        return self.db.run(name, write=write, **params)

    def transaction(self, fn: Callable[[Tx], T], *, write: bool = True) -> T:
        return self.db.transaction(fn, write=write)

    def snapshot(self, start: str) -> AbstractContextManager[Tx]:
        return self.db.snapshot(start)

    def run_batches(
        self,
        name: str,
        /,
        *,
        count: Callable[[list[dict[str, Any]]], int] = len,
        cursor: Callable[[list[dict[str, Any]]], dict[str, Any]] | None = None,
        each: Callable[[Tx, list[dict[str, Any]]], None] | None = None,
        **params: Any,
    ) -> Iterator[list[dict[str, Any]]]:
        return self.db.run_batches(name, count=count, cursor=cursor, each=each, **params)

    def thread_retries(self) -> int:
        return self.db.thread_retries()

    def format_time(self, value: datetime) -> str:
        return self.db.format_time(value)

    def now(self) -> datetime:
        return self.db.now()

    def connection(self) -> AbstractContextManager[Any]:
        return self.db.connection()

    @staticmethod
    def unbounded() -> AbstractContextManager[None]:
        return Database.unbounded()

    def dlq_filter_params(self, flt: DlqFilter | None) -> dict[str, Any]:
        return filters.dlq_filter_params(flt)

    # ------------------------------------------------------------------ producer (Producer)

    def enqueue(self, jobs: Iterable[NewJob]) -> list[EnqueueResult]:
        return self.producer.enqueue(jobs)

    def next_due(self, queues: Sequence[str] | None = None) -> float | None:
        return self.producer.next_due(queues)

    def enqueue_on(self, conn: Any, jobs: Iterable[NewJob]) -> list[EnqueueResult]:
        return self.producer.enqueue_on(conn, jobs)

    def enqueue_audited(self, job: NewJob, *, actor: Actor, max_queues: int | None = None) -> EnqueueResult:
        return self.producer.enqueue_audited(job, actor=actor, max_queues=max_queues)

    # ------------------------------------------------------------------ worker (WorkerOps)

    def fetch(
        self,
        worker_id: str,
        limit: int,
        queues: Sequence[str] | None = None,
        *,
        exact_caps: bool = False,
        start: int = 0,
    ) -> list[ClaimedJob]:
        return self.worker.fetch(worker_id, limit, queues, exact_caps=exact_caps, start=start)

    def claims_uncertain(self, worker_id: str) -> bool:
        return self.worker.claims_uncertain(worker_id)

    def recover_claims(self, worker_id: str, known_ids: Iterable[str]) -> list[ClaimedJob]:
        return self.worker.recover_claims(worker_id, known_ids)

    def mark_processing(self, worker_id: str, job_ids: Sequence[str]) -> dict[str, Started]:
        return self.worker.mark_processing(worker_id, job_ids)

    def heartbeat(self, worker_id: str, job_ids: Sequence[str]) -> set[str]:
        return self.worker.heartbeat(worker_id, job_ids)

    def beat(self, worker_id: str, job_ids: Sequence[str]) -> tuple[set[str], set[str]]:
        return self.worker.beat(worker_id, job_ids)

    def release(self, worker_id: str, job_ids: Sequence[str]) -> list[str]:
        return self.worker.release(worker_id, job_ids)

    def release_unstarted(self, worker_id: str, job_ids: Sequence[str]) -> list[str]:
        return self.worker.release_unstarted(worker_id, job_ids)

    def archive_succeeded(self, worker_id: str, items: Sequence[tuple[str, float | None]]) -> list[str]:
        return self.worker.archive_succeeded(worker_id, items)

    def move_to_dlq(self, worker_id: str, items: Sequence[Dead]) -> list[str]:
        return self.worker.move_to_dlq(worker_id, items)

    def reschedule(self, worker_id: str, items: Sequence[Retry]) -> list[str]:
        return self.worker.reschedule(worker_id, items)

    # ------------------------------------------------------------------ rescue (Rescue)

    def recover_abandoned(self, timeout_s: float, *, audit: Audit | None = None) -> list[dict[str, Any]]:
        return self.rescue.recover_abandoned(timeout_s, audit=audit)

    def recover_orphaned(self, gone_s: float, *, audit: Audit | None = None) -> list[dict[str, Any]]:
        return self.rescue.recover_orphaned(gone_s, audit=audit)

    def archive_zombies(
        self,
        global_timeout_s: float,
        overrides: Mapping[str, float] | None = None,
        fingerprint: str | None = None,
        within: float | None = None,
        *,
        audit: Audit | None = None,
    ) -> list[dict[str, Any]]:
        return self.rescue.archive_zombies(global_timeout_s, overrides, fingerprint, within, audit=audit)

    # ------------------------------------------------------------------ leases (Leases)

    def try_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        return self.leases.try_lease(name, holder, ttl_s)

    def release_lease(self, name: str, holder: str) -> None:
        self.leases.release_lease(name, holder)

    # ------------------------------------------------------------------ reads (ReadOps)

    def get_job(self, job_id: str) -> JobRecord:
        return self.reads.get_job(job_id)

    def list_hot(
        self,
        flt: HotFilter | None = None,
        *,
        sort: str = "created_at",
        descending: bool = True,
        page: int = 1,
        page_size: int = 100,
    ) -> Page[HotJob]:
        return self.reads.list_hot(flt, sort=sort, descending=descending, page=page, page_size=page_size)

    def list_archive(
        self,
        flt: ArchiveFilter | None = None,
        *,
        sort: str = "finished_at",
        descending: bool = True,
        page: int = 1,
        page_size: int = 100,
    ) -> Page[ArchivedJob]:
        return self.reads.list_archive(flt, sort=sort, descending=descending, page=page, page_size=page_size)

    def list_dlq(
        self,
        flt: DlqFilter | None = None,
        *,
        sort: str = "failed_at",
        descending: bool = True,
        page: int = 1,
        page_size: int = 100,
    ) -> Page[DeadJob]:
        return self.reads.list_dlq(flt, sort=sort, descending=descending, page=page, page_size=page_size)

    def count_dlq(self, flt: DlqFilter | None = None) -> int:
        return self.reads.count_dlq(flt)

    def dlq_ids(self, flt: DlqFilter | None = None, *, limit: int = 10000000) -> list[str]:
        return self.reads.dlq_ids(flt, limit=limit)

    def preview_dlq(
        self, *, flt: DlqFilter | None = None, ids: Sequence[str] | None = None, sample: int = 10
    ) -> dict[str, Any]:
        return self.reads.preview_dlq(flt=flt, ids=ids, sample=sample)

    def top_errors(
        self, flt: DlqFilter | None = None, *, limit: int = 10, sample: int = TOP_ERROR_SAMPLE
    ) -> list[dict[str, Any]]:
        return self.reads.top_errors(flt, limit=limit, sample=sample)

    def dlq_summary(self, flt: DlqFilter | None = None, *, top: int = 10) -> dict[str, Any]:
        return self.reads.dlq_summary(flt, top=top)

    def stats(self) -> dict[str, Any]:
        return self.reads.stats()

    def queue_stats(self, name: str | None = None, *, worker_gone_s: float = 30.0) -> list[dict[str, Any]]:
        return self.reads.queue_stats(name, worker_gone_s=worker_gone_s)

    def list_workers(self) -> list[dict[str, Any]]:
        return self.reads.list_workers()

    def list_audit(
        self,
        *,
        actor: str | None = None,
        action: str | None = None,
        job_id: str | None = None,
        plan_id: str | None = None,
        since: datetime | None = None,
        page: int = 1,
        page_size: int = 100,
    ) -> Page[AuditEntry]:
        return self.reads.list_audit(
            actor=actor,
            action=action,
            job_id=job_id,
            plan_id=plan_id,
            since=since,
            page=page,
            page_size=page_size,
        )

    # ------------------------------------------------------------------ operator mutations (AdminOps)

    def edit_pending(
        self, job_id: str, *, actor: Actor, payload: Any = None, tags: Any = None, priority: int | None = None
    ) -> JobRecord:
        return self.admin.edit_pending(job_id, actor=actor, payload=payload, tags=tags, priority=priority)

    def edit_dlq(self, job_id: str, *, actor: Actor, payload: Any = None, tags: Any = None) -> JobRecord:
        return self.admin.edit_dlq(job_id, actor=actor, payload=payload, tags=tags)

    def resurrect(
        self, job_id: str, *, actor: Actor, payload: Any = None, tags: Any = None, priority: int | None = None
    ) -> JobRecord:
        return self.admin.resurrect(job_id, actor=actor, payload=payload, tags=tags, priority=priority)

    def moved_unseen(self, action: str, actor: Actor, ids: Sequence[str]) -> list[str]:
        return self.admin.moved_unseen(action, actor, ids)

    def resurrect_window(
        self,
        *,
        spread: float | None = None,
        rate: float | None = None,
        ids: Sequence[str] | None = None,
        flt: DlqFilter | None = None,
        max_jobs: int | None = None,
    ) -> float:
        return self.admin.resurrect_window(spread=spread, rate=rate, ids=ids, flt=flt, max_jobs=max_jobs)

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
    ) -> BulkResult:
        return self.admin.resurrect_many(
            actor=actor,
            ids=ids,
            flt=flt,
            max_jobs=max_jobs,
            edits=edits,
            progress=progress,
            spread=spread,
            rate=rate,
        )

    def cancel_many(self, ids: Sequence[str], *, actor: Actor) -> tuple[list[str], list[str]]:
        return self.admin.cancel_many(ids, actor=actor)

    def purge_dlq(
        self,
        *,
        actor: Actor,
        ids: Sequence[str] | None = None,
        flt: DlqFilter | None = None,
        max_jobs: int | None = None,
        progress: Progress | None = None,
    ) -> BulkResult:
        return self.admin.purge_dlq(actor=actor, ids=ids, flt=flt, max_jobs=max_jobs, progress=progress)

    def purge_archive(
        self, older_than: datetime, *, actor: Actor, progress: Progress | None = None
    ) -> BulkResult:
        return self.admin.purge_archive(older_than, actor=actor, progress=progress)

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
        return self.admin.set_queue(
            name,
            actor=actor,
            paused=paused,
            active=active,
            zombie_timeout_seconds=zombie_timeout_seconds,
            max_workers=max_workers,
            min_zombie_timeout=min_zombie_timeout,
            tx=tx,
        )

    def update_queue(self, name: str, *, actor: Actor, **changes: Any) -> dict[str, Any]:
        return self.admin.update_queue(name, actor=actor, **changes)

    def audit(
        self, actor: Actor, action: str, *, job_id: str | None = None, count: int = 1, details: Any = None
    ) -> None:
        self.admin.audit(actor, action, job_id=job_id, count=count, details=details)

    # ------------------------------------------------------------------ tokens (Tokens)

    def create_token(self, name: str, role: str, *, actor: Actor) -> str:
        return self.tokens.create_token(name, role, actor=actor)

    def verify_token(self, token: str) -> dict[str, Any] | None:
        return self.tokens.verify_token(token)

    def list_tokens(self) -> list[dict[str, Any]]:
        return self.tokens.list_tokens()

    def revoke_token(self, name: str, *, actor: Actor) -> bool:
        return self.tokens.revoke_token(name, actor=actor)

    # ------------------------------------------------------------------ bulk plans (PlanOps)

    def create_plan(
        self,
        action: str,
        *,
        actor: Actor,
        ids: Sequence[str] | None = None,
        flt: DlqFilter | HotFilter | None = None,
        edits: Mapping[str, Mapping[str, Any]] | None = None,
        max_jobs: int | None = None,
        chunk_size: int = PLAN_CHUNK,
        label: str | None = None,
    ) -> dict[str, Any]:
        return self.plans.create_plan(
            action,
            actor=actor,
            ids=ids,
            flt=flt,
            edits=edits,
            max_jobs=max_jobs,
            chunk_size=chunk_size,
            label=label,
        )

    def get_plan(self, plan_id: str) -> dict[str, Any]:
        return self.plans.get_plan(plan_id)

    def list_plans(
        self, *, state: str | None = None, action: str | None = None, page: int = 1, page_size: int = 100
    ) -> tuple[list[dict[str, Any]], int]:
        return self.plans.list_plans(state=state, action=action, page=page, page_size=page_size)

    def plan_items(self, plan_id: str, *, page: int = 1, page_size: int = 1000) -> list[dict[str, Any]]:
        return self.plans.plan_items(plan_id, page=page, page_size=page_size)

    def plan_outcomes(
        self, plan_id: str, *, from_chunk: int | None = None, to_chunk: int | None = None
    ) -> dict[str, Any]:
        return self.plans.plan_outcomes(plan_id, from_chunk=from_chunk, to_chunk=to_chunk)

    def execute_plan_chunk(
        self, plan_id: str, *, actor: Actor, spread: float = 0.0
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        return self.plans.execute_plan_chunk(plan_id, actor=actor, spread=spread)

    def approve_plan(self, plan_id: str, *, actor: Actor) -> dict[str, Any]:
        return self.plans.approve_plan(plan_id, actor=actor)

    def plan_by_label(self, action: str, label: str) -> dict[str, Any] | None:
        return self.plans.plan_by_label(action, label)

    def note_plan(
        self, plan_id: str, event: str, *, actor: Actor, details: Mapping[str, Any] | None = None
    ) -> None:
        self.plans.note_plan(plan_id, event, actor=actor, details=details)

    def discard_plan(self, plan_id: str, *, actor: Actor) -> dict[str, Any]:
        return self.plans.discard_plan(plan_id, actor=actor)

    # ------------------------------------------------------------------ circuits (CircuitOps)

    def circuit_failures(self, items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return self.circuits.circuit_failures(items)

    def circuit_successes(self, items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return self.circuits.circuit_successes(items)

    def circuit_probe(self, items: Sequence[Mapping[str, Any]]) -> set[str]:
        return self.circuits.circuit_probe(items)

    def circuit_states(self) -> list[dict[str, Any]]:
        return self.circuits.circuit_states()

    def list_circuits(self) -> list[dict[str, Any]]:
        return self.circuits.list_circuits()

    def get_circuit(self, type_key: str) -> dict[str, Any]:
        return self.circuits.get_circuit(type_key)

    def set_circuit(self, type_key: str, state: str, *, actor: Actor) -> dict[str, Any]:
        return self.circuits.set_circuit(type_key, state, actor=actor)

    def defer(self, worker_id: str, job_ids: Sequence[str], delay_s: float) -> list[str]:
        return self.circuits.defer(worker_id, job_ids, delay_s)

    # ------------------------------------------------------------------ worker registry (RegistryOps)

    def worker_register(
        self,
        worker_id: str,
        *,
        host: str,
        pid: int,
        queues: Sequence[str] | None,
        concurrency: int,
        running: int,
        prefetched: int,
    ) -> int | None:
        return self.registry.worker_register(
            worker_id,
            host=host,
            pid=pid,
            queues=queues,
            concurrency=concurrency,
            running=running,
            prefetched=prefetched,
        )

    def worker_unregister(self, worker_id: str) -> None:
        self.registry.worker_unregister(worker_id)

    def list_registry(self) -> list[dict[str, Any]]:
        return self.registry.list_registry()

    def set_worker_concurrency(self, worker_id: str, concurrency: int, *, actor: Actor) -> dict[str, Any]:
        return self.registry.set_worker_concurrency(worker_id, concurrency, actor=actor)

    def gone_workers(self, gone_s: float) -> set[str]:
        return self.registry.gone_workers(gone_s)

    def prune_workers(self, older_than_s: float) -> int:
        return self.registry.prune_workers(older_than_s)

    # ------------------------------------------------------------------ failure history (FailureOps)

    def failure_history(
        self, flt: FailureFilter, *, limit: int = 1000, after_seq: int | None = None
    ) -> list[dict[str, Any]]:
        return self.failures.failure_history(flt, limit=limit, after_seq=after_seq)

    def locate(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        return self.failures.locate(ids)

    def register_job_types(self, declared: Mapping[str, bool]) -> None:
        self.failures.register_job_types(declared)

    def idempotent_types(self) -> list[str]:
        return self.failures.idempotent_types()

    # ------------------------------------------------------------------ events and retention (Events)

    def add_event(self, kind: str, message: str, data: Mapping[str, Any] | None = None) -> int:
        return self.events.add_event(kind, message, data)

    def events_after(self, after_id: int, limit: int = 100) -> list[dict[str, Any]]:
        return self.events.events_after(after_id, limit)

    def last_event_id(self) -> int:
        return self.events.last_event_id()

    def prune(
        self,
        *,
        buckets_older_than_s: float,
        events_older_than_s: float,
        failures_older_than_s: float | None = None,
    ) -> dict[str, int]:
        return self.events.prune(
            buckets_older_than_s=buckets_older_than_s,
            events_older_than_s=events_older_than_s,
            failures_older_than_s=failures_older_than_s,
        )
