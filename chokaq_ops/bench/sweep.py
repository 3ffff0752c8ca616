"""sweep: ms of one rescue sweep (recover abandoned fetches, then zombies -> DLQ) over N hot rows.

Seeds N hot jobs once: --zombies processing rows whose heartbeat stopped an hour ago, --abandoned
fetched rows untouched for an hour, --live fetched and --live processing rows that are fine, and the
rest pending. Each run times Store.recover_abandoned + Store.archive_zombies with the configured
Recovery timeouts (600 s by default) and checks that exactly the victims moved; between runs the
victims are put back.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from typing import Any

from chokaq_ops import errors
from chokaq_ops.bench.harness import BenchDb, expect
from chokaq_ops.fingerprint import fingerprint_text

QUEUES = 8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(rows=1_000_000)
    parser.add_argument(
        "--zombies", type=int, default=1000, metavar="N", help="zombies to find (default 1000)"
    )
    parser.add_argument(
        "--abandoned", type=int, default=0, metavar="N", help="abandoned fetches to recover (default 0)"
    )
    parser.add_argument(
        "--live",
        type=int,
        default=2000,
        metavar="N",
        help="healthy fetched and processing rows each (default 2000)",
    )


def run(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    rows = int(args.rows)
    zombies, abandoned = max(0, args.zombies), max(0, args.abandoned)
    live = max(0, min(args.live, (rows - zombies - abandoned) // 2))
    if zombies + abandoned > rows:
        raise errors.ValidationError("--zombies + --abandoned exceed --rows", field="zombies")
    with BenchDb(args, "sweep") as db:
        store, recovery = db.store, db.settings.recovery
        overrides = {
            name: q.zombie_timeout_seconds
            for name, q in db.settings.queues.items()
            if q.zombie_timeout_seconds is not None
        }
        fingerprint = fingerprint_text("Zombie detected: heartbeat expired").id
        db.reset()
        seed_s = db.timed(
            "bench_seed_hot",
            rows=rows,
            queues=QUEUES,
            zombies=zombies,
            abandoned=abandoned,
            fetched=live,
            processing=live,
        )
        db.sql("bench_queues", queues=QUEUES, rows=rows // QUEUES, succeeded=0, failed=0)
        seed_s += db.vacuum()
        for n in range(1, args.repeat + 1):
            if n > 1:
                db.sql("bench_rearm_sweep", zombies=zombies, abandoned=abandoned)
                db.vacuum()
            start = time.perf_counter()
            recovered = store.recover_abandoned(recovery.fetched_job_timeout)
            mid = time.perf_counter()
            dead = store.archive_zombies(recovery.processing_zombie_timeout, overrides, fingerprint)
            end = time.perf_counter()
            expect(
                len(recovered) == abandoned, f"recovered {len(recovered)} of {abandoned} abandoned fetches"
            )
            expect(len(dead) == zombies, f"moved {len(dead)} of {zombies} zombies to the DLQ")
            yield db.record(
                rows,
                rate=False,
                run=n,
                seconds=end - start,
                ms=round((end - start) * 1000, 2),
                recover_ms=round((mid - start) * 1000, 2),
                zombies_ms=round((end - mid) * 1000, 2),
                zombies=zombies,
                abandoned=abandoned,
                live=live,
                seed_seconds=round(seed_s, 2),
            )
        yield db.summary(("ms", "recover_ms", "zombies_ms", "seconds", "zombies", "abandoned"))
