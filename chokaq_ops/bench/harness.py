"""What every bench shares: a guarded scratch database, seeding by named SQL, records and medians."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from typing import Any

from chokaq_ops import errors
from chokaq_ops.settings import Settings, load_settings
from chokaq_ops.storage import Store, queries
from chokaq_ops.storage.migrate import migrate


class BenchRefused(errors.ValidationError):
    """The bench would delete data it does not own."""


class BenchFailed(errors.ChokaqError):
    """A bench found the store doing something other than what it measures (a bug, not a slow run)."""


@cache
def machine() -> dict[str, Any]:
    """The machine a figure was measured on: it means nothing without it."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": model,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def settings_for(args: argparse.Namespace) -> Settings:
    """The settings `chokaq bench` resolved (args.settings), else those of --db and --config as every
    command reads them (load_settings: --db, else CHOKAQ_DB, else the config file, else the default)."""
    settings = getattr(args, "settings", None)
    if settings is not None:
        return settings
    return load_settings(getattr(args, "config", None), overrides={"storage.url": getattr(args, "db", None)})


def concurrency_levels(text: str) -> list[int]:
    """--concurrency of the throughput benches (ours and the peer's): numbers between 1 and 1024."""
    try:
        levels = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        levels = []
    if not levels or any(c < 1 or c > 1024 for c in levels):
        raise errors.UsageError(f"--concurrency wants numbers between 1 and 1024, e.g. 1,8,32 (got {text!r})")
    return levels


def medians(runs: Sequence[Mapping[str, Any]], keys: Iterable[str]) -> dict[str, Any]:
    """The median over `runs` of each numeric key in `keys` (whole medians as integers): a summary line's
    figures, for our benches (BenchDb.summary) and the peer's."""
    out: dict[str, Any] = {}
    for key in keys:
        values = [r[key] for r in runs if isinstance(r.get(key), int | float)]
        if values:
            median = statistics.median(values)
            out[key] = int(median) if float(median).is_integer() else round(median, 4)
    return out


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100), the usual reading of p50/p95 for latencies."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


class BenchDb:
    """A Store over a scratch database that also knows the bench SQL of its dialect.

    Opening migrates the schema and refuses a database that holds jobs or audit rows unless `force`; closing
    empties the job tables again, so the next bench finds the database as it was (empty)."""

    def __init__(self, args: argparse.Namespace, bench: str) -> None:
        self.bench = bench
        self.args = args
        self.settings = settings_for(args)
        # Seeding a million rows is one statement: no Storage.CommandTimeout for the bench's own store (the
        # worker stores the benches start have the configured bounds).
        self.store = Store.from_settings(
            self.settings.with_overrides({"storage.pool_size": 4, "storage.command_timeout": 0})
        )
        self.dialect = self.store.dialect.name
        # The bench blocks join the Store's own, so they run through the same transactions and retries.
        self.store.queries = self.store.queries | queries.load(self.dialect, "bench")
        self._runs: list[dict[str, Any]] = []
        try:
            migrate(self.store)
            counts = self.store.run("table_counts", write=False)[0]
            held = sum(int(v) for v in counts.values())
            if held and not getattr(args, "force", False):
                raise BenchRefused(
                    f"{self.store.dialect.redacted_url()} holds {held} jobs (hot {counts['hot']}, archive "
                    f"{counts['archive']}, dlq {counts['dlq']}); benches delete every job: run them on a "
                    "scratch database (e.g. `createdb chokaq_bench`) or pass --force",
                    field="db",
                )
            audited = int(self.store.run("audit_rows", write=False)[0]["n"])
            if audited and not getattr(args, "force", False):
                raise BenchRefused(
                    f"{self.store.dialect.redacted_url()} holds {audited} audit log rows; benches delete "
                    "them with the jobs: run them on a scratch database (e.g. `createdb chokaq_bench`) or "
                    "pass --force",
                    field="db",
                )
            self.db_version = str(self.store.run("bench_db_version", write=False)[0]["version"])
        except BaseException:
            self.store.close()
            raise

    def __enter__(self) -> BenchDb:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.reset()
        finally:
            self.store.close()

    # ------------------------------------------------------------------ seeding

    def sql(self, name: str, /, **params: Any) -> list[dict[str, Any]]:
        return self.store.run(name, **params)

    def timed(self, name: str, /, **params: Any) -> float:
        start = time.perf_counter()
        self.store.run(name, **params)
        return time.perf_counter() - start

    def reset(self) -> None:
        self.store.run("bench_reset")

    def vacuum(self) -> float:
        """Settle the tables after a seed: statistics, visibility map, and a checkpoint where allowed."""
        seconds = self.timed("bench_vacuum")
        start = time.perf_counter()
        with contextlib.suppress(errors.StorageError):  # not allowed for this role: measure anyway
            self.store.run("bench_checkpoint")
        return seconds + time.perf_counter() - start

    # ------------------------------------------------------------------ records

    def record(self, rows: int, *, rate: bool = True, **fields: Any) -> dict[str, Any]:
        """One measurement; with `rate`, `per_second` is rows / `seconds` unless given."""
        rec: dict[str, Any] = {"bench": self.bench, "db": self.dialect, "rows": rows}
        rec.update(fields)
        seconds = rec.get("seconds")
        if seconds is not None:
            rec["seconds"] = round(seconds, 4)
            if rate and "per_second" not in rec:
                rec["per_second"] = round(rows / seconds, 1) if seconds > 0 else None
        rec.update(self._context())
        self._runs.append(rec)
        return rec

    def summary(self, keys: Iterable[str], *, where: dict[str, Any] | None = None) -> dict[str, Any]:
        """The median over this bench's records (those matching `where`) of each numeric key in `keys`."""
        runs = [r for r in self._runs if all(r.get(k) == v for k, v in (where or {}).items())]
        if not runs:
            raise BenchFailed(f"{self.bench}: no measurement to summarise")
        out: dict[str, Any] = {"bench": self.bench, "db": self.dialect, "rows": runs[0]["rows"]}
        out.update(where or {})
        out["stat"] = "median"
        out["runs"] = len(runs)
        for key, median in medians(runs, keys).items():
            out[key] = median
            if key in ("seconds", "ms", "p50_ms", "p95_ms", "per_second"):
                out[f"{key}_all"] = [r[key] for r in runs]
        out.update(self._context())
        return out

    def _context(self) -> dict[str, Any]:
        return {"db_version": self.db_version, **machine()}


class BatchClock:
    """A progress callback that times each committed batch of a bulk operation: the time since the
    previous commit, which with Storage.BulkStreams batches in flight together is shorter than one
    batch's own (storage/bulk_streams.py)."""

    def __init__(self) -> None:
        self.last = time.perf_counter()
        self.ms: list[float] = []

    def __call__(self, done: int) -> None:
        now = time.perf_counter()
        self.ms.append((now - self.last) * 1000)
        self.last = now

    def fields(self) -> dict[str, Any]:
        """Per-batch p50/p95/max in ms: a slow run shows whether every batch or a few stalled."""
        if not self.ms:
            return {}
        return {
            "batch_p50_ms": round(percentile(self.ms, 50), 2),
            "batch_p95_ms": round(percentile(self.ms, 95), 2),
            "batch_max_ms": round(max(self.ms), 2),
        }


def spread(one: Callable[[int], None], calls: int, threads: int) -> float:
    """Seconds to make `calls` calls `one(0) .. one(calls - 1)` from `threads` threads taking the next
    number as each finishes one (producers sharing a store, as an application's threads would)."""
    counter = iter(range(calls))
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            one(i)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    start = time.perf_counter()
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    return time.perf_counter() - start


def expect(condition: bool, message: str) -> None:
    """Benches check that the store did the whole job: a fast wrong answer is no result."""
    if not condition:
        raise BenchFailed(message)
