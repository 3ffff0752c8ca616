"""Jobs in every place, made through the real Store operations: dead (with tracebacks), archived, hot;
and the counts and audit rows the CLI, client and analysis tests check afterwards."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from chokaq_ops.models import FailureReason, NewJob
from chokaq_ops.storage import Dead, Store

_workers = itertools.count()
ENQUEUE_BATCH = 1000  # jobs per enqueue call, as a producer would batch them


def traceback_text(exc_type: str, message: str, frame: str = "app/orders.py", func: str = "charge") -> str:
    return (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.11/site-packages/chokaq_ops/engine/worker.py", line 210, in run\n'
        "    result = handler(payload, ctx)\n"
        f'  File "/srv/{frame}", line 42, in {func}\n'
        "    gateway.charge(order)\n"
        f"{exc_type}: {message}\n"
    )


def seed_dlq(
    store: Store,
    n: int,
    *,
    queue: str = "billing",
    type: str = "billing.charge.v1",
    reason: FailureReason = FailureReason.MaxRetriesExceeded,
    error: Callable[[int], str] | None = None,
    fingerprint: Callable[[int], str | None] | None = None,
    payload: Callable[[int], str] | None = None,
) -> list[str]:
    """Enqueue `n` jobs, run them through fetch -> processing -> DLQ as a worker would; returns the ids."""
    worker = f"test-worker-{next(_workers)}"
    ids: list[str] = []
    for start in range(0, n, ENQUEUE_BATCH):
        jobs = [
            NewJob(type=type, queue=queue, payload=payload(i) if payload else f'{{"order": {i}}}')
            for i in range(start, min(n, start + ENQUEUE_BATCH))
        ]
        ids += [r.id for r in store.enqueue(jobs)]
    fetched = store.fetch(worker, n, [queue])
    assert len(fetched) == n, "seed_dlq needs a queue of its own"
    store.mark_processing(worker, ids)
    index = {job_id: i for i, job_id in enumerate(ids)}
    dead = [
        Dead(
            id=job_id,
            reason=reason,
            error=error(index[job_id])
            if error
            else traceback_text("TimeoutError", f"order {index[job_id]} timed out"),
            fingerprint=fingerprint(index[job_id]) if fingerprint else None,
            duration_ms=1500.0,
        )
        for job_id in ids
    ]
    assert len(store.move_to_dlq(worker, dead)) == n
    return ids


def seed_archive(store: Store, n: int, *, queue: str = "mail", type: str = "mail.send.v1") -> list[str]:
    worker = f"test-worker-{next(_workers)}"
    ids = [r.id for r in store.enqueue([NewJob(type=type, queue=queue) for _ in range(n)])]
    store.fetch(worker, n, [queue])
    store.mark_processing(worker, ids)
    assert len(store.archive_succeeded(worker, [(i, 12.5) for i in ids])) == n
    return ids


def seed_hot(store: Store, n: int, *, queue: str = "reports", type: str = "report.render.v1") -> list[str]:
    return [r.id for r in store.enqueue([NewJob(type=type, queue=queue, tags="nightly") for _ in range(n)])]


def table_counts(store: Store) -> dict[str, int]:
    return {k: int(v) for k, v in store.run("table_counts", write=False)[0].items()}


def plan_audit_ids(store: Store, plan_id: str, action: str) -> Sequence[str]:
    rows = []
    page = 1
    while True:
        got = store.list_audit(plan_id=plan_id, action=action, page=page, page_size=1000)
        rows += got.items
        if len(got.items) < 1000:
            return [r["job_id"] for r in rows]
        page += 1
