"""The dead-letter queue the DLQ benches work on: N of "yesterday's zombies" among other dead jobs."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from typing import Any

from chokaq_ops.argtypes import positive_int
from chokaq_ops.bench.harness import BatchClock, BenchDb, expect
from chokaq_ops.models import Actor, BulkResult, DlqFilter, FailureReason

QUEUES = 4
TARGET = FailureReason.Zombie
OTHER = FailureReason.MaxRetriesExceeded
# What an operator types to select them; it leaves the other dead jobs alone.
TARGET_FILTER = DlqFilter(reason=TARGET)


def add_arguments(parser: argparse.ArgumentParser, *, by_default: str) -> None:
    parser.set_defaults(rows=100_000)
    parser.add_argument(
        "--noise",
        type=int,
        default=None,
        metavar="N",
        help="other dead jobs (MaxRetriesExceeded) the filter must leave alone (default rows/10)",
    )
    parser.add_argument(
        "--by",
        choices=("filter", "ids", "both", "plan"),
        default=by_default,
        help="select the jobs by the filter reason=Zombie, by their ids, or both; or `plan`: a plan of the "
        "filter (frozen, approved, then executed chunk by chunk as a notebook's plan.execute() does; its "
        f"execution timed, the freeze reported apart) (default {by_default})",
    )
    parser.add_argument(
        "--streams",
        type=positive_int,
        default=None,
        metavar="N",
        help="chunks in flight at once (default Storage.BulkStreams; SQLite runs one)",
    )


def modes(args: argparse.Namespace) -> list[str]:
    return ["filter", "ids"] if args.by == "both" else [args.by]


def noise_for(args: argparse.Namespace) -> int:
    return int(args.rows) // 10 if args.noise is None else max(0, int(args.noise))


def seed(db: BenchDb, rows: int, noise: int) -> float:
    """A fresh DLQ: `rows` Zombie jobs interleaved with `noise` others over the last week; seconds taken."""
    db.reset()
    seconds = db.timed("bench_seed_dlq", rows=rows, noise=noise, reason=int(TARGET), days=7)
    db.sql("bench_queues", queues=QUEUES, rows=rows + noise, succeeded=0, failed=rows + noise)
    return seconds + db.vacuum()


def target_ids(db: BenchDb) -> list[str]:
    return [r["id"] for r in db.sql("bench_dlq_ids", reason=int(TARGET))]


def check_left(db: BenchDb, noise: int) -> None:
    """Every target job left the DLQ and every other one stayed."""
    left = {int(r["reason"]): int(r["n"]) for r in db.sql("bench_count_dlq")}
    expect(left.get(int(TARGET), 0) == 0, f"{left.get(int(TARGET))} target jobs still in the DLQ")
    expect(left.get(int(OTHER), 0) == noise, f"{left.get(int(OTHER), 0)} of {noise} other dead jobs left")


def run_bulk(
    args: argparse.Namespace,
    bench: str,
    operate: Callable[[BenchDb, list[str] | None, DlqFilter | None, BatchClock], Any],
    *,
    batch_size: Callable[[BenchDb], int],
    check: Callable[[BenchDb, int], None] | None = None,
) -> Iterator[dict[str, Any]]:
    """The loop both DLQ bulk benches share: per run and mode, seed, time `operate` (which returns the
    store's BulkResult) and check that exactly the target jobs were moved; then one summary per mode."""
    rows, noise = int(args.rows), noise_for(args)
    with BenchDb(args, bench) as db:
        if args.streams and db.store.dialect.parallel_writers:
            db.store.db.bulk_streams = int(args.streams)
        for n in range(1, args.repeat + 1):
            for mode in modes(args):
                seed_s = seed(db, rows, noise)
                ids = target_ids(db) if mode == "ids" else None
                flt = TARGET_FILTER if mode == "filter" else None
                clock = BatchClock()
                extra: dict[str, Any] = {}
                if mode == "plan":
                    result, seconds, frozen_s = _by_plan(db, PLAN_ACTIONS[bench], clock)
                    extra["freeze_seconds"] = round(frozen_s, 3)
                else:
                    start = time.perf_counter()
                    result = operate(db, ids, flt, clock)
                    seconds = time.perf_counter() - start
                expect(result.count == rows, f"{bench} ({mode}) moved {result.count} of {rows}")
                check_left(db, noise)
                if check is not None:
                    check(db, rows)
                yield db.record(
                    rows,
                    mode=mode,
                    run=n,
                    seconds=seconds,
                    batches=result.batches,
                    batch_size=batch_size(db),
                    streams=db.store.db.bulk_streams,
                    noise=noise,
                    seed_seconds=round(seed_s, 2),
                    **extra,
                    **clock.fields(),
                )
        for mode in modes(args):
            yield db.summary(("seconds", "per_second", "batches", "batch_size"), where={"mode": mode})


# The plan action of each bulk bench (`--by plan`).
PLAN_ACTIONS = {"resurrect": "resurrect", "purge-dlq": "purge"}


def _by_plan(db: BenchDb, action: str, clock: BatchClock) -> tuple[BulkResult, float, float]:
    """A plan of the target filter, frozen and approved, then executed chunk by chunk until done:
    (result, seconds executing, seconds freezing)."""
    start = time.perf_counter()
    plan = db.store.create_plan(action, actor=Actor("bench"), flt=TARGET_FILTER)
    frozen = time.perf_counter()
    db.store.approve_plan(plan["id"], actor=Actor("bench-approver"))
    begun = time.perf_counter()
    while True:
        after, chunk = db.store.execute_plan_chunk(plan["id"], actor=Actor("bench"))
        if chunk is None:
            break
        clock(int(after["done"]))
    seconds = time.perf_counter() - begun
    return BulkResult(count=int(after["done"]), batches=int(after["chunks_done"])), seconds, frozen - start
