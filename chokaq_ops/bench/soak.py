"""soak: a steady load for many minutes while other sessions hold snapshots; one JSON line per interval.

What a queue meets beside its users: an analyst's notebook left in an open transaction, a nightly dump, a BI
report on the archive. A producer process offers --rate jobs/s (enqueue_many of --batch) to one `chokaq
serve` (or `chokaq worker`, --server) at --concurrency running a no-op handler. Optionally:
- --hold-snapshot AFTER_S: AFTER_S seconds in, another session opens a repeatable-read transaction, reads
  the archive and keeps it open for --hold-for seconds (default: to the end of the run);
- --analytics N: from --analytics-after seconds on, N long queries on the archive (--analytics-seconds
  each, default 120), staggered so that N overlap at every moment.
Every --interval seconds (default 15) one JSON line: offered and archived jobs/s, backlog (jobs enqueued and
not yet finished), claim p50/p99 (the worker's chokaq_claim_seconds histogram), enqueue p99, lock-wait
p99 (sessions seen waiting for a lock, sampled every 250 ms), jobs_hot's dead versions and size, the oldest
snapshot's age (PostgreSQL), the WAL's size (SQLite). Then one summary line per phase (before, while and
after the snapshot is held) and a PNG (--plot). docs/benchmarks.md has runs and how to read them.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from chokaq_ops import errors
from chokaq_ops.bench import soak_plot
from chokaq_ops.bench.harness import BenchDb, machine
from chokaq_ops.bench.soak_load import QUEUE, Analytics, Holder, Producer, Server, every
from chokaq_ops.bench.soak_probe import (
    ClaimHistogram,
    LockWaits,
    horizon_age,
    p99,
    table_health,
    wal_bytes,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(rows=1)  # unused: the load is --rate for --minutes
    parser.add_argument(
        "--rate", type=float, default=2000.0, metavar="N", help="jobs/s offered (default 2000)"
    )
    parser.add_argument(
        "--minutes", type=float, default=20.0, metavar="M", help="length of the run (default 20)"
    )
    parser.add_argument(
        "--hold-snapshot", type=float, default=None, metavar="AFTER_S", help="hold a snapshot from AFTER_S on"
    )
    parser.add_argument(
        "--hold-for",
        type=float,
        default=None,
        metavar="S",
        help="release the snapshot after S (default: never)",
    )
    parser.add_argument(
        "--analytics", type=int, default=0, metavar="N", help="overlapping long archive queries"
    )
    parser.add_argument(
        "--analytics-seconds", type=float, default=120.0, metavar="S", help="each (default 120)"
    )
    parser.add_argument("--analytics-after", type=float, default=60.0, metavar="S", help="start (default 60)")
    parser.add_argument(
        "--interval", type=float, default=15.0, metavar="S", help="report every S (default 15)"
    )
    parser.add_argument("--concurrency", type=int, default=8, metavar="C", help="worker threads (default 8)")
    parser.add_argument("--batch", type=int, default=100, metavar="B", help="jobs per enqueue (default 100)")
    parser.add_argument("--server", choices=("serve", "worker"), default="serve", help="process to run jobs")
    parser.add_argument("--plot", type=Path, default=None, metavar="PNG", help="write the plot here")


def _check(args: argparse.Namespace) -> None:
    if args.rate <= 0 or args.minutes <= 0 or args.interval <= 0 or args.batch < 1 or args.concurrency < 1:
        raise errors.UsageError("--rate, --minutes, --interval, --batch and --concurrency must be positive")
    if args.analytics < 0 or args.analytics_seconds <= 0:
        raise errors.UsageError("--analytics must be 0 or more and --analytics-seconds positive")
    if args.hold_snapshot is not None and args.hold_snapshot < 0:
        raise errors.UsageError("--hold-snapshot wants seconds from the start (0 or more)")


class Timeline:
    """When the snapshot and the analytics are held, in seconds from the start."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.end = args.minutes * 60.0
        self.hold_from = args.hold_snapshot
        self.hold_to = (
            None
            if args.hold_snapshot is None
            else min(self.end, args.hold_snapshot + (args.hold_for or self.end))
        )
        self.analytics_from = args.analytics_after if args.analytics else None

    def phase(self, t: float) -> str:
        if self.hold_from is None or t <= self.hold_from:
            return "before" if self.hold_from is not None else "steady"
        if self.hold_to is not None and t > self.hold_to:
            return "after"
        return "held"

    def windows(self) -> list[tuple[float, float, str]]:
        out = []
        if self.hold_from is not None and self.hold_to is not None:
            out.append((self.hold_from, self.hold_to, "snapshot held"))
        if self.analytics_from is not None:
            out.append((self.analytics_from, self.end, "analytics queries"))
        return out


def run(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    _check(args)
    timeline = Timeline(args)
    with BenchDb(args, "soak") as db:
        db.reset()
        url = db.settings.storage.url
        server = Server(url, args.server, args.concurrency, getattr(args, "config", None))
        producer = Producer(url, args.rate, args.batch)
        holder = Holder(db.store)
        analytics = Analytics(db.store, args.analytics, args.analytics_seconds) if args.analytics else None
        waits = LockWaits(db.store)
        stop = threading.Event()
        intervals: list[dict[str, Any]] = []
        try:
            claims = ClaimHistogram(server.metrics_url())
            _wait_for_server(server, claims)
            every(0.25, stop, waits.sample)
            producer.start()
            started = time.monotonic()
            held = analytics_started = False
            last_t, last_enqueued, last_archived = 0.0, 0, 0
            n = 0
            while True:
                n += 1
                due = started + min(n * args.interval, timeline.end)
                while (now := time.monotonic()) < due:
                    t = now - started
                    if not held and timeline.hold_from is not None and t >= timeline.hold_from:
                        holder.start()
                        held = True
                    if held and timeline.hold_to is not None and t >= timeline.hold_to:
                        holder.stop()
                    if analytics and not analytics_started and t >= (timeline.analytics_from or 0):
                        analytics.start()
                        analytics_started = True
                    time.sleep(min(0.1, max(0.0, due - time.monotonic())))
                if server.proc.poll() is not None:
                    raise errors.ChokaqError(f"the {args.server} process ended:\n{server.tail()}")
                t = time.monotonic() - started
                enqueue_ms = producer.drain()
                outcomes = db.sql("bench_soak_outcomes", queue=QUEUE)[0]
                archived, dead = int(outcomes["archived"]), int(outcomes["dead"])
                span = t - last_t
                rec: dict[str, Any] = {
                    "t_s": round(t, 1),
                    "phase": timeline.phase(t),
                    "offered_per_s": round((producer.enqueued - last_enqueued) / span, 1),
                    "archived_per_s": round((archived - last_archived) / span, 1),
                    "backlog": producer.enqueued - archived - dead,
                    "dead_lettered": dead,
                    **claims.interval(),
                    "enqueue_p99_ms": p99(enqueue_ms),
                    "lock_wait_p99_ms": p99(waits.take()),
                    **table_health(db.store),
                    "oldest_snapshot_s": horizon_age(db.store),
                    "wal_bytes": wal_bytes(db.store),
                    "analytics_running": analytics.running if analytics else 0,
                }
                intervals.append(rec)
                yield db.record(producer.enqueued, rate=False, **rec)
                last_t, last_enqueued, last_archived = t, producer.enqueued, archived
                if t >= timeline.end - 0.01:
                    break
        finally:
            # The server first: whatever else fails to stop, no process outlives the bench.
            server.stop()
            stop.set()
            producer.stop()
            if analytics:
                analytics.stop()
            holder.stop()
        problems = [
            *producer.errors,
            *(analytics.errors if analytics else []),
            *([holder.error] if holder.error else []),
        ]
        yield from _summaries(db, intervals, timeline, args, problems)
        if intervals:
            path = args.plot or Path(f"soak-{db.dialect}.png")
            title = (
                f"chokaq soak, {db.dialect} ({db.db_version}), {args.rate:g} jobs/s offered, "
                f"c{args.concurrency}, {machine()['cpu_count']} cores"
            )
            soak_plot.plot(intervals, timeline.windows(), path, title)
            yield {"bench": "soak", "db": db.dialect, "plot": str(path)}


def _wait_for_server(server: Server, claims: ClaimHistogram) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise errors.ChokaqError(f"the soak's server did not start:\n{server.tail()}")
        if claims._scrape() is not None:
            claims.interval()
            return
        time.sleep(0.2)
    raise errors.ChokaqError(f"the soak's server did not serve its metrics within 60 s:\n{server.tail()}")


def _summaries(
    db: BenchDb,
    intervals: list[dict[str, Any]],
    timeline: Timeline,
    args: argparse.Namespace,
    problems: list[str],
) -> Iterator[dict[str, Any]]:
    """Per phase: medians and the worst interval (lowest archived share of the offered rate, highest
    backlog and claim p99); for the phase after a release, the hot table's size 5 minutes on against its
    size before the hold."""
    steady = [r for r in intervals if r["phase"] in ("before", "steady")]
    steady_bytes = _median([r["hot_bytes"] for r in steady])
    for phase in ("steady", "before", "held", "after"):
        rows = [r for r in intervals if r["phase"] == phase]
        if not rows:
            continue
        shares = [r["archived_per_s"] / r["offered_per_s"] for r in rows if r["offered_per_s"]]
        out: dict[str, Any] = {
            "bench": "soak",
            "db": db.dialect,
            "stat": "summary",
            "phase": phase,
            "intervals": len(rows),
            "offered_per_s": args.rate,
            "archived_per_s_median": _median([r["archived_per_s"] for r in rows]),
            "archived_share_min": round(min(shares), 3) if shares else None,
            "backlog_max": max(r["backlog"] for r in rows),
            "backlog_max_seconds_of_work": round(max(r["backlog"] for r in rows) / args.rate, 2),
            "claim_p99_ms_max": max((r["claim_p99_ms"] or 0) for r in rows),
            "claim_p50_ms_median": _median([r["claim_p50_ms"] for r in rows]),
            "lock_wait_p99_ms_max": max((r["lock_wait_p99_ms"] or 0) for r in rows),
            "hot_dead_tuples_max": max((r["hot_dead_tuples"] or 0) for r in rows),
            "wal_bytes_max": max((r["wal_bytes"] or 0) for r in rows),
            "concurrency": args.concurrency,
            "server": args.server,
        }
        if phase == "after" and timeline.hold_to is not None:
            later = [r for r in rows if r["t_s"] >= timeline.hold_to + 300]
            if later and steady_bytes:
                out["hot_bytes_steady"] = steady_bytes
                out["hot_bytes_5min_after"] = later[0]["hot_bytes"]
                out["hot_bytes_ratio_5min_after"] = round(later[0]["hot_bytes"] / steady_bytes, 2)
            wal_back = [r for r in rows if (r["wal_bytes"] or 0) <= 64 * 2**20]
            if rows[0]["wal_bytes"] is not None and wal_back:
                out["wal_under_64mb_after_release_s"] = round(wal_back[0]["t_s"] - timeline.hold_to, 1)
        if problems:
            out["problems"] = problems[:10]
        out.update(db._context())
        yield out


def _median(values: list[Any]) -> float | None:
    nums = [v for v in values if isinstance(v, int | float)]
    return round(statistics.median(nums), 2) if nums else None
