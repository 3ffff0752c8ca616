"""maintenance: heartbeat latency while a maintenance job works through N rows in CleanupBatchSize batches.

`--work` picks the job: `prune` (default: one retention pass over N metric buckets and N events older
than the retention window, plus --keep recent ones of each that must stay), `freeze` (creating a purge
plan of N dead jobs) or `sweep` (a rescue sweep moving N zombies to the DLQ). Each run also seeds --jobs
processing jobs; a second Store (its own connections, as a worker process has) sends one worker's
heartbeat statement every --every ms while the job runs. Reported: the job's seconds and the heartbeat
latency p50/p95/p99/max during it, against the configured minimum heartbeat interval: on SQLite a
heartbeat waits for the writer lock, and one that waits longer than the interval is one the sweep may
miss.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from chokaq_ops.bench.harness import BenchDb, expect, percentile
from chokaq_ops.engine.rescue import Rescuer
from chokaq_ops.engine.retention import Retention
from chokaq_ops.models import Actor, DlqFilter
from chokaq_ops.storage import Store

DAYS_AGO = 8  # older than the default 7-day retention of buckets and events
WORKS = ("prune", "freeze", "sweep")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(rows=1_000_000)
    parser.add_argument("--work", choices=WORKS, default="prune", help="the maintenance job (default prune)")
    parser.add_argument(
        "--keep", type=int, default=1000, metavar="N", help="prune: recent rows of each that stay"
    )
    parser.add_argument(
        "--jobs", type=int, default=32, metavar="N", help="running jobs (1 in 16 of them send heartbeats)"
    )
    parser.add_argument(
        "--every", type=float, default=20.0, metavar="MS", help="ms between heartbeats (default 20)"
    )


class Heartbeater(threading.Thread):
    """Sends one worker's heartbeat statement in a loop and records each call's latency."""

    def __init__(self, store: Store, worker: str, ids: list[str], every_s: float) -> None:
        super().__init__(name="bench-heartbeat", daemon=True)
        self.store, self.worker, self.ids, self.every_s = store, worker, ids, every_s
        self.stop = threading.Event()
        self.samples: list[tuple[float, float]] = []  # (start, seconds)
        self.lost: set[str] = set()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                start = time.perf_counter()
                owned = self.store.heartbeat(self.worker, self.ids)
                self.samples.append((start, time.perf_counter() - start))
                self.lost |= set(self.ids) - owned
                self.stop.wait(self.every_s)
        except BaseException as exc:  # reported by the bench, which must not hang on a dead thread
            self.error = exc

    def during(self, start: float, end: float) -> list[float]:
        """Latencies (ms) of the heartbeats in flight while [start, end) lasted; for a job shorter than
        the gap between beats, the first one sent after it began."""
        ms = [s * 1000 for t, s in self.samples if t < end and t + s > start]
        return ms or [s * 1000 for t, s in self.samples if t >= start][:1]


def _seed(db: BenchDb, work: str, rows: int, keep: int, jobs: int) -> tuple[float, str, list[str]]:
    """Seeds one run; returns the seconds taken, the heartbeating worker and the ids of its jobs."""
    zombies = rows if work == "sweep" else 0
    seconds = db.timed(
        "bench_seed_hot",
        rows=zombies + jobs,
        queues=4,
        zombies=zombies,
        abandoned=0,
        fetched=0,
        processing=jobs,
    )
    if work == "prune":
        seconds += db.timed("bench_seed_telemetry", rows=rows, keep=keep, days_ago=DAYS_AGO)
    elif work == "freeze":
        seconds += db.timed("bench_seed_dlq", rows=rows, noise=0, reason=1, days=7)
    seconds += db.vacuum()
    # bench_seed_hot hands processing row g to bench-worker-(g % 16): the first live row's worker beats.
    first = zombies + 1
    live = range(first, zombies + jobs + 1)
    return seconds, f"bench-worker-{first % 16}", [f"bench-h-{g:010d}" for g in live if g % 16 == first % 16]


def _job(
    db: BenchDb, work: str, rows: int, keep: int
) -> tuple[Callable[[], Any], Callable[[Any], int | None]]:
    """The maintenance call of a run, and the check that it did the whole job (returns the batches it
    committed when the job reports them)."""
    store, settings = db.store, db.settings
    if work == "prune":

        def check_prune(result: dict[str, Any]) -> int | None:
            expect(not result["errors"], f"retention failed: {result['errors']}")
            left = db.sql("bench_count_telemetry")[0]
            expect(
                int(left["buckets"]) == keep and int(left["events"]) == keep,
                f"retention left {left['buckets']} buckets and {left['events']} events; expected {keep}",
            )
            return result.get("prune_batches")  # absent before retention pruned in batches

        return (lambda: Retention(store, settings).run(force=True)), check_prune
    if work == "freeze":

        def check_freeze(plan: dict[str, Any]) -> None:
            expect(plan["total"] == rows, f"the plan froze {plan['total']} of {rows} dead jobs")

        return (lambda: store.create_plan("purge", actor=Actor("bench"), flt=DlqFilter())), check_freeze

    def check_sweep(report: Any) -> None:
        expect(report.archived == rows, f"the sweep moved {report.archived} of {rows} zombies")

    return (lambda: Rescuer(store, settings).sweep()), check_sweep


def run(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    rows, keep, work = int(args.rows), max(0, args.keep), args.work
    jobs = max(2, args.jobs)
    with BenchDb(args, "maintenance") as db:
        settings = db.settings
        interval_s = settings.execution.heartbeat_interval_min
        for n in range(1, args.repeat + 1):
            db.reset()
            seed_s, worker, ids = _seed(db, work, rows, keep, jobs)
            expect(bool(ids), "no heartbeating jobs were seeded")
            action, check = _job(db, work, rows, keep)
            beats = Store.from_settings(settings.with_overrides({"storage.pool_size": 2}))
            hb = Heartbeater(beats, worker, ids, args.every / 1000)
            try:
                hb.start()
                time.sleep(min(1.0, 10 * args.every / 1000))  # a few undisturbed beats first
                start = time.perf_counter()
                result = action()
                end = time.perf_counter()
                time.sleep(args.every / 1000 * 2)  # the beat waiting at the end lands
            finally:
                hb.stop.set()
                hb.join(timeout=60)
                beats.close()
            expect(hb.error is None, f"the heartbeat thread failed: {hb.error}")
            expect(not hb.lost, f"heartbeats lost jobs {sorted(hb.lost)}")
            batches = check(result)
            ms = hb.during(start, end)
            moved = 2 * rows if work == "prune" else rows
            yield db.record(
                rows,
                rate=False,
                run=n,
                work=work,
                seconds=end - start,
                rows_per_second=round(moved / (end - start), 1),
                heartbeats=len(ms),
                p50_ms=round(percentile(ms, 50), 2),
                p95_ms=round(percentile(ms, 95), 2),
                p99_ms=round(percentile(ms, 99), 2),
                max_ms=round(max(ms), 2),
                heartbeat_interval_ms=round(interval_s * 1000),
                p99_under_interval=percentile(ms, 99) < interval_s * 1000,
                batch_size=db.store.cleanup_batch_size,
                batches=batches,
                seed_seconds=round(seed_s, 2),
            )
        keys = ("seconds", "rows_per_second", "p50_ms", "p95_ms", "p99_ms", "max_ms", "heartbeats")
        yield db.summary(keys)
