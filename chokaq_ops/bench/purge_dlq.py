"""purge-dlq: rows/s of Store.purge_dlq over N dead jobs, by filter and by ids, in CleanupBatchSize batches.

Each run seeds N Zombie jobs among rows/10 other dead jobs (--noise), then purges the Zombies with
the filter reason=Zombie (or their ids, read beforehand) and checks that only they went.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from typing import Any

from chokaq_ops.bench import dlq_seed
from chokaq_ops.bench.harness import BatchClock, BenchDb, expect
from chokaq_ops.models import Actor


def add_arguments(parser: argparse.ArgumentParser) -> None:
    dlq_seed.add_arguments(parser, by_default="both")


def run(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    rows, noise = int(args.rows), dlq_seed.noise_for(args)
    with BenchDb(args, "purge-dlq") as db:
        store = db.store
        for n in range(1, args.repeat + 1):
            for mode in dlq_seed.modes(args):
                seed_s = dlq_seed.seed(db, rows, noise)
                ids = dlq_seed.target_ids(db) if mode == "ids" else None
                flt = dlq_seed.TARGET_FILTER if mode == "filter" else None
                clock = BatchClock()
                start = time.perf_counter()
                result = store.purge_dlq(actor=Actor("bench"), ids=ids, flt=flt, progress=clock)
                seconds = time.perf_counter() - start
                expect(result.count == rows, f"purge_dlq ({mode}) deleted {result.count} of {rows}")
                dlq_seed.check_left(db, noise)
                yield db.record(
                    rows,
                    mode=mode,
                    run=n,
                    seconds=seconds,
                    batches=result.batches,
                    batch_size=store.cleanup_batch_size,
                    noise=noise,
                    seed_seconds=round(seed_s, 2),
                    **clock.fields(),
                )
        for mode in dlq_seed.modes(args):
            yield db.summary(("seconds", "per_second", "batches", "batch_size"), where={"mode": mode})
