"""purge-archive: rows/s of Store.purge_archive over N archived jobs in CleanupBatchSize transactions.

Each run seeds N archive rows (finished more than a day ago, in finishing order), settles the table
(VACUUM ANALYZE on PostgreSQL, ANALYZE on SQLite), then times one purge of everything older than a
day, batch by batch as retention does it.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from chokaq_ops.bench.harness import BatchClock, BenchDb, expect
from chokaq_ops.models import Actor

QUEUES = 4


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(rows=1_000_000)


def run(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    rows = int(args.rows)
    with BenchDb(args, "purge-archive") as db:
        store = db.store
        for n in range(1, args.repeat + 1):
            db.reset()
            seed_s = db.timed("bench_seed_archive", rows=rows, days_ago=1)
            db.sql("bench_queues", queues=QUEUES, rows=rows, succeeded=rows, failed=0)
            vacuum_s = db.vacuum()
            cutoff = store.now() - timedelta(days=1)
            clock = BatchClock()
            start = time.perf_counter()
            result = store.purge_archive(cutoff, actor=Actor("bench"), progress=clock)
            seconds = time.perf_counter() - start
            expect(result.count == rows, f"purge_archive deleted {result.count} of {rows} rows")
            left = store.run("table_counts", write=False)[0]["archive"]
            expect(int(left) == 0, f"{left} archive rows left after the purge")
            yield db.record(
                rows,
                run=n,
                seconds=seconds,
                batches=result.batches,
                batch_size=store.cleanup_batch_size,
                seed_seconds=round(seed_s + vacuum_s, 2),
                **clock.fields(),
            )
        yield db.summary(("seconds", "per_second", "batches", "batch_size"))
