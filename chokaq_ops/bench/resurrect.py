"""resurrect: rows/s of Store.resurrect_many over N dead jobs, in transactions of 1000 (the seeds' rule).

Each run seeds N Zombie jobs among rows/10 other dead jobs (--noise), resurrects the Zombies by the
filter reason=Zombie (or by their ids, --by ids) and checks that exactly they are pending again.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from typing import Any

from chokaq_ops.bench import dlq_seed
from chokaq_ops.bench.harness import BatchClock, BenchDb, expect
from chokaq_ops.models import Actor
from chokaq_ops.storage.admin_ops import RESURRECT_CHUNK


def add_arguments(parser: argparse.ArgumentParser) -> None:
    dlq_seed.add_arguments(parser, by_default="filter")


def run(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    rows, noise = int(args.rows), dlq_seed.noise_for(args)
    with BenchDb(args, "resurrect") as db:
        store = db.store
        for n in range(1, args.repeat + 1):
            for mode in dlq_seed.modes(args):
                seed_s = dlq_seed.seed(db, rows, noise)
                ids = dlq_seed.target_ids(db) if mode == "ids" else None
                flt = dlq_seed.TARGET_FILTER if mode == "filter" else None
                clock = BatchClock()
                start = time.perf_counter()
                result = store.resurrect_many(actor=Actor("bench"), ids=ids, flt=flt, progress=clock)
                seconds = time.perf_counter() - start
                expect(result.count == rows, f"resurrect_many ({mode}) moved {result.count} of {rows}")
                dlq_seed.check_left(db, noise)
                hot = {int(r["status"]): int(r["n"]) for r in db.sql("bench_count_hot")}
                expect(hot == {0: rows}, f"hot after resurrect: {hot}, expected {rows} pending")
                yield db.record(
                    rows,
                    mode=mode,
                    run=n,
                    seconds=seconds,
                    batches=result.batches,
                    batch_size=RESURRECT_CHUNK,
                    noise=noise,
                    seed_seconds=round(seed_s, 2),
                    **clock.fields(),
                )
        for mode in dlq_seed.modes(args):
            yield db.summary(("seconds", "per_second", "batches", "batch_size"), where={"mode": mode})
