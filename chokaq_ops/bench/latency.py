"""latency: enqueue -> handler start, p50/p95/p99 ms on the database clock, idle and under load.

A worker runs in a process of its own (`python -m chokaq_ops.bench.latency URL CONCURRENCY`, no-op
handler, the configured Worker.* settings: polling stays at Worker.PollingInterval, so what the figures
show is the wake-up path, see docs/worker.md "Instant pickup"). This process is the producer:
- `idle`: --rows jobs, one at a time, each enqueued onto an empty queue (a pause of --gap ms between
  them, longer than a pickup takes);
- `load`: --rows jobs enqueued at --rate jobs/s by 4 producer threads, single-job enqueues.
Each job's `started_at - created_at` is read from the archive afterwards: both stamps are the
database's clock, so the figure includes the enqueue's commit, the wake-up and the claim, and no
client clock.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

from chokaq_ops.bench.harness import BenchDb, expect, percentile, spread
from chokaq_ops.models import NewJob

QUEUE = "bench.latency"
TYPE = "bench.latency.noop"
PRODUCERS = 4


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(rows=300)
    parser.add_argument("--mode", choices=("idle", "load", "both"), default="both", help="default both")
    parser.add_argument("--gap", type=float, default=30.0, metavar="MS", help="idle: pause between jobs")
    parser.add_argument("--rate", type=float, default=500.0, metavar="N", help="load: jobs/s enqueued")
    parser.add_argument("--concurrency", type=int, default=8, metavar="C", help="worker threads")


def run(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    rows = int(args.rows)
    modes = ("idle", "load") if args.mode == "both" else (args.mode,)
    with BenchDb(args, "latency") as db:
        worker = _start_worker(db.settings.storage.url, args.concurrency)
        try:
            for mode in modes:
                for n in range(1, args.repeat + 1):
                    db.reset()
                    start = time.perf_counter()
                    if mode == "idle":
                        _idle(db, rows, args.gap / 1000.0)
                    else:
                        _load(db, rows, args.rate)
                    ms = _settled(db, rows)
                    yield db.record(
                        rows,
                        rate=False,
                        mode=mode,
                        run=n,
                        seconds=time.perf_counter() - start,
                        p50_ms=round(percentile(ms, 50), 2),
                        p95_ms=round(percentile(ms, 95), 2),
                        p99_ms=round(percentile(ms, 99), 2),
                        max_ms=round(max(ms), 2),
                        concurrency=args.concurrency,
                        polling_interval=db.settings.worker.polling_interval,
                        **({"offered_per_second": args.rate} if mode == "load" else {"gap_ms": args.gap}),
                    )
        finally:
            if worker.stdin is not None:  # always a pipe here (_start_worker)
                worker.stdin.close()
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
        for mode in modes:
            yield db.summary(("p50_ms", "p95_ms", "p99_ms", "max_ms"), where={"mode": mode})


def _start_worker(url: str, concurrency: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "chokaq_ops.bench.latency", url, str(concurrency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline() if proc.stdout else ""
    expect(line.strip() == "ready", f"the bench worker did not start (said {line!r})")
    return proc


def _idle(db: BenchDb, rows: int, gap: float) -> None:
    for _ in range(rows):
        db.store.enqueue([NewJob(type=TYPE, queue=QUEUE)])
        time.sleep(gap)


def _load(db: BenchDb, rows: int, rate: float) -> None:
    began = time.perf_counter()

    def one(i: int) -> None:
        pause = began + i / rate - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        db.store.enqueue([NewJob(type=TYPE, queue=QUEUE)])

    spread(one, rows, PRODUCERS)


def _settled(db: BenchDb, rows: int, timeout: float = 120.0) -> list[float]:
    end = time.monotonic() + timeout
    while True:
        ms = [float(r["ms"]) for r in db.sql("bench_pickup_ms", queue=QUEUE)]
        if len(ms) >= rows:
            return ms
        expect(time.monotonic() < end, f"only {len(ms)} of {rows} jobs ran within {timeout:g}s")
        time.sleep(0.05)


def _serve(url: str, concurrency: int) -> None:
    """The bench's worker process: runs until its stdin closes."""
    from chokaq_ops.engine.handlers import Registry
    from chokaq_ops.engine.hosting import Host
    from chokaq_ops.settings import load_settings
    from chokaq_ops.storage import Store

    settings = load_settings(overrides={"storage.url": url})
    registry = Registry()
    registry.job(TYPE)(_noop)
    store = Store.from_settings(settings)
    host = Host(
        settings,
        store,
        registry=registry,
        run_rescue=False,
        run_retention=False,
        run_schedules=False,
        concurrency=concurrency,
    )
    host.start()
    try:
        watcher = host.worker.watcher if host.worker else None
        if watcher is not None:
            watcher.listening.wait(10)
        print("ready", flush=True)
        sys.stdin.read()
    finally:
        host.shutdown()
        store.close()


def _noop(payload: Any, ctx: Any) -> None:
    return None


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]))
