"""Workers: who holds claimed jobs, how many, and how recently they beat.

chokaq has no worker registry: a worker is visible through the jobs it has claimed (fetched or
processing rows carry its id and heartbeat). A worker with nothing claimed appears only when it is the
one hosted by the API process that answers (`chokaq serve`), whose concurrency is known too.
"""

from __future__ import annotations

from typing import Any

from flask.views import MethodView

from chokaq_api.extensions import Blueprint, ctx
from chokaq_api.resources.workers.schemas import WorkerSchema

URL = "/workers"
blp = Blueprint("workers", __name__, description="Workers seen through the jobs they hold.")


def hosted_worker() -> Any:
    host = ctx().host
    return getattr(host, "worker", None) if host is not None else None


@blp.route("")
class Workers(MethodView):
    @blp.response(200, WorkerSchema(many=True))
    def get(self) -> Any:
        """Workers holding fetched or processing jobs, plus the worker hosted by this process"""
        rows = [r | {"hosted": False, "concurrency": None} for r in ctx().store.list_workers()]
        own = hosted_worker()
        if own is not None:
            mine = next((r for r in rows if r["worker_id"] == own.worker_id), None)
            if mine is None:
                mine = {
                    "worker_id": own.worker_id,
                    "fetched": 0,
                    "processing": 0,
                    "queues": [],
                    "last_heartbeat_at": None,
                    "silent_seconds": 0.0,
                    "oldest_started_at": None,
                }
                rows.append(mine)
            mine.update(hosted=True, concurrency=own.concurrency)
        return rows
