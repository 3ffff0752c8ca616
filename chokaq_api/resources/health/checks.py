"""Readiness checks: storage reachable, schema current, hosted worker alive, queue lag within bounds."""

from __future__ import annotations

import logging
from typing import Any

from chokaq_api.extensions import Context
from chokaq_ops import errors
from chokaq_ops.storage.migrate import require_current

log = logging.getLogger("chokaq.api.health")

OK, DEGRADED, UNHEALTHY, SKIPPED = "ok", "degraded", "unhealthy", "skipped"


def check(status: str, detail: str, **data: Any) -> dict[str, Any]:
    return {"status": status, "detail": detail, "data": data}


def storage(c: Context) -> dict[str, Any]:
    try:
        now = c.store.now()
    except Exception as exc:
        log.warning("readiness: storage unreachable: %s", exc)
        return check(UNHEALTHY, f"cannot reach the database ({type(exc).__name__})")
    return check(OK, "database reachable", dialect=c.store.dialect.name, db_time=now.isoformat())


def schema(c: Context) -> dict[str, Any]:
    try:
        require_current(c.store)
    except errors.SchemaOutdated as exc:
        return check(UNHEALTHY, str(exc))
    except Exception as exc:
        return check(UNHEALTHY, f"cannot read the schema version ({type(exc).__name__})")
    return check(OK, "schema current")


def worker(c: Context) -> dict[str, Any]:
    """The hosted worker's loop must have turned within Health.WorkerHeartbeatTimeout (a stuck or dead
    worker thread keeps the process alive but processes nothing)."""
    if c.host is None or getattr(c.host, "worker", None) is None:
        return check(SKIPPED, "no worker runs in this process")
    timeout = c.settings.health.worker_heartbeat_timeout
    try:
        state = c.host.health()
    except Exception as exc:
        return check(UNHEALTHY, f"cannot read the worker's state ({type(exc).__name__}: {exc})")
    age = state.get("worker_heartbeat_age_seconds")
    data = {
        "worker_id": (state.get("worker") or {}).get("worker_id"),
        "loop_age_seconds": age,
        "timeout_seconds": timeout,
        "running_jobs": state.get("running_jobs"),
        "prefetched_jobs": state.get("prefetched_jobs"),
        "scheduler_running": state.get("scheduler_running"),
    }
    if not state.get("worker_running") or not state.get("scheduler_running"):
        return check(UNHEALTHY, "the hosted worker or its scheduler is not running", **data)
    if age is None or age > timeout:
        shown = "never" if age is None else f"{age:.1f}s ago"
        return check(
            UNHEALTHY,
            f"the worker loop last ran {shown} (Health.WorkerHeartbeatTimeout {timeout:g}s)",
            **data,
        )
    return check(OK, f"the worker loop ran {age:.1f}s ago", **data)


def queue_lag(c: Context) -> dict[str, Any]:
    h = c.settings.health
    try:
        gone = h.worker_heartbeat_timeout
        queues = [q for q in c.store.queue_stats(worker_gone_s=gone) if q["active"] and not q["paused"]]
    except Exception as exc:
        return check(UNHEALTHY, f"cannot read queue lag ({type(exc).__name__})")
    worst = max(queues, key=lambda q: q["max_lag_seconds"], default=None)
    lag = worst["max_lag_seconds"] if worst else 0.0
    data = {
        "worst_queue": worst["name"] if worst else None,
        "max_lag_seconds": round(lag, 3),
        "stranded": worst["stranded"] if worst else 0,  # fetched by a dead worker, counted as waiting
        "degraded_after_seconds": h.queue_lag_degraded,
        "unhealthy_after_seconds": h.queue_lag_unhealthy,
    }
    where = f" in queue {worst['name']!r}" if worst else ""
    if lag >= h.queue_lag_unhealthy:
        return check(UNHEALTHY, f"the oldest due job{where} has waited {lag:.1f}s", **data)
    if lag >= h.queue_lag_degraded:
        return check(DEGRADED, f"the oldest due job{where} has waited {lag:.1f}s", **data)
    return check(OK, f"worst lag {lag:.1f}s{where}", **data)


def readiness(c: Context) -> dict[str, dict[str, Any]]:
    results = {"storage": storage(c)}
    if results["storage"]["status"] == UNHEALTHY:
        reason = "skipped: the database is unreachable"
        return (
            results
            | {name: check(UNHEALTHY, reason) for name in ("schema", "queue_lag")}
            | {"worker": worker(c)}
        )
    return results | {"schema": schema(c), "worker": worker(c), "queue_lag": queue_lag(c)}
