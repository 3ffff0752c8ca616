"""resurrect: rows/s of Store.resurrect_many over N dead jobs, in transactions of 1000 (docs/api.md).

Each run seeds N Zombie jobs among rows/10 other dead jobs (--noise), resurrects the Zombies by the
filter reason=Zombie (or by their ids, --by ids) and checks that exactly they are pending again.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

from chokaq_ops.bench import dlq_seed
from chokaq_ops.bench.harness import BenchDb, expect
from chokaq_ops.models import Actor
from chokaq_ops.storage.admin_ops import RESURRECT_CHUNK


def add_arguments(parser: argparse.ArgumentParser) -> None:
    dlq_seed.add_arguments(parser, by_default="filter")


def _all_pending(db: BenchDb, rows: int) -> None:
    hot = {int(r["status"]): int(r["n"]) for r in db.sql("bench_count_hot")}
    expect(hot == {0: rows}, f"hot after resurrect: {hot}, expected {rows} pending")


def run(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    return dlq_seed.run_bulk(
        args,
        "resurrect",
        lambda db, ids, flt, clock: db.store.resurrect_many(
            actor=Actor("bench"), ids=ids, flt=flt, progress=clock
        ),
        batch_size=lambda db: RESURRECT_CHUNK,
        check=_all_pending,
    )
