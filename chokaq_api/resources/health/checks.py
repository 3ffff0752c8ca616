"""Readiness checks: storage reachable, schema current, hosted worker alive, queue lag within bounds, and
what holds back vacuum (the snapshot horizon; a warning only)."""

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


def horizon(c: Context) -> dict[str, Any]:
    """What holds back vacuum (PostgreSQL: the oldest snapshot's session, replication slots, prepared
    transactions) or the write-ahead log (SQLite: a reader that pins it). A warning, never a failure: the
    queue keeps its speed beside a held snapshot (docs/endurance.md); the tables grow until it ends."""
    limit = c.settings.health.horizon_degraded
    try:
        report = c.store.horizon()
    except Exception as exc:
        return check(DEGRADED, f"cannot read the snapshot horizon ({type(exc).__name__})")
    data = report.to_dict() | {"degraded_after_seconds": limit}
    wal = report.wal
    if wal is not None:
        pinned, size = wal["pinned_seconds"], wal["size_bytes"] or 0
        if pinned >= limit:
            return check(
                DEGRADED,
                f"a reader has pinned the write-ahead log for {pinned:.0f}s ({size / 2**20:.0f} MB): "
                "a long read transaction on the database file",
                **data,
            )
        return check(OK, f"write-ahead log {size / 2**20:.1f} MB", **data)
    forgotten = [s["slot_name"] for s in report.slots if not s["active"]]
    if forgotten:
        return check(
            DEGRADED, f"inactive replication slot(s) {', '.join(forgotten)} hold the horizon back", **data
        )
    held = report.age_s()
    if held < limit:
        return check(OK, f"oldest snapshot {held:.0f}s", **data)
    holder = report.holder
    if holder is not None and holder.age_s >= limit:
        who = " ".join(
            part
            for part in (
                f"pid {holder.pid}",
                f"application {holder.application!r}" if holder.application else "",
                f"user {holder.user}" if holder.user else "",
                f"from {holder.client}" if holder.client else "",
                f"({holder.state})" if holder.state else "",
            )
            if part
        )
        return check(DEGRADED, f"session {who} has held a snapshot for {holder.age_s:.0f}s", **data)
    return check(DEGRADED, f"a prepared transaction has held the horizon for {held:.0f}s", **data)


def readiness(c: Context) -> dict[str, dict[str, Any]]:
    results = {"storage": storage(c)}
    if results["storage"]["status"] == UNHEALTHY:
        reason = "skipped: the database is unreachable"
        return (
            results
            | {name: check(UNHEALTHY, reason) for name in ("schema", "queue_lag")}
            | {"worker": worker(c)}
        )
    return results | {
        "schema": schema(c),
        "worker": worker(c),
        "queue_lag": queue_lag(c),
        "horizon": horizon(c),
    }
