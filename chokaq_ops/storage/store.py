"""The Store: every storage operation (docs/storage-contract.md) over one database URL.

A Database (pool, dialect, named queries, transactions, retries) and one small part per concern over it;
the Store builds them and forwards each public operation to the part that holds it."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from chokaq_ops.models import DlqFilter
from chokaq_ops.storage import filters, producer, queries, worker_ops
from chokaq_ops.storage.admin_ops import AdminOps
from chokaq_ops.storage.alert_ops import AlertOps
from chokaq_ops.storage.circuit_ops import CircuitOps
from chokaq_ops.storage.database import Database
from chokaq_ops.storage.dialects import Dialect
from chokaq_ops.storage.events import Events
from chokaq_ops.storage.failure_ops import FailureOps
from chokaq_ops.storage.forward import forward
from chokaq_ops.storage.horizon import HorizonOps
from chokaq_ops.storage.leases import Leases
from chokaq_ops.storage.plan_freezes import PlanFreezes
from chokaq_ops.storage.plan_ops import PlanOps
from chokaq_ops.storage.pool import Pool
from chokaq_ops.storage.read_ops import ReadOps
from chokaq_ops.storage.registry_ops import RegistryOps
from chokaq_ops.storage.rescue import Rescue
from chokaq_ops.storage.schedule_ops import ScheduleOps
from chokaq_ops.storage.tokens import Tokens
from chokaq_ops.storage.wal import Wal
from chokaq_ops.storage.worker_ops import WorkerOps

if TYPE_CHECKING:
    from chokaq_ops.settings import Settings


class Store:
    """Producer, worker, rescue, operator, read and bulk-plan operations; safe to share between threads."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 16,
        cleanup_batch_size: int = 1000,
        bulk_streams: int = 2,
        max_transient_retries: int = 3,
        transient_retry_base_delay: float = 0.2,
        max_payload_bytes: int = 1_000_000,
        command_timeout: float = 30.0,
        lock_timeout: float = 5.0,
        connect_timeout: float = 10.0,
        wal_limit_bytes: int = 64 * 2**20,
    ) -> None:
        self.db = Database(
            url,
            pool_size=pool_size,
            cleanup_batch_size=cleanup_batch_size,
            bulk_streams=bulk_streams,
            max_transient_retries=max_transient_retries,
            transient_retry_base_delay=transient_retry_base_delay,
            max_payload_bytes=max_payload_bytes,
            command_timeout=command_timeout,
            lock_timeout=lock_timeout,
            connect_timeout=connect_timeout,
            wal_limit_bytes=wal_limit_bytes,
            prepared=worker_ops.PREPARED,
            producer_prepared=producer.PREPARED,
        )
        self.producer = producer.Producer(self.db)
        self.worker = WorkerOps(self.db)
        self.rescue = Rescue(self.db)
        self.wal = Wal(self.db, wal_limit_bytes)
        self.horizons = HorizonOps(self.db, self.wal)
        self.leases = Leases(self.db)
        self.reads = ReadOps(self.db)
        self.admin = AdminOps(self.db, self.reads)
        self.tokens = Tokens(self.db)
        self.plans = PlanOps(self.db)
        self.freezes = self.plans.freezes
        self.circuits = CircuitOps(self.db)
        self.registry = RegistryOps(self.db)
        self.failures = FailureOps(self.db)
        self.events = Events(self.db)
        self.alerts = AlertOps(self.db, self.producer)
        self.schedules = ScheduleOps(self.db, self.producer)

    @classmethod
    def from_settings(cls, settings: Settings, url: str | None = None) -> Store:
        s = settings.storage
        return cls(
            url or s.url,
            pool_size=s.pool_size,
            cleanup_batch_size=s.cleanup_batch_size,
            bulk_streams=s.bulk_streams,
            max_transient_retries=s.max_transient_retries,
            transient_retry_base_delay=s.transient_retry_base_delay,
            max_payload_bytes=settings.serialization.max_payload_bytes,
            command_timeout=s.command_timeout,
            lock_timeout=s.lock_timeout,
            connect_timeout=s.connect_timeout,
            wal_limit_bytes=s.wal_limit_mb * 2**20,
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
        self.wal.close()
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    run = forward("db", Database.run)
    transaction = forward("db", Database.transaction)
    snapshot = forward("db", Database.snapshot)
    run_batches = forward("db", Database.run_batches)
    thread_retries = forward("db", Database.thread_retries)
    format_time = forward("db", Database.format_time)
    now = forward("db", Database.now)
    connection = forward("db", Database.connection)

    @staticmethod
    def unbounded() -> AbstractContextManager[None]:
        return Database.unbounded()

    def dlq_filter_params(self, flt: DlqFilter | None) -> dict[str, Any]:
        return filters.dlq_filter_params(flt)

    # ------------------------------------------------------------------ producer (Producer)

    enqueue = forward("producer", producer.Producer.enqueue)
    next_due = forward("producer", producer.Producer.next_due)
    enqueue_on = forward("producer", producer.Producer.enqueue_on)
    enqueue_in = forward("producer", producer.Producer.enqueue_in)
    enqueue_audited = forward("producer", producer.Producer.enqueue_audited)

    # ------------------------------------------------------------------ worker (WorkerOps)

    fetch = forward("worker", WorkerOps.fetch)
    claims_uncertain = forward("worker", WorkerOps.claims_uncertain)
    recover_claims = forward("worker", WorkerOps.recover_claims)
    mark_processing = forward("worker", WorkerOps.mark_processing)
    heartbeat = forward("worker", WorkerOps.heartbeat)
    beat = forward("worker", WorkerOps.beat)
    release = forward("worker", WorkerOps.release)
    release_unstarted = forward("worker", WorkerOps.release_unstarted)
    archive_succeeded = forward("worker", WorkerOps.archive_succeeded)
    move_to_dlq = forward("worker", WorkerOps.move_to_dlq)
    reschedule = forward("worker", WorkerOps.reschedule)

    # ------------------------------------------------------------------ rescue (Rescue)

    recover_abandoned = forward("rescue", Rescue.recover_abandoned)
    recover_orphaned = forward("rescue", Rescue.recover_orphaned)
    archive_zombies = forward("rescue", Rescue.archive_zombies)

    # ------------------------------------------------------------------ leases (Leases)

    try_lease = forward("leases", Leases.try_lease)
    release_lease = forward("leases", Leases.release_lease)

    # ------------------------------------------------------------------ reads (ReadOps)

    get_job = forward("reads", ReadOps.get_job)
    list_hot = forward("reads", ReadOps.list_hot)
    list_archive = forward("reads", ReadOps.list_archive)
    list_dlq = forward("reads", ReadOps.list_dlq)
    count_dlq = forward("reads", ReadOps.count_dlq)
    dlq_ids = forward("reads", ReadOps.dlq_ids)
    preview_dlq = forward("reads", ReadOps.preview_dlq)
    top_errors = forward("reads", ReadOps.top_errors)
    dlq_summary = forward("reads", ReadOps.dlq_summary)
    stats = forward("reads", ReadOps.stats)
    queue_stats = forward("reads", ReadOps.queue_stats)
    list_workers = forward("reads", ReadOps.list_workers)
    list_audit = forward("reads", ReadOps.list_audit)

    # ------------------------------------------------------------------ operator mutations (AdminOps)

    edit_pending = forward("admin", AdminOps.edit_pending)
    edit_dlq = forward("admin", AdminOps.edit_dlq)
    resurrect = forward("admin", AdminOps.resurrect)
    moved_unseen = forward("admin", AdminOps.moved_unseen)
    resurrect_window = forward("admin", AdminOps.resurrect_window)
    resurrect_many = forward("admin", AdminOps.resurrect_many)
    cancel_many = forward("admin", AdminOps.cancel_many)
    purge_dlq = forward("admin", AdminOps.purge_dlq)
    purge_archive = forward("admin", AdminOps.purge_archive)
    set_queue = forward("admin", AdminOps.set_queue)
    update_queue = forward("admin", AdminOps.update_queue)
    audit = forward("admin", AdminOps.audit)

    # ------------------------------------------------------------------ tokens (Tokens)

    create_token = forward("tokens", Tokens.create_token)
    verify_token = forward("tokens", Tokens.verify_token)
    list_tokens = forward("tokens", Tokens.list_tokens)
    revoke_token = forward("tokens", Tokens.revoke_token)

    # ------------------------------------------------------------------ bulk plans (PlanOps)

    create_plan = forward("plans", PlanOps.create_plan)
    get_plan = forward("plans", PlanOps.get_plan)
    list_plans = forward("plans", PlanOps.list_plans)
    plan_items = forward("plans", PlanOps.plan_items)
    plan_outcomes = forward("plans", PlanOps.plan_outcomes)
    execute_plan_chunk = forward("plans", PlanOps.execute_plan_chunk)
    approve_plan = forward("plans", PlanOps.approve_plan)
    plan_by_label = forward("plans", PlanOps.plan_by_label)
    note_plan = forward("plans", PlanOps.note_plan)
    discard_plan = forward("plans", PlanOps.discard_plan)
    open_plan = forward("plans", PlanOps.open_plan)
    lease_plan = forward("plans", PlanOps.lease_plan)
    release_plan = forward("plans", PlanOps.release_plan)
    pace_plan = forward("plans", PlanOps.pace_plan)
    list_orphans = forward("freezes", PlanFreezes.list_orphans)
    reclaim_orphans = forward("freezes", PlanFreezes.reclaim_orphans)

    # ------------------------------------------------------------------ circuits (CircuitOps)

    circuit_failures = forward("circuits", CircuitOps.circuit_failures)
    circuit_successes = forward("circuits", CircuitOps.circuit_successes)
    circuit_probe = forward("circuits", CircuitOps.circuit_probe)
    circuit_states = forward("circuits", CircuitOps.circuit_states)
    list_circuits = forward("circuits", CircuitOps.list_circuits)
    get_circuit = forward("circuits", CircuitOps.get_circuit)
    set_circuit = forward("circuits", CircuitOps.set_circuit)
    defer = forward("circuits", CircuitOps.defer)

    # ------------------------------------------------------------------ worker registry (RegistryOps)

    worker_register = forward("registry", RegistryOps.worker_register)
    worker_unregister = forward("registry", RegistryOps.worker_unregister)
    list_registry = forward("registry", RegistryOps.list_registry)
    set_worker_concurrency = forward("registry", RegistryOps.set_worker_concurrency)
    gone_workers = forward("registry", RegistryOps.gone_workers)
    prune_workers = forward("registry", RegistryOps.prune_workers)

    # ------------------------------------------------------------------ failure history (FailureOps)

    failure_history = forward("failures", FailureOps.failure_history)
    locate = forward("failures", FailureOps.locate)
    register_job_types = forward("failures", FailureOps.register_job_types)
    idempotent_types = forward("failures", FailureOps.idempotent_types)
    job_types = forward("failures", FailureOps.job_types)

    # ------------------------------------------------------------------ events and retention (Events)

    add_event = forward("events", Events.add_event)
    events_after = forward("events", Events.events_after)
    last_event_id = forward("events", Events.last_event_id)
    prune = forward("events", Events.prune)
    fold_counters = forward("events", Events.fold_counters)

    # ------------------------------------------------------------------ the snapshot horizon (HorizonOps)

    horizon = forward("horizons", HorizonOps.horizon)
    session = forward("horizons", HorizonOps.session)
    end_session = forward("horizons", HorizonOps.end_session)

    # ------------------------------------------------------------------ alerts (AlertOps)

    alert_receivers = forward("alerts", AlertOps.alert_receivers)
    create_alert_receiver = forward("alerts", AlertOps.create_alert_receiver)
    update_alert_receiver = forward("alerts", AlertOps.update_alert_receiver)
    delete_alert_receiver = forward("alerts", AlertOps.delete_alert_receiver)
    alert_rules = forward("alerts", AlertOps.alert_rules)
    create_alert_rule = forward("alerts", AlertOps.create_alert_rule)
    update_alert_rule = forward("alerts", AlertOps.update_alert_rule)
    delete_alert_rule = forward("alerts", AlertOps.delete_alert_rule)
    send_alert_test = forward("alerts", AlertOps.send_alert_test)
    alert_states = forward("alerts", AlertOps.alert_states)
    alert_groups = forward("alerts", AlertOps.alert_groups)
    save_alert_cycle = forward("alerts", AlertOps.save_alert_cycle)
    dead_groups = forward("alerts", AlertOps.dead_groups)
    halted_plans = forward("alerts", AlertOps.halted_plans)

    # ------------------------------------------------------------------ recurring schedules (ScheduleOps)

    get_schedule = forward("schedules", ScheduleOps.get_schedule)
    list_schedules = forward("schedules", ScheduleOps.list_schedules)
    schedule_runs = forward("schedules", ScheduleOps.schedule_runs)
    due_schedules = forward("schedules", ScheduleOps.due_schedules)
    create_schedule = forward("schedules", ScheduleOps.create_schedule)
    update_schedule = forward("schedules", ScheduleOps.update_schedule)
    delete_schedule = forward("schedules", ScheduleOps.delete_schedule)
    pause_schedule = forward("schedules", ScheduleOps.pause_schedule)
    resume_schedule = forward("schedules", ScheduleOps.resume_schedule)
    trigger_schedule = forward("schedules", ScheduleOps.trigger_schedule)
    sync_schedules = forward("schedules", ScheduleOps.sync_schedules)
    fire_schedule = forward("schedules", ScheduleOps.fire_schedule)
