"""pgqueuer measured as `chokaq bench` measures chokaq: the peer of `chokaq bench compare --peer pgqueuer`.

    python -m chokaq_ops.bench.peer_pgqueuer throughput --db URL --rows 20000 --concurrency 1,8,32
    python -m chokaq_ops.bench.peer_pgqueuer latency --db URL --mode idle --rows 300 --concurrency 8

pgqueuer (https://github.com/janbjorge/pgqueuer) is used as its users use it: its schema installed by its
own installer (`Queries.install()`, after `Queries.uninstall()` so every run starts from the same
tables), jobs enqueued with `Queries.enqueue`, and consumers that are `QueueManager`s over an
`AsyncpgDriver` with one async no-op entrypoint, on uvloop when installed (as its CLI runs). Concurrency
C means, by `--style`:

- `dequeuers` (the default): C consumers, each on a connection of its own, batch 10, no concurrency
  limit: how pgqueuer's own drain benchmark (tools/benchmark.py `--strategy drain --dequeue C`) runs
  it, and its best figure;
- `limit`: one consumer with `concurrency_limit=C` (pgqueuer's way to cap a worker at C jobs at once),
  `batch_size` its default 10 or C when C is lower: a job's slot is freed when its completion is
  written, and completions are written in batches of `batch_size` or every 0.1 s, so with C below the
  batch every C jobs waited for that timer (77 jobs/s at C=8 with batch 10 on our 2-core machine, 800
  with batch 8).

- `throughput`: per run the queue is emptied, --rows jobs are enqueued in batches of 1000 (timed apart),
  the tables settled (VACUUM ANALYZE, a checkpoint where allowed), then this process runs the consumer
  until it has handled every job and written every completion. jobs/s is timed from its first dequeue
  to the end of that run (`startup_seconds`, from its start to its first dequeue, is reported apart).
  `worker_cpu_us_per_job` is this process's CPU from the consumer's start, `db_cpu_us_per_job` the
  client backends' (chokaq_ops/bench/cpu.py, as `chokaq bench throughput` reads them). The run then
  checks that the queue is empty and the log holds one `successful` row per job.
- `latency --mode idle`: the consumer runs in a process of its own; this process enqueues --rows jobs
  one at a time with a pause of --gap ms between them. Each job carries the host's monotonic clock read
  just before its enqueue; the handler reads the same clock when it starts (CLOCK_MONOTONIC is one clock
  for every process of a host), so p50/p95 ms span the enqueue's commit, the wake-up and the dequeue.

Each bench prints JSON lines shaped like `chokaq bench`'s (`bench`, `rows`, `per_second`,
`concurrency`, `p50_ms` ..., then a `"stat": "median"` summary per variant) with `peer` and
`peer_version`. The flags are those of `chokaq bench throughput` and `latency`, so `--bench-args` give
both sides of a compare the same ones. The schema is dropped again when the bench ends. pgqueuer and
asyncpg are imported only when a bench runs: `pip install '.[peers]'`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from chokaq_ops import errors
from chokaq_ops.argtypes import positive_int
from chokaq_ops.bench import cpu
from chokaq_ops.bench.harness import (
    BenchFailed,
    concurrency_levels,
    expect,
    machine,
    medians,
    percentile,
)

NAME = "pgqueuer"
BENCHES = ("throughput", "latency")
INSTALL_HINT = "pip install '.[peers]'"
ENTRYPOINT = "chokaq_bench_noop"
CHUNK = 1000
BATCH_SIZE = 10  # QueueManager.run's default batch_size
STYLES = ("dequeuers", "limit")
DEFAULT_ROWS = {"throughput": 20_000, "latency": 300}

T = TypeVar("T")


class PeerMissing(errors.ChokaqError):
    """pgqueuer or asyncpg is not installed in this interpreter."""


# ---------------------------------------------------------------------------------------------- flags


class _Parser(argparse.ArgumentParser):
    """Raises UsageError instead of exiting, so `chokaq bench compare` can check flags before a round."""

    def error(self, message: str) -> Any:  # argparse declares NoReturn
        raise errors.UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m chokaq_ops.bench.peer_pgqueuer", description=(__doc__ or "").strip())
    sub = parser.add_subparsers(dest="bench", metavar="BENCH", parser_class=_Parser)
    sub.required = True
    for name in BENCHES:
        bp = sub.add_parser(name, prog=f"{parser.prog} {name}")
        bp.add_argument("--db", default=os.environ.get("CHOKAQ_DB"), metavar="URL", help="PostgreSQL URL")
        bp.add_argument("--rows", type=positive_int, default=DEFAULT_ROWS[name], metavar="N")
        bp.add_argument("--repeat", type=positive_int, default=3, metavar="K")
        bp.add_argument("--force", action="store_true", help="drop pgqueuer tables that hold jobs")
        bp.add_argument(
            "--batch-size",
            type=positive_int,
            default=None,
            metavar="B",
            help=f"pgqueuer's dequeue batch (default {BATCH_SIZE}, or the concurrency when that is lower)",
        )
        if name == "throughput":
            bp.add_argument(
                "--style",
                choices=STYLES,
                default="dequeuers",
                help="dequeuers (default): C consumers on connections of their own, batch 10, no limit, as "
                "pgqueuer's own tools/benchmark.py drains; limit: one consumer, concurrency_limit=C",
            )
            bp.add_argument("--concurrency", default="1,8,32", metavar="C1,C2")
            bp.add_argument("--timeout", type=float, default=600.0, metavar="S")
        else:
            # `chokaq bench latency`'s flags; only idle pickup is measured here (--rate is for load).
            bp.add_argument("--mode", choices=("idle", "load", "both"), default="both")
            bp.add_argument("--gap", type=float, default=30.0, metavar="MS")
            bp.add_argument("--rate", type=float, default=500.0, metavar="N")
            bp.add_argument("--concurrency", type=positive_int, default=8, metavar="C")
    # The latency bench's consumer process (started by the bench, not by hand).
    cp = sub.add_parser("_consume", prog=f"{parser.prog} _consume")
    cp.add_argument("--db", required=True)
    cp.add_argument("--concurrency", type=positive_int, required=True)
    cp.add_argument("--batch-size", type=positive_int, required=True)
    return parser


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The flags of a peer bench; UsageError for anything the peer cannot measure as asked."""
    args = build_parser().parse_args(list(argv))
    if args.bench == "throughput":
        args.levels = concurrency_levels(args.concurrency)
    elif args.bench == "latency" and args.mode != "idle":
        raise errors.UsageError(
            f"the {NAME} peer measures idle pickup only: give latency --mode idle (got --mode {args.mode})"
        )
    if args.bench in BENCHES:
        args.dsn = dsn(args.db)
    return args


def check_args(bench: str, flags: Sequence[str]) -> None:
    """For `chokaq bench compare --peer`: refuse, before any round, flags this peer would refuse."""
    parse([bench, "--db", "postgresql://localhost/check", *flags])


def batch_size(given: int | None, concurrency: int) -> int:
    """--batch-size, else pgqueuer's default or the concurrency when that is lower (module docstring)."""
    return given or min(BATCH_SIZE, concurrency)


def dsn(url: str | None) -> str:
    """asyncpg's DSN for a chokaq database URL: the same server, database and role; the query string
    (psqlODBC's options) left out."""
    if not url:
        raise errors.UsageError(f"the {NAME} peer needs --db (a PostgreSQL scratch database)")
    if not url.startswith(("postgresql://", "postgres://")):
        raise errors.UsageError(f"the {NAME} peer runs on PostgreSQL only, not {url.split(':', 1)[0]}")
    parts = urlsplit(url)
    return urlunsplit(("postgresql", parts.netloc, parts.path, "", ""))


# ---------------------------------------------------------------------------------------------- pgqueuer


def versions() -> dict[str, str]:
    """The installed pgqueuer and asyncpg (PeerMissing, naming the extra to install, without them)."""
    out = {}
    for package in ("pgqueuer", "asyncpg"):
        try:
            out[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            raise PeerMissing(
                f"the {NAME} peer needs pgqueuer and asyncpg, and {package} is not installed in "
                f"{sys.executable}: {INSTALL_HINT}"
            ) from None
    return out


def _loop_name() -> str:
    try:
        import uvloop  # noqa: F401  pgqueuer's CLI runs on it when installed
    except ImportError:
        return "asyncio"
    return "uvloop"


def _run_async(main: Coroutine[Any, Any, T]) -> T:
    if _loop_name() == "uvloop":
        import uvloop

        return uvloop.run(main)
    return asyncio.run(main)


class _Backends:
    """The PostgreSQL backends of the bench database for cpu.Meter, listed over a psycopg connection of
    its own (the meter reads them synchronously; the bench's connections are asyncpg's)."""

    dialect = "postgresql"

    def __init__(self, url: str) -> None:
        import psycopg
        from psycopg.rows import dict_row

        from chokaq_ops.storage import queries

        self._sql = {name: q.statements[0].sql for name, q in queries.load("postgresql", "bench").items()}
        self._conn = psycopg.connect(url, autocommit=True, row_factory=dict_row)

    def sql(self, name: str, /, **params: Any) -> list[dict[str, Any]]:
        with self._conn.cursor() as cur:
            cur.execute(self._sql[name])
            return list(cur.fetchall())

    def close(self) -> None:
        self._conn.close()


class _Peer:
    """The bench's own connection to the database: pgqueuer's schema, enqueues and checks."""

    def __init__(self, conn: Any, force: bool) -> None:
        from pgqueuer import AsyncpgDriver, Queries

        self.conn = conn
        self.queries = Queries(AsyncpgDriver(conn))
        self.force = force
        self.base: dict[str, Any] = {}

    async def install(self) -> None:
        """pgqueuer's schema from its installer, dropped first (refusing tables that hold jobs)."""
        table = self.queries.qbe.settings.queue_table
        if await self.conn.fetchval("SELECT to_regclass($1) IS NOT NULL", table) and not self.force:
            held = await self.conn.fetchval(f"SELECT count(*) FROM {table}")
            if held:
                raise errors.UsageError(
                    f"{table} holds {held} jobs; the {NAME} peer drops its tables: run it on a scratch "
                    "database or pass --force"
                )
        await self.queries.uninstall()
        await self.queries.install()
        version = await self.conn.fetchval("SELECT current_setting('server_version')")
        self.base = {
            "peer": NAME,
            "peer_version": versions()["pgqueuer"],
            "db": "postgresql",
            "db_version": f"PostgreSQL {version}",
            "loop": _loop_name(),
        }

    async def uninstall(self) -> None:
        await self.queries.uninstall()

    async def reset(self) -> None:
        await self.queries.clear_queue()
        await self.queries.clear_queue_log()
        await self.queries.clear_statistics_log()

    async def seed(self, rows: int) -> float:
        """Seconds to enqueue `rows` no-op jobs in batches of CHUNK; the tables then settled as ours are."""
        await self.reset()
        start = time.perf_counter()
        for offset in range(0, rows, CHUNK):
            n = min(CHUNK, rows - offset)
            await self.queries.enqueue([ENTRYPOINT] * n, [None] * n, [0] * n)
        seconds = time.perf_counter() - start
        settings = self.queries.qbe.settings
        await self.conn.execute(f"VACUUM ANALYZE {settings.queue_table}, {settings.queue_table_log}")
        with contextlib.suppress(Exception):  # not allowed for this role: measure anyway
            await self.conn.execute("CHECKPOINT")
        return seconds

    async def counts(self) -> tuple[int, int]:
        """Jobs left in the queue, and `successful` rows in the log."""
        settings = self.queries.qbe.settings
        left = await self.conn.fetchval(f"SELECT count(*) FROM {settings.queue_table}")
        done = await self.conn.fetchval(
            f"SELECT count(*) FROM {settings.queue_table_log} WHERE status = 'successful'"
        )
        return int(left), int(done)

    def record(self, bench: str, rows: int, **fields: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"bench": bench, "rows": rows, **fields, **self.base}
        return {**out, **{k: v for k, v in machine().items() if k not in out}}


def _consumer(conn: Any, concurrency: int | None, on_job: Callable[[Any], None]) -> tuple[Any, list[float]]:
    """A QueueManager over `conn` with the no-op entrypoint (concurrency_limit=concurrency; None: no
    limit); the list gets the perf_counter of its first dequeue."""
    from pgqueuer import AsyncpgDriver, Queries, QueueManager
    from pgqueuer.models import Job

    first: list[float] = []

    class TimedQueries(Queries):
        async def dequeue(self, *args: Any, **kwargs: Any) -> Any:
            if not first:
                first.append(time.perf_counter())
            return await super().dequeue(*args, **kwargs)

    qm = QueueManager(TimedQueries(AsyncpgDriver(conn)))

    @qm.entrypoint(ENTRYPOINT, concurrency_limit=concurrency or 0)
    async def noop(job: Job) -> None:
        on_job(job)

    return qm, first


# ---------------------------------------------------------------------------------------------- benches


async def throughput(args: argparse.Namespace) -> AsyncIterator[dict[str, Any]]:
    import asyncpg

    rows = int(args.rows)
    conn = await asyncpg.connect(args.dsn)
    peer = _Peer(conn, args.force)
    backends: _Backends | None = None
    try:
        await peer.install()
        backends = _Backends(args.dsn)
        runs: list[dict[str, Any]] = []
        for concurrency in args.levels:
            for n in range(1, args.repeat + 1):
                enqueue_s = await peer.seed(rows)
                dequeuers = args.style == "dequeuers"
                batch = (
                    (args.batch_size or BATCH_SIZE) if dequeuers else batch_size(args.batch_size, concurrency)
                )
                seconds, startup, used = await _drain(
                    args.dsn, backends, concurrency, rows, batch, args.timeout, dequeuers=dequeuers
                )
                left, done = await peer.counts()
                expect(left == 0, f"{left} jobs left in the queue after the drain")
                expect(done == rows, f"the log holds {done} successful jobs of {rows}")
                record = peer.record(
                    "throughput",
                    rows,
                    concurrency=concurrency,
                    run=n,
                    seconds=round(seconds, 4),
                    per_second=round(rows / seconds, 1),
                    startup_seconds=round(startup, 4),
                    enqueue_seconds=round(enqueue_s, 3),
                    enqueue_per_second=round(rows / enqueue_s, 1) if enqueue_s else None,
                    batch_size=batch,
                    style=args.style,
                    **used,
                )
                runs.append(record)
                yield record
        for concurrency in args.levels:
            yield _summary(
                peer,
                "throughput",
                [r for r in runs if r["concurrency"] == concurrency],
                ("seconds", "per_second", "enqueue_per_second", "worker_cpu_us_per_job", "db_cpu_us_per_job"),
                concurrency=concurrency,
            )
    finally:
        if backends is not None:
            backends.close()
        with contextlib.suppress(Exception):
            await peer.uninstall()
        await conn.close()


async def _drain(
    url: str,
    backends: _Backends,
    concurrency: int,
    rows: int,
    batch: int,
    timeout: float,
    *,
    dequeuers: bool = False,
) -> tuple[float, float, dict[str, Any]]:
    """Seconds from the first dequeue until the consumers handled `rows` jobs and wrote their
    completions, seconds from their start to that dequeue, and the CPU per job (this process, database).
    One consumer with concurrency_limit=C, or with `dequeuers` C consumers on connections of their own
    and no limit (pgqueuer's own drain benchmark, tools/benchmark.py)."""
    import asyncpg

    conns = [await asyncpg.connect(url) for _ in range(concurrency if dequeuers else 1)]
    try:
        handled = 0

        def count(job: Any) -> None:
            nonlocal handled
            handled += 1
            if handled >= rows:
                for qm in qms:  # run() returns once the jobs in flight ended and completions are written
                    qm.shutdown.set()

        made = [_consumer(c, None if dequeuers else concurrency, count) for c in conns]
        qms = [qm for qm, _ in made]
        meter = cpu.Meter(backends)
        start = time.perf_counter()
        try:
            await asyncio.wait_for(asyncio.gather(*(qm.run(batch_size=batch) for qm in qms)), timeout)
        except TimeoutError:
            raise BenchFailed(f"handled {handled} of {rows} jobs within {timeout:g}s") from None
        end = time.perf_counter()
        # Read before the consumers' connections close (their backends would be lost).
        used = meter.per_job(rows, "worker_cpu_us_per_job")
    finally:
        for c in conns:
            await c.close()
    firsts = [f[0] for _, f in made if f]
    expect(handled == rows and bool(firsts), f"handled {handled} of {rows} jobs")
    return end - min(firsts), min(firsts) - start, used


async def latency(args: argparse.Namespace) -> AsyncIterator[dict[str, Any]]:
    import asyncpg

    rows = int(args.rows)
    conn = await asyncpg.connect(args.dsn)
    peer = _Peer(conn, args.force)
    proc: asyncio.subprocess.Process | None = None
    try:
        await peer.install()
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "chokaq_ops.bench.peer_pgqueuer",
            "_consume",
            "--db",
            args.dsn,
            "--concurrency",
            str(args.concurrency),
            "--batch-size",
            str(batch_size(args.batch_size, args.concurrency)),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        line = await _line(proc, 30.0)
        expect(line == "ready", f"the {NAME} consumer did not start (said {line!r})")
        runs: list[dict[str, Any]] = []
        for n in range(1, args.repeat + 1):
            await peer.reset()
            start = time.perf_counter()
            for _ in range(rows):
                await peer.queries.enqueue(ENTRYPOINT, repr(time.monotonic()).encode())
                await asyncio.sleep(args.gap / 1000.0)
            ms = [float(await _line(proc, 120.0)) for _ in range(rows)]
            await _logged(peer, rows)
            record = peer.record(
                "latency",
                rows,
                mode="idle",
                run=n,
                seconds=round(time.perf_counter() - start, 4),
                p50_ms=round(percentile(ms, 50), 2),
                p95_ms=round(percentile(ms, 95), 2),
                p99_ms=round(percentile(ms, 99), 2),
                max_ms=round(max(ms), 2),
                concurrency=args.concurrency,
                gap_ms=args.gap,
                batch_size=batch_size(args.batch_size, args.concurrency),
            )
            runs.append(record)
            yield record
        yield _summary(peer, "latency", runs, ("p50_ms", "p95_ms", "p99_ms", "max_ms"), mode="idle")
    finally:
        if proc is not None:
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        with contextlib.suppress(Exception):
            await peer.uninstall()
        await conn.close()


async def _line(proc: asyncio.subprocess.Process, timeout: float) -> str:
    assert proc.stdout is not None
    try:
        raw = await asyncio.wait_for(proc.stdout.readline(), timeout)
    except TimeoutError:
        raise BenchFailed(f"the {NAME} consumer said nothing for {timeout:g}s") from None
    if not raw:
        raise BenchFailed(f"the {NAME} consumer exited ({await proc.wait()})")
    return raw.decode().strip()


async def _logged(peer: _Peer, rows: int, timeout: float = 30.0) -> None:
    """Wait until the consumer wrote every completion (its log buffer flushes every 0.1 s), so the
    next run's reset does not race it; and check that each job ran once."""
    end = time.monotonic() + timeout
    while True:
        left, done = await peer.counts()
        if left == 0 and done == rows:
            return
        expect(time.monotonic() < end, f"{done} of {rows} jobs logged successful ({left} left)")
        await asyncio.sleep(0.05)


async def consume(args: argparse.Namespace) -> None:
    """The latency bench's consumer: prints `ready` at its first dequeue (its listener is up by then),
    then the pickup ms of every job, until its stdin closes."""
    import asyncpg

    conn = await asyncpg.connect(args.db)

    def picked(job: Any) -> None:
        ms = (time.monotonic() - float(job.payload)) * 1000
        sys.stdout.write(f"{ms:.3f}\n")
        sys.stdout.flush()

    qm, first = _consumer(conn, args.concurrency, picked)
    loop = asyncio.get_running_loop()

    async def ready() -> None:
        while not first:
            await asyncio.sleep(0.001)
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        await loop.run_in_executor(None, sys.stdin.read)
        qm.shutdown.set()

    try:
        await asyncio.gather(qm.run(batch_size=args.batch_size), ready())
    finally:
        await conn.close()


def _summary(
    peer: _Peer, bench: str, runs: Sequence[dict[str, Any]], keys: Sequence[str], **where: Any
) -> dict[str, Any]:
    """The median over the runs of each key, as BenchDb.summary gives ours."""
    out: dict[str, Any] = {"bench": bench, "rows": runs[0]["rows"], **where, "stat": "median"}
    out["runs"] = len(runs)
    out.update(medians(runs, keys))
    return {**out, **{k: v for k, v in peer.base.items() if k not in out}, **machine()}


# ---------------------------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    import json

    try:
        args = parse(sys.argv[1:] if argv is None else argv)
        versions()
        if args.bench == "_consume":
            _run_async(consume(args))
            return 0
        bench = throughput if args.bench == "throughput" else latency

        async def run() -> None:
            async for record in bench(args):
                sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
                sys.stdout.flush()

        _run_async(run())
    except errors.UsageError as exc:
        print(f"peer_pgqueuer: error: {exc}", file=sys.stderr)
        return 2
    except errors.ChokaqError as exc:
        print(f"peer_pgqueuer: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
