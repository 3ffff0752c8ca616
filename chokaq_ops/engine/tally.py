"""A worker's metric children, resolved once per label set, and its ownership-conflict counts."""

from __future__ import annotations

from typing import Any

from chokaq_ops.engine.metrics import Metrics
from chokaq_ops.engine.worker_state import WorkerState


class Tally:
    def __init__(self, metrics: Metrics, state: WorkerState) -> None:
        self.metrics = metrics
        self.state = state
        self._children: dict[tuple[Any, ...], Any] = {}

    def child(self, metric: Any, *labels: str) -> Any:
        """`metric.labels(...)`, cached: (queue, type, ...) labels pass the metrics' label budgets."""
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            if len(labels) >= 2:
                lbl = self.metrics.labels(labels[0], labels[1])
                values = [lbl["queue"], lbl["type"], *labels[2:]]
            else:
                values = list(labels)
            child = metric.labels(*values)
            self._children[key] = child
        return child

    def conflict(self, transition: str, n: int) -> None:
        """`n` writes of `transition` found the jobs no longer this worker's."""
        self.child(self.metrics.conflicts, transition).inc(n)
        with self.state.lock:
            self.state.counts["conflicts"] += n
