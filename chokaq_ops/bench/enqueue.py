"""enqueue: jobs/s of single-job enqueues from 1 and 16 producer threads, of batches of 1000, and of a
plain INSERT+COMMIT of one job row (the baseline), measured in the same run.

- `single` (1 producer) and `single16` (16 threads, one Store shared as an application would): each
  call is `Store.enqueue([one job])`, one statement in its own transaction (idempotency, id conflicts,
  queue and counter bookkeeping included), --rows jobs in all;
- `batch`: `Store.enqueue` of --batch (1000) jobs per call, --rows rounded up to whole batches;
- `plain` (1 producer) and `plain16`: the same job row (the same columns and values) inserted by a bare
  `INSERT INTO jobs_hot ... VALUES` on the same driver and pool, autocommit, prepared on the producer's
  kind of connection as the single-job enqueue is: what one round trip and one commit cost here;
- `plain_many`: the rows of `batch` as one bare multi-row INSERT per --batch jobs (the rows as one JSON
  parameter, null columns left out as enqueue_many leaves them out), autocommit: the baseline of `batch`;
- `api` (1 client) and `api16` (16): the same job as `POST /jobs` to a `chokaq serve` process (API only,
  16 request threads, an operator token), each client on a keep-alive session of its own; each call
  gets its 201 (with the job) before the next. Not in the default set: they start a server.
The ratios `single / plain` and `batch / plain_many` are the enqueue's overhead over a bare INSERT.
Each run also reports the CPU a job cost (chokaq_ops/bench/cpu.py): `producer_cpu_us_per_job` (this
process, every thread) and `db_cpu_us_per_job` (the PostgreSQL backends serving it, when the server
runs on this host).
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
import threading
from collections.abc import Callable, Iterator
from typing import Any

from chokaq_ops import errors, ids
from chokaq_ops.bench import cpu
from chokaq_ops.bench.api import Served
from chokaq_ops.bench.harness import BenchDb, expect, spread
from chokaq_ops.models import Actor, NewJob
from chokaq_ops.storage import dialects

QUEUE = "bench.enqueue"
TYPE = "bench.enqueue.noop"
BATCH = 1000
KINDS = ("plain", "single", "plain16", "single16", "plain_many", "batch")
API_KINDS = ("api", "api16")
BATCHED = ("batch", "plain_many")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(rows=3000)
    parser.add_argument(
        "--batch", type=int, default=BATCH, metavar="N", help=f"jobs per batch (default {BATCH})"
    )
    parser.add_argument(
        "--kinds", default=",".join(KINDS), metavar="K1,K2", help=f"default {','.join(KINDS)}"
    )


def run(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    rows = int(args.rows)
    kinds = [k.strip() for k in str(args.kinds).split(",") if k.strip()]
    if not kinds or any(k not in KINDS + API_KINDS for k in kinds):
        raise errors.UsageError(f"--kinds takes some of {','.join(KINDS + API_KINDS)} (got {args.kinds!r})")
    with BenchDb(args, "enqueue") as db, contextlib.ExitStack() as stack:
        # 16 producers need 16 connections (the bench's own store has 4).
        db.store.close()
        from chokaq_ops.storage import Store, queries

        db.store = Store.from_settings(db.settings.with_overrides({"storage.pool_size": 20}))
        db.store.queries = db.store.queries | queries.load(db.dialect, "bench")
        db.store.db.prepare(dialects.PRODUCER, ("bench_plain_insert", "bench_plain_insert_many"))
        post = _poster(db, stack) if any(k in API_KINDS for k in kinds) else None
        for n in range(1, args.repeat + 1):
            for kind in kinds:
                db.reset()
                threads = 16 if kind.endswith("16") else 1
                batch = max(1, int(args.batch))
                total = -(-rows // batch) * batch if kind in BATCHED else rows
                meter = cpu.Meter(db)
                seconds = _timed(db, kind, total, threads, batch, post)
                used = meter.per_job(total, "producer_cpu_us_per_job")
                if kind in API_KINDS:  # this process is only the HTTP clients; the producer is the server
                    used["producer_cpu_us_per_job"] = None
                count = sum(int(r["n"]) for r in db.sql("bench_count_hot"))
                expect(count == total, f"{kind}: {count} of {total} jobs in hot")
                yield db.record(total, kind=kind, producers=threads, run=n, seconds=seconds, **used)
        for kind in kinds:
            yield db.summary(
                ("seconds", "per_second", "producer_cpu_us_per_job", "db_cpu_us_per_job"),
                where={"kind": kind},
            )


def _poster(db: BenchDb, stack: contextlib.ExitStack) -> Callable[[], None]:
    """POST /jobs of the bench's job to a served API: one keep-alive session per calling thread."""
    name = f"bench-enqueue-{secrets.token_hex(4)}"  # token names stay taken after a revoke
    token = db.store.create_token(name, "operator", actor=Actor("bench"))
    stack.callback(db.store.revoke_token, name, actor=Actor("bench"))
    api = stack.enter_context(Served(db.store.url, threads=16))
    local = threading.local()
    body = {"type": TYPE, "queue": QUEUE, "payload": {"n": 1}}

    def post() -> None:
        session = getattr(local, "session", None)
        if session is None:
            session = local.session = api.session(token)
        r = session.post(f"{api.base}/jobs", json=body, timeout=60)
        expect(r.status_code == 201, f"POST /jobs answered {r.status_code}: {r.text[:300]}")

    return post


def _timed(
    db: BenchDb, kind: str, total: int, threads: int, batch: int, post: Callable[[], None] | None
) -> float:
    store = db.store
    if kind in API_KINDS:
        assert post is not None

        def one(i: int) -> None:
            post()

        calls = total
    elif kind == "batch":

        def one(i: int) -> None:
            store.enqueue(NewJob(type=TYPE, queue=QUEUE, payload='{"n":1}') for _ in range(batch))

        calls = total // batch
    elif kind == "plain_many":

        def one(i: int) -> None:
            rows = [_row(i, nulls=False) for i in ids.new_ids(batch)]  # ids as enqueue_many makes them
            store.run("bench_plain_insert_many", items=rows)

        calls = total // batch
    elif kind.startswith("plain"):

        def one(i: int) -> None:
            store.run("bench_plain_insert", **_row(ids.new_id()))

        calls = total
    else:

        def one(i: int) -> None:
            store.enqueue([NewJob(type=TYPE, queue=QUEUE, payload='{"n":1}')])

        calls = total
    return spread(one, calls, threads)


def _row(job_id: str, nulls: bool = True) -> dict[str, Any]:
    """The bare baselines' job row: what `Store.enqueue` of the bench's job inserts. Without `nulls`, the
    null columns are left out, as enqueue_many's JSON leaves them out (a missing key reads as null)."""
    row = {"id": job_id, "queue": QUEUE, "type": TYPE, "payload": '{"n":1}', "priority": 10}
    return row | {"tags": None, "created_by": None, "trace_context": None} if nulls else row
