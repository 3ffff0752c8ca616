"""The Store: every storage operation of PRODUCT §4 over one database URL."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chokaq_ops.storage.plan_ops import PlanOps
from chokaq_ops.storage.read_ops import ReadOps
from chokaq_ops.storage.worker_ops import WorkerOps

if TYPE_CHECKING:
    from chokaq_ops.settings import Settings


class Store(ReadOps, WorkerOps, PlanOps):
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
