"""The load of `chokaq bench soak`: the producer process, the server it feeds, and the sessions that hold
snapshots (one long reader, or overlapping analytics queries)."""

from __future__ import annotations

import multiprocessing
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from chokaq_ops.storage import Store

QUEUE = "bench.soak"
# The job type of chokaq_ops/bench/soak_handlers.py, which only the server imports (importing it here
# would register its handler in every process that lists the benches).
TYPE = "bench.soak.noop"


# ---------------------------------------------------------------------------------------------- producer


def produce(url: str, rate: float, batch: int, stop: Any, out: Any) -> None:
    """(A process of its own, so its CPU never shares an interpreter lock with anything measured.)
    Offer `rate` jobs/s as enqueue_many of `batch`, on schedule; a producer that falls behind by more
    than a second drops the missed batches instead of bursting (what was offered is what it reports).
    Sends (jobs, statement ms) per batch on `out`."""
    from chokaq_ops.models import NewJob

    store = Store(url, pool_size=2)
    parent = os.getppid()
    try:
        period = batch / rate
        next_at = time.monotonic()
        # A soak killed before it could stop us (kill -9, a timeout) leaves us to a new parent: stop then,
        # or we would go on loading the database the next run measures.
        while not stop.is_set() and os.getppid() == parent:
            now = time.monotonic()
            if next_at > now:
                stop.wait(next_at - now)
                continue
            if now - next_at > 1.0:
                next_at = now
            began = time.perf_counter()
            try:
                store.enqueue(NewJob(type=TYPE, queue=QUEUE, payload="{}") for _ in range(batch))
                out.put((batch, (time.perf_counter() - began) * 1000.0))
            except Exception as exc:  # the soak reports it and goes on: a failing producer is a finding
                out.put((0, None, f"{type(exc).__name__}: {exc}"))
            next_at += period
    finally:
        store.close()


class Producer:
    def __init__(self, url: str, rate: float, batch: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._stop = ctx.Event()
        self._out: Any = ctx.Queue()
        self._proc = ctx.Process(target=produce, args=(url, rate, batch, self._stop, self._out), daemon=True)
        self.enqueued = 0
        self.errors: list[str] = []

    def start(self) -> None:
        self._proc.start()

    def drain(self) -> list[float]:
        """Statement times (ms) of the batches sent since the last call; counts them into `enqueued`."""
        ms: list[float] = []
        while True:
            try:
                item = self._out.get_nowait()
            except Exception:
                return ms
            self.enqueued += item[0]
            if item[1] is not None:
                ms.append(item[1])
            elif len(self.errors) < 20:
                self.errors.append(item[2])

    def stop(self) -> None:
        self._stop.set()
        if self._proc.pid is None:  # never started
            return
        self._proc.join(30)
        if self._proc.is_alive():
            self._proc.kill()
        self.drain()


# ---------------------------------------------------------------------------------------------- server


def _end_with_parent() -> None:
    """(In the server's process, before exec.) SIGTERM when the soak dies, however it dies: a soak killed
    with -9 otherwise left its server claiming and vacuuming the database the next run measures."""
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGTERM))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """`chokaq serve` (or `chokaq worker`) running the soak's handler, with open metrics on `port`."""

    def __init__(self, url: str, kind: str, concurrency: int, config: str | None) -> None:
        self.kind = kind
        self.port = free_port()
        cmd = [sys.executable, "-m", "chokaq_ops.cli", kind, "--db", url, "--concurrency", str(concurrency)]
        cmd += ["--handlers", "chokaq_ops.bench.soak_handlers"]
        cmd += ["--port", str(self.port)] if kind == "serve" else ["--metrics-port", str(self.port)]
        if config:
            cmd += ["--config", config]
        env = dict(os.environ, CHOKAQ_API__METRICS_OPEN="true")
        self.proc = subprocess.Popen(
            cmd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_end_with_parent if sys.platform == "linux" else None,
        )
        self._stderr: list[str] = []
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)
            del self._stderr[:-50]

    def metrics_url(self) -> str:
        path = "/api/v1/metrics" if self.kind == "serve" else "/metrics"
        return f"http://127.0.0.1:{self.port}{path}"

    def tail(self) -> str:
        return "".join(self._stderr[-20:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


# ---------------------------------------------------------------------------------------------- holders


class Holder:
    """A session that keeps one snapshot from `start()` until `stop()`: an analyst's open transaction."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._release = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._hold, daemon=True)
        self.error: str | None = None

    def _hold(self) -> None:
        try:
            with self.store.db.snapshot("bench_soak_hold"):
                self._ready.set()
                self._release.wait()
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self._ready.set()

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(60)

    def stop(self) -> None:
        self._release.set()
        if self._thread.ident is not None:  # a run without --hold-snapshot never started it
            self._thread.join(30)


class Analytics:
    """`n` long queries on the archive, each `seconds` long, staggered so that `n` overlap at all times
    (each thread starts its first one `seconds / n` after the previous thread) until stopped."""

    def __init__(self, store: Store, n: int, seconds: float) -> None:
        self.store = store
        self.n = n
        self.seconds = seconds
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._loop, args=(i,), daemon=True) for i in range(n)]
        self.running = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()

    def _loop(self, i: int) -> None:
        if self._stop.wait(i * self.seconds / self.n):
            return
        while not self._stop.is_set():
            self._one()

    def _one(self) -> None:
        began = time.monotonic()
        with self._lock:
            self.running += 1
        try:
            with self.store.db.snapshot("bench_soak_analytics", seconds=self.seconds):
                # On SQLite the read returns at once; its transaction is what a long report holds.
                self._stop.wait(max(0.0, self.seconds - (time.monotonic() - began)))
        except Exception as exc:
            if len(self.errors) < 20:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            self._stop.wait(1.0)
        finally:
            with self._lock:
                self.running -= 1

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(5)


def every(seconds: float, stop: threading.Event, fn: Callable[[], None]) -> threading.Thread:
    """Run `fn` every `seconds` in a daemon thread until `stop` is set."""

    def loop() -> None:
        while not stop.wait(seconds):
            fn()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return t
