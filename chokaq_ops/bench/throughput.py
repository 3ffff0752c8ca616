"""throughput: jobs/s of one worker process draining N no-op jobs, at each --concurrency (default 1,8,32).

Each run empties the database, enqueues N no-op jobs in bulk (Store.enqueue, chunks of 1000; timed
apart), settles the tables (VACUUM ANALYZE on PostgreSQL, a WAL checkpoint on SQLite), then starts a
Host with only a worker in this process and times from start until the worker has archived all N. The
worker runs with the configured Worker.* settings; every job goes through the full pipeline: claimed and
started (claim-and-start for free slots; a job that waited in the prefetch buffer is marked processing
on its own), its JSON payload parsed, the handler called, archived with its duration.
The run then checks that every job is in the archive and none is left in hot.

Besides jobs/s each run reports the CPU a job cost (chokaq_ops/bench/cpu.py): `worker_cpu_us_per_job`
(this process, every thread) and `db_cpu_us_per_job` (the PostgreSQL backends serving it, when the server
runs on this host). On a shared machine these move far less than jobs/s. The worker's figure is also
split by thread: `fetch_cpu_us_per_job` (the claims), `exec_cpu_us_per_job` (the execution threads) and
`completer_cpu_us_per_job` (writing outcomes); the rest is the bench's own loop and the worker's minor
threads.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import time
from collections.abc import Iterator
from typing import Any

from chokaq_ops.bench import cpu
from chokaq_ops.bench.harness import BenchDb, concurrency_levels, expect
from chokaq_ops.engine.handlers import Registry
from chokaq_ops.engine.hosting import Host
from chokaq_ops.models import NewJob
from chokaq_ops.storage import Store

QUEUE = "bench.throughput"
TYPE = "bench.noop"
CHUNK = 1000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(rows=20_000)
    parser.add_argument(
        "--concurrency",
        default="1,8,32",
        metavar="C1,C2",
        help="worker concurrencies to measure, comma-separated (default 1,8,32)",
    )
    parser.add_argument(
        "--archive",
        type=int,
        default=0,
        metavar="N",
        help="archived jobs already in the table before each drain (default 0; data-growth curves)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="give up a run after S seconds (default 600)",
    )


def run(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    rows = int(args.rows)
    levels = concurrency_levels(args.concurrency)
    registry = Registry()
    registry.job(TYPE)(_noop)
    with BenchDb(args, "throughput") as db:
        settings = db.settings
        if db.dialect == "postgresql":
            # The worker's listener imports psycopg on its first start (0.1 s of CPU): a cost of the
            # process, not of the jobs, so it is paid before the first measured run.
            with contextlib.suppress(ImportError):
                importlib.import_module("psycopg")
        for concurrency in levels:
            for n in range(1, args.repeat + 1):
                enqueue_s = _seed(db, rows, args.archive)
                # The worker gets a store of its own, sized as a worker's would be (the bench's has 4).
                store = Store.from_settings(settings)
                try:
                    seconds, counts, used = _drain(db, store, registry, concurrency, rows, args.timeout)
                finally:
                    store.close()
                left = {int(r["status"]): int(r["n"]) for r in db.sql("bench_count_hot")}
                expect(not left, f"jobs left in hot after the drain: {left}")
                expect(counts["succeeded"] == rows, f"archived {counts['succeeded']} of {rows}")
                archived = int(db.sql("table_counts")[0]["archive"])
                expect(
                    archived == rows + args.archive, f"{archived} archived jobs, not {rows} + {args.archive}"
                )
                yield db.record(
                    rows,
                    concurrency=concurrency,
                    run=n,
                    seconds=seconds,
                    enqueue_seconds=round(enqueue_s, 3),
                    enqueue_per_second=round(rows / enqueue_s, 1) if enqueue_s else None,
                    prefetch=settings.worker.prefetch,
                    fetch_batch_size=settings.worker.fetch_batch_size,
                    conflicts=counts.get("conflicts", 0),
                    archive_rows=args.archive,
                    archive_after=archived,
                    **used,
                )
        for concurrency in levels:
            yield db.summary(
                ("seconds", "per_second", "enqueue_per_second", "worker_cpu_us_per_job", "db_cpu_us_per_job"),
                where={"concurrency": concurrency},
            )


def _noop(payload: Any, ctx: Any) -> None:
    return None


def _seed(db: BenchDb, rows: int, archived: int = 0) -> float:
    """Seconds to enqueue `rows` jobs, into a database holding `archived` archived jobs (seeded in SQL,
    finished a day ago and more, untimed) and nothing else."""
    db.reset()
    if archived > 0:
        db.sql("bench_seed_archive", rows=archived, days_ago=1)
    start = time.perf_counter()
    for offset in range(0, rows, CHUNK):
        db.store.enqueue(NewJob(type=TYPE, queue=QUEUE) for _ in range(min(CHUNK, rows - offset)))
    seconds = time.perf_counter() - start
    db.vacuum()
    return seconds


def _drain(
    db: BenchDb, store: Store, registry: Registry, concurrency: int, rows: int, timeout: float
) -> tuple[float, dict[str, int], dict[str, Any]]:
    """Seconds until the worker archived `rows` jobs, its counts, and the CPU per job (worker, database)."""
    host = Host(
        db.settings,
        store,
        registry=registry,
        run_rescue=False,
        run_retention=False,
        run_schedules=False,
        concurrency=concurrency,
    )
    worker = host.worker
    assert worker is not None
    meter = cpu.Meter(db)
    start = time.perf_counter()
    host.start()
    try:
        while worker.counts["succeeded"] + worker.counts["dead"] < rows:
            if time.perf_counter() - start > timeout:
                raise TimeoutError(f"drained {worker.counts['succeeded']} of {rows} jobs in {timeout:g}s")
            # Each look takes the interpreter lock from the worker's threads (and counts in the worker's
            # CPU): 5 ms apart, a run of a second or more is timed to within 0.5%.
            time.sleep(0.005)
        seconds = time.perf_counter() - start
        # Read before shutdown: the worker's connections (and their backends) are still open.
        used = meter.per_job(rows, "worker_cpu_us_per_job", worker_id=worker.worker_id)
    finally:
        host.shutdown()
    return seconds, dict(worker.counts), used
