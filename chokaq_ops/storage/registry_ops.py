"""The worker registry (docs/worker.md "Registry"): one row per live worker, refreshed on its heartbeat
with one statement; an operator's concurrency target travels back in that statement's reply."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chokaq_ops import errors
from chokaq_ops.models import Actor
from chokaq_ops.storage.audit import person
from chokaq_ops.storage.database import Database
from chokaq_ops.storage.inputs import required_text

MAX_CONCURRENCY = 1024  # as Worker.Concurrency


class RegistryOps:
    def __init__(self, db: Database) -> None:
        self.db = db

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
        """Upsert the worker's row (last seen: now, database clock); the operator's concurrency target, if
        any."""
        rows = self.db.run(
            "worker_register",
            id=worker_id,
            host=host[:255],
            pid=int(pid),
            queues=",".join(queues) if queues else None,
            concurrency=int(concurrency),
            running=int(running),
            prefetched=int(prefetched),
        )
        desired = rows[0]["desired_concurrency"] if rows else None
        return None if desired is None else int(desired)

    def worker_unregister(self, worker_id: str) -> bool:
        """Remove the worker's row; False when another session held it and it was left in place (it shows
        as gone after Health.WorkerHeartbeatTimeout and retention prunes it)."""
        return not self.db.run("worker_unregister", id=worker_id)

    def list_registry(self) -> list[dict[str, Any]]:
        return [_decode(r) for r in self.db.run("list_registry", write=False)]

    def set_worker_concurrency(self, worker_id: str, concurrency: int, *, actor: Actor) -> dict[str, Any]:
        """An operator's concurrency target for a registered worker (applied at its next heartbeat);
        audited in the same transaction."""
        actor = person(actor)
        worker_id = required_text(worker_id, "worker_id", max_len=100)
        if (
            isinstance(concurrency, bool)
            or not isinstance(concurrency, int)
            or not 1 <= concurrency <= MAX_CONCURRENCY
        ):
            raise errors.ValidationError(
                f"concurrency must be a whole number from 1 to {MAX_CONCURRENCY}", field="concurrency"
            )
        rows = self.db.run("set_worker_concurrency", id=worker_id, concurrency=concurrency, actor=actor.name)
        if not rows:
            raise errors.JobNotFound(f"no registered worker {worker_id}")
        return _decode(rows[0])

    def gone_workers(self, gone_s: float) -> set[str]:
        """Registered workers whose row was not refreshed for `gone_s` (they died)."""
        return {r["id"] for r in self.db.run("gone_workers", write=False, gone_s=float(gone_s))}

    def prune_workers(self, older_than_s: float) -> int:
        return int(self.db.run("prune_workers", older_than_s=float(older_than_s))[0]["n"])


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    row["queues"] = row["queues"].split(",") if row.get("queues") else []
    row["seen_s"] = round(max(0.0, float(row["seen_s"] or 0.0)), 3)
    return row
