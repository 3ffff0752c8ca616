"""Storage: schema, named SQL and every lifecycle and DLQ operation."""

from chokaq_ops.storage.store import Store
from chokaq_ops.storage.worker_ops import Dead, Retry

__all__ = ["Dead", "Retry", "Store"]
