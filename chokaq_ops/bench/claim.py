"""claim: latency of Store.fetch (a worker claiming a batch) from N pending jobs; p50/p95 ms per run.

Seeds N pending jobs once over --queues queues with mixed priorities (one in twenty scheduled an hour
ahead). Each run makes --claims fetches of --batch jobs as one worker, each timed alone; claimed jobs
stay claimed, so every fetch digs into the backlog as a real worker does. `--queue-filter` makes the
worker ask for one named queue, as `--queues` does for a worker; `--max-workers N` caps every queue,
so claims take the capped path (slots counted per queue).

Besides the latencies each run reports the CPU a claim cost (chokaq_ops/bench/cpu.py): this process's
(`client_cpu_us_per_claim`: building the statement, the driver, reading the reply, the worker's
bookkeeping) and the PostgreSQL backends' (`db_cpu_us_per_claim`, when the server is on this host).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from typing import Any

from chokaq_ops.bench import cpu
from chokaq_ops.bench.harness import BenchDb, expect, percentile
from chokaq_ops.models import Actor

SUMMARISED = (
    "p50_ms", "p95_ms", "max_ms", "per_second",
    "client_cpu_us_per_claim", "db_cpu_us_per_claim", "batch", "claims",
)  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(rows=1_000_000)
    parser.add_argument("--batch", type=int, default=20, metavar="N", help="jobs per claim (default 20)")
    parser.add_argument("--claims", type=int, default=200, metavar="N", help="claims per run (default 200)")
    parser.add_argument(
        "--queues", type=int, default=8, metavar="N", help="queues to spread jobs over (default 8)"
    )
    parser.add_argument(
        "--queue-filter", action="store_true", help="claim from one named queue instead of any queue"
    )
    parser.add_argument(
        "--max-workers", type=int, default=None, metavar="N", help="set max_workers on every queue"
    )


def run(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    rows, batch = int(args.rows), max(1, args.batch)
    # Claimed jobs stay claimed: keep every run inside the due backlog (19 of 20 jobs are due).
    claims = max(1, min(args.claims, int(rows * 0.9) // (batch * args.repeat)))
    queues = max(1, args.queues)
    wanted = ["bench.q1"] if args.queue_filter else None
    with BenchDb(args, "claim") as db:
        store = db.store
        db.reset()
        seed_s = db.timed(
            "bench_seed_hot", rows=rows, queues=queues, zombies=0, abandoned=0, fetched=0, processing=0
        )
        db.sql("bench_queues", queues=queues, rows=rows // queues, succeeded=0, failed=0)
        if args.max_workers:
            for q in range(queues):
                store.set_queue(f"bench.q{q}", actor=Actor("bench"), max_workers=args.max_workers)
        seed_s += db.vacuum()
        # One claim before the measured ones: the connection, its session settings, the prepared claim's
        # first plan and the driver's import are paid once per process, not per claim.
        store.fetch("bench-warmup", batch, wanted)
        for n in range(1, args.repeat + 1):
            times: list[float] = []
            claimed = 0
            meter = cpu.Meter(db)
            for _ in range(claims):
                start = time.perf_counter()
                got = store.fetch("bench-worker", batch, wanted)
                times.append(time.perf_counter() - start)
                claimed += len(got)
            used = meter.per_job(claims, "client_cpu_us_per_claim")
            expect(claimed == claims * batch, f"claimed {claimed} jobs in {claims} fetches of {batch}")
            ms = [t * 1000 for t in times]
            yield db.record(
                rows,
                rate=False,
                run=n,
                batch=batch,
                claims=claims,
                queue_filter=bool(wanted),
                max_workers=args.max_workers,
                p50_ms=round(percentile(ms, 50), 3),
                p95_ms=round(percentile(ms, 95), 3),
                max_ms=round(max(ms), 3),
                seconds=sum(times),
                per_second=round(claimed / sum(times), 1),
                client_cpu_us_per_claim=used["client_cpu_us_per_claim"],
                db_cpu_us_per_claim=used["db_cpu_us_per_job"],
                seed_seconds=round(seed_s, 2),
            )
        yield db.summary(SUMMARISED)
