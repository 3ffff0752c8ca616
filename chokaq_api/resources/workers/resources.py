"""Workers: the registry (one row per worker, refreshed on its heartbeat) joined with what the hot table
shows each worker holding; an admin changes a worker's concurrency at run time (docs/worker.md
"Registry")."""

from __future__ import annotations

from typing import Any

from flask.views import MethodView

from chokaq_api.auth import actor
from chokaq_api.extensions import Blueprint, ctx, store
from chokaq_api.resources.workers.schemas import WorkerPatchSchema, WorkerSchema

URL = "/workers"
blp = Blueprint("workers", __name__, description="Workers: registry, claimed jobs, live concurrency.")

_HOT_EMPTY = {
    "fetched": 0,
    "processing": 0,
    "queues": [],
    "last_heartbeat_at": None,
    "silent_seconds": None,
    "oldest_started_at": None,
}
_REG_EMPTY: dict[str, Any] = {
    "registered": False,
    "host": None,
    "pid": None,
    "serves": [],
    "concurrency": None,
    "desired_concurrency": None,
    "running": None,
    "prefetched": None,
    "started_at": None,
    "last_seen_at": None,
    "seen_seconds": None,
    "alive": None,
}


def hosted_worker() -> Any:
    host = ctx().host
    return getattr(host, "worker", None) if host is not None else None


def _registered(r: dict[str, Any], timeout: float) -> dict[str, Any]:
    return {
        "registered": True,
        "host": r["host"],
        "pid": r["pid"],
        "serves": r["queues"],
        "concurrency": r["concurrency"],
        "desired_concurrency": r["desired_concurrency"],
        "running": r["running"],
        "prefetched": r["prefetched"],
        "started_at": r["started_at"],
        "last_seen_at": r["last_seen_at"],
        "seen_seconds": r["seen_s"],
        "alive": r["seen_s"] <= timeout,
    }


def workers() -> list[dict[str, Any]]:
    settings = ctx().settings
    timeout = settings.health.worker_heartbeat_timeout
    listed = store().list_workers(
        recent_s=3 * settings.execution.heartbeat_interval_max + timeout,
        fetched_s=settings.recovery.fetched_job_timeout,
        gone_s=timeout,
    )
    hot = {r["worker_id"]: r for r in listed}
    reg = {r["worker_id"]: r for r in store().list_registry()}
    own = hosted_worker()
    out = []
    for wid in sorted(set(hot) | set(reg)):
        row = {
            "worker_id": wid,
            **_HOT_EMPTY,
            **{k: v for k, v in hot.get(wid, {}).items() if k != "worker_id"},
        }
        row.update(_registered(reg[wid], timeout) if wid in reg else _REG_EMPTY)
        row["hosted"] = own is not None and own.worker_id == wid
        out.append(row)
    if own is not None and own.worker_id not in hot and own.worker_id not in reg:
        out.append({"worker_id": own.worker_id, **_HOT_EMPTY, **_REG_EMPTY, "hosted": True})
    if own is not None:
        mine = next(r for r in out if r["worker_id"] == own.worker_id)
        mine["concurrency"] = own.concurrency
    return out


@blp.route("")
class Workers(MethodView):
    @blp.response(200, WorkerSchema(many=True))
    def get(self) -> Any:
        """Registered workers and every worker holding fetched or processing jobs"""
        return workers()


@blp.route("/<worker_id>")
class WorkerById(MethodView):
    @blp.arguments(WorkerPatchSchema)
    @blp.response(200, WorkerSchema)
    @blp.alt_response(404, response="NOT_FOUND", description="No registered worker with this id.")
    def patch(self, body: dict[str, Any], worker_id: str) -> Any:
        """Change a running worker's concurrency (admin; audited). It takes effect at the worker's next
        heartbeat, without a restart; lowering never cancels running jobs"""
        store().set_worker_concurrency(worker_id, body["concurrency"], actor=actor())
        return next(r for r in workers() if r["worker_id"] == worker_id)
