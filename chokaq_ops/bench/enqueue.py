"""enqueue: jobs/s of single-job enqueues from 1 and 16 producer threads, of batches of 1000, and of a
plain INSERT+COMMIT of one job row (the baseline), measured in the same run.

- `single` (1 producer) and `single16` (16 threads, one Store shared as an application would): each
  call is `Store.enqueue([one job])`, one statement in its own transaction (idempotency, id conflicts,
  queue and counter bookkeeping included), --rows jobs in all;
- `batch`: `Store.enqueue` of --batch (1000) jobs per call, --rows rounded up to whole batches;
- `plain` (1 producer) and `plain16`: the same job row inserted by `INSERT INTO jobs_hot ... VALUES`
  on the same driver and pool, autocommit: what one round trip and one commit cost here.
The ratio `single / plain` is the enqueue's overhead over a bare INSERT. Each run also reports the CPU a
job cost (chokaq_ops/bench/cpu.py): `producer_cpu_us_per_job` (this process, every thread) and
`db_cpu_us_per_job` (the PostgreSQL backends serving it, when the server runs on this host).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

from chokaq_ops import errors, ids
from chokaq_ops.bench import cpu
from chokaq_ops.bench.harness import BenchDb, expect, spread
from chokaq_ops.models import NewJob

QUEUE = "bench.enqueue"
TYPE = "bench.enqueue.noop"
BATCH = 1000
KINDS = ("plain", "single", "plain16", "single16", "batch")


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
    if not kinds or any(k not in KINDS for k in kinds):
        raise errors.UsageError(f"--kinds takes some of {','.join(KINDS)} (got {args.kinds!r})")
    with BenchDb(args, "enqueue") as db:
        # 16 producers need 16 connections (the bench's own store has 4).
        db.store.close()
        from chokaq_ops.storage import Store, queries

        db.store = Store.from_settings(db.settings.with_overrides({"storage.pool_size": 20}))
        db.store.queries = db.store.queries | queries.load(db.dialect, "bench")
        for n in range(1, args.repeat + 1):
            for kind in kinds:
                db.reset()
                threads = 16 if kind.endswith("16") else 1
                batch = max(1, int(args.batch))
                total = -(-rows // batch) * batch if kind == "batch" else rows
                meter = cpu.Meter(db)
                seconds = _timed(db, kind, total, threads, batch)
                used = meter.per_job(total, "producer_cpu_us_per_job")
                count = sum(int(r["n"]) for r in db.sql("bench_count_hot"))
                expect(count == total, f"{kind}: {count} of {total} jobs in hot")
                yield db.record(total, kind=kind, producers=threads, run=n, seconds=seconds, **used)
        for kind in kinds:
            yield db.summary(
                ("seconds", "per_second", "producer_cpu_us_per_job", "db_cpu_us_per_job"),
                where={"kind": kind},
            )


def _timed(db: BenchDb, kind: str, total: int, threads: int, batch: int) -> float:
    store = db.store
    if kind == "batch":

        def one(i: int) -> None:
            store.enqueue(NewJob(type=TYPE, queue=QUEUE, payload='{"n":1}') for _ in range(batch))

        calls = total // batch
    elif kind.startswith("plain"):

        def one(i: int) -> None:
            store.run("bench_plain_insert", id=ids.new_id(), queue=QUEUE, type=TYPE, payload='{"n":1}')

        calls = total
    else:

        def one(i: int) -> None:
            store.enqueue([NewJob(type=TYPE, queue=QUEUE, payload='{"n":1}')])

        calls = total
    return spread(one, calls, threads)
