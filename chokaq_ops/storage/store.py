"""The Store: every storage operation (docs/storage-contract.md) over one database URL."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from chokaq_ops import errors, validation
from chokaq_ops.models import Actor, EnqueueResult, NewJob
from chokaq_ops.storage.admin_ops import _person, audit_in
from chokaq_ops.storage.circuit_ops import CircuitOps
from chokaq_ops.storage.failure_ops import FailureOps
from chokaq_ops.storage.plan_ops import PlanOps
from chokaq_ops.storage.read_ops import ReadOps
from chokaq_ops.storage.registry_ops import RegistryOps
from chokaq_ops.storage.worker_ops import WorkerOps

if TYPE_CHECKING:
    from chokaq_ops.settings import Settings


class Store(ReadOps, WorkerOps, PlanOps, CircuitOps, RegistryOps, FailureOps):
    """Producer, worker, rescue, operator, read and bulk-plan operations; safe to share between threads."""

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

    def enqueue_audited(self, job: NewJob, *, actor: Actor, max_queues: int | None = None) -> EnqueueResult:
        """Enqueue one job on an operator's behalf (the API): `created_by` is the actor, and a new job's
        audit row commits in the same transaction. With `max_queues`, a job for a queue that does not exist
        yet is refused (422) once that many queues exist; existing queues keep working."""
        actor = _person(actor)
        item = self._enqueue_item(0, replace(job, created_by=actor.name))

        def enqueue(tx: Any) -> EnqueueResult:
            if max_queues is not None:
                self._admit_queue(tx, item["queue"], max_queues)
            explicit = {item["id"]} if job.id is not None else set()
            result = self._results(tx.run, [item], self._enqueue_in(tx, [item], explicit))[0]
            if result.created:
                audit_in(tx, actor, "enqueue", job_id=result.id)
            return result

        return self.transaction(enqueue)

    def _admit_queue(self, tx: Any, name: str, max_queues: int) -> None:
        row = tx.run("queue_admission", name=name)[0]
        if not int(row["known"]) and int(row["n"]) >= max_queues:
            raise errors.ValidationError(
                f"queue {name!r} does not exist and {int(row['n']):,} queues do (Api.MaxQueues is "
                f"{max_queues:,}): use an existing queue, or ask an admin to raise the limit",
                field="queue",
            )

    def update_queue(self, name: str, *, actor: Actor, **changes: Any) -> dict[str, Any]:
        """PATCH /queues/{name}: change an existing queue (QueueNotFound for an unknown name, so a typo or a
        script cannot create queues). The check and the change share one transaction."""
        min_zombie = changes.pop("min_zombie_timeout", 0.0)
        name = validation.queue(name, "name")

        def update(tx: Any) -> dict[str, Any]:
            if not int(tx.run("queue_admission", name=name)[0]["known"]):
                raise QueueNotFound(f"no queue named {name!r}", field="name")
            return self.set_queue(name, actor=actor, min_zombie_timeout=min_zombie, tx=tx, **changes)

        return self.transaction(update)


class QueueNotFound(errors.JobNotFound):
    """No such queue."""
