"""prune: heartbeat latency while retention prunes N metric buckets and N events.

Each run seeds N metric buckets and N events older than the retention window (plus --keep recent ones
of each that must stay) and --jobs processing jobs of one worker. A second Store (its own connections,
as a worker process has) then sends that worker's heartbeat statement every --every ms while one
retention pass (`Retention.run`, the scheduled entry point) prunes. Reported: the prune's seconds and
the heartbeat latency p50/p95/p99/max during it, against the configured minimum heartbeat interval: a
heartbeat that waits longer than that is a heartbeat the sweep may miss.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Iterator
from typing import Any

from chokaq_ops.bench.harness import BenchDb, expect, percentile
from chokaq_ops.engine.retention import Retention
from chokaq_ops.storage import Store

WORKER = "bench-worker-1"  # bench_seed_hot hands processing row g to bench-worker-(g % 16)
DAYS_AGO = 8  # older than the default 7-day retention of buckets and events


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(rows=1_000_000)
    parser.add_argument("--keep", type=int, default=1000, metavar="N", help="recent rows of each that stay")
    parser.add_argument(
        "--jobs", type=int, default=32, metavar="N", help="running jobs (2 per 32 are heartbeated)"
    )
    parser.add_argument(
        "--every", type=float, default=20.0, metavar="MS", help="ms between heartbeats (default 20)"
    )


class Heartbeater(threading.Thread):
    """Sends one worker's heartbeat statement in a loop and records each call's latency."""

    def __init__(self, store: Store, ids: list[str], every_s: float) -> None:
        super().__init__(name="bench-heartbeat", daemon=True)
        self.store, self.ids, self.every_s = store, ids, every_s
        self.stop = threading.Event()
        self.samples: list[tuple[float, float]] = []  # (start, seconds)
        self.lost: set[str] = set()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                start = time.perf_counter()
                owned = self.store.heartbeat(WORKER, self.ids)
                self.samples.append((start, time.perf_counter() - start))
                self.lost |= set(self.ids) - owned
                self.stop.wait(self.every_s)
        except BaseException as exc:  # reported by the bench, which must not hang on a dead thread
            self.error = exc

    def during(self, start: float, end: float) -> list[float]:
        """Latencies (ms) of the heartbeats in flight while [start, end) lasted; for a prune shorter than
        the gap between beats, the first one sent after it began."""
        ms = [s * 1000 for t, s in self.samples if t < end and t + s > start]
        return ms or [s * 1000 for t, s in self.samples if t >= start][:1]


def run(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    rows, keep = int(args.rows), max(0, args.keep)
    jobs = max(2, args.jobs)
    with BenchDb(args, "prune") as db:
        settings = db.settings
        interval_s = settings.execution.heartbeat_interval_min
        for n in range(1, args.repeat + 1):
            db.reset()
            seed_s = db.timed(
                "bench_seed_hot", rows=jobs, queues=4, zombies=0, abandoned=0, fetched=0, processing=jobs
            )
            seed_s += db.timed("bench_seed_telemetry", rows=rows, keep=keep, days_ago=DAYS_AGO)
            seed_s += db.vacuum()
            ids = [f"bench-h-{g:010d}" for g in range(1, jobs + 1) if g % 16 == 1]
            beats = Store.from_settings(settings.with_overrides({"storage.pool_size": 2}))
            hb = Heartbeater(beats, ids, args.every / 1000)
            try:
                hb.start()
                time.sleep(min(1.0, 10 * args.every / 1000))  # a few undisturbed beats first
                start = time.perf_counter()
                result = Retention(db.store, settings).run(force=True)
                end = time.perf_counter()
                time.sleep(args.every / 1000 * 2)  # the beat waiting at the end lands
            finally:
                hb.stop.set()
                hb.join(timeout=60)
                beats.close()
            expect(hb.error is None, f"the heartbeat thread failed: {hb.error}")
            expect(not result["errors"], f"retention failed: {result['errors']}")
            expect(not hb.lost, f"heartbeats lost jobs {sorted(hb.lost)}")
            left = db.sql("bench_count_telemetry")[0]
            expect(
                int(left["buckets"]) == keep and int(left["events"]) == keep,
                f"retention left {left['buckets']} buckets and {left['events']} events; expected {keep} each",
            )
            ms = hb.during(start, end)
            expect(bool(ms), "no heartbeat was sent while retention pruned")
            yield db.record(
                rows,
                rate=False,
                run=n,
                seconds=end - start,
                pruned_per_second=round(2 * rows / (end - start), 1),
                heartbeats=len(ms),
                p50_ms=round(percentile(ms, 50), 2),
                p95_ms=round(percentile(ms, 95), 2),
                p99_ms=round(percentile(ms, 99), 2),
                max_ms=round(max(ms), 2),
                heartbeat_interval_ms=round(interval_s * 1000),
                p99_under_interval=percentile(ms, 99) < interval_s * 1000,
                batch_size=db.store.cleanup_batch_size,
                batches=result["prune_batches"],
                seed_seconds=round(seed_s, 2),
            )
        keys = ("seconds", "pruned_per_second", "p50_ms", "p95_ms", "p99_ms", "max_ms", "heartbeats")
        yield db.summary(keys)
