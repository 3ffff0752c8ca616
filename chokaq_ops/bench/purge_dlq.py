"""purge-dlq: rows/s of Store.purge_dlq over N dead jobs, by filter and by ids, in CleanupBatchSize batches.

Each run seeds N Zombie jobs among rows/10 other dead jobs (--noise), then purges the Zombies with
the filter reason=Zombie (or their ids, read beforehand) and checks that only they went.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

from chokaq_ops.bench import dlq_seed
from chokaq_ops.models import Actor


def add_arguments(parser: argparse.ArgumentParser) -> None:
    dlq_seed.add_arguments(parser, by_default="both")


def run(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    return dlq_seed.run_bulk(
        args,
        "purge-dlq",
        lambda db, ids, flt, clock: db.store.purge_dlq(
            actor=Actor("bench"), ids=ids, flt=flt, progress=clock
        ),
        batch_size=lambda db: db.store.cleanup_batch_size,
    )
