"""Helpers for the worker tests: fast settings, an in-process Host, waiting, reading rows and metrics."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

from chokaq_ops.engine.handlers import Registry
from chokaq_ops.engine.hosting import Host
from chokaq_ops.models import NewJob
from chokaq_ops.settings import Settings
from chokaq_ops.storage import Store
from tests.support.polling import wait_for as _wait_for

FAST = {
    "worker.polling_interval": 0.05,
    "worker.no_queues_sleep_interval": 0.05,
    "worker.shutdown_grace_period": 3,
    "execution.heartbeat_interval_min": 0.1,
    "execution.heartbeat_interval_max": 0.15,
    "retry.base_delay": 0.05,
    "retry.max_delay": 2,
    "retry.jitter_max_delay": 0.01,
}


def fast_settings(store: Store, **overrides: Any) -> Settings:
    values: dict[str, Any] = {"storage.url": store.url, **FAST}
    values.update({k.replace("__", "."): v for k, v in overrides.items()})
    return Settings().with_overrides(values)


@contextmanager
def hosted(
    store: Store, settings: Settings, registry: Registry, *, grace: float | None = None, **kw: Any
) -> Iterator[Host]:
    """A started Host running only a worker (no rescue, no retention); shut down on exit."""
    host = Host(settings, store, registry=registry, run_rescue=False, run_retention=False, **kw)
    host.start()
    try:
        yield host
    finally:
        host.shutdown(grace=grace)


wait_for = partial(_wait_for, interval=0.02)


def enqueue(store: Store, type_: str, payload: str = "{}", **kw: Any) -> str:
    return store.enqueue([NewJob(type=type_, payload=payload, **kw)])[0].id


def location(store: Store, job_id: str) -> str:
    return store.get_job(job_id)["location"]


def settled(store: Store, job_id: str, where: str = "archive", timeout: float = 10.0) -> dict[str, Any]:
    """Wait until the job is in `where` (archive or dlq) and return its row."""
    return wait_for(
        lambda: (job := store.get_job(job_id))["location"] == where and job,
        timeout,
        f"job {job_id} in {where}",
    )


def metric(host: Host, name: str, **labels: str) -> float:
    return host.metrics.registry.get_sample_value(name, labels) or 0.0


def blocking_job(registry: Registry, type_: str) -> tuple[threading.Event, threading.Event]:
    """Register a handler of `type_` that sets `running` and then waits for `release` (10 s at most)."""
    running, release = threading.Event(), threading.Event()

    @registry.job(type_)
    def _blocking(payload: Any, ctx: Any) -> None:
        running.set()
        release.wait(10)

    return running, release
