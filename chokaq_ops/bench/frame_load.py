"""load: seconds and memory to load N dead jobs into a pandas DataFrame with `client.load_dlq()`.

Seeds N DLQ rows with bench SQL (a quarter MaxRetriesExceeded, the rest Zombie, spread over a week, with
payloads and tracebacks), settles the table, then loads them in a fresh Python process per measurement,
twice per run: every column (`heavy`), and without payload and error_details (`light`). Each record has
the DataFrame's memory_usage(deep=True) and the loading process's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

from chokaq_ops.bench.harness import BenchDb, BenchFailed, expect

_CHILD = textwrap.dedent(
    """
    import json, os, resource, sys, time
    import chokaq_ops
    client = chokaq_ops.connect(os.environ["CHOKAQ_DB"])
    heavy = sys.argv[1] == "heavy"
    start = time.perf_counter()
    frame = client.load_dlq(heavy=heavy, progress=False)
    seconds = time.perf_counter() - start
    print(json.dumps({
        "seconds": seconds,
        "loaded": len(frame),
        "columns": len(frame.columns),
        "frame_mb": round(frame.memory_usage(deep=True).sum() / 1e6, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }))
    """
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(rows=1_000_000)
    parser.add_argument(
        "--columns",
        choices=("both", "heavy", "light"),
        default="both",
        help="measure every column, only the light ones (no payload/error_details), or both (default)",
    )


def _load(url: str, variant: str) -> dict[str, Any]:
    env = {**os.environ, "CHOKAQ_DB": url}  # the URL may hold a password: not on the command line
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, variant], capture_output=True, text=True, env=env, timeout=3600
    )
    if done.returncode != 0:
        raise BenchFailed(f"loading process failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    rows = int(args.rows)
    variants = ("heavy", "light") if args.columns == "both" else (args.columns,)
    with BenchDb(args, "load") as db:
        noise = rows // 4
        db.reset()
        seed_s = db.timed("bench_seed_dlq", rows=rows - noise, noise=noise, reason=2, days=7)
        seed_s += db.vacuum()
        counted = sum(int(r["n"]) for r in db.sql("bench_count_dlq"))
        expect(counted == rows, f"seeded {counted} dead jobs, wanted {rows}")
        for n in range(1, args.repeat + 1):
            for variant in variants:
                got = _load(db.store.url, variant)
                expect(got["loaded"] == rows, f"load_dlq returned {got['loaded']} of {rows} rows")
                yield db.record(
                    rows,
                    run=n,
                    columns=variant,
                    seconds=got["seconds"],
                    frame_columns=got["columns"],
                    frame_mb=got["frame_mb"],
                    peak_rss_mb=got["peak_rss_mb"],
                    seed_seconds=round(seed_s, 2),
                )
        for variant in variants:
            yield db.summary(("seconds", "per_second", "frame_mb", "peak_rss_mb"), where={"columns": variant})
