"""Handlers the crash tests run inside real `chokaq worker` processes (`--handlers crash.handlers_crash`).

Every execution appends "<event> <job id> <attempt> <pid>" to `$CHOKAQ_TEST_DIR/exec-<pid>.log` with one
O_APPEND write, so the line is in the kernel before user code goes on: a SIGKILL right after loses nothing,
and the test can tell exactly which job ran how often in which process.
"""

from __future__ import annotations

import os
import time
import zlib

from chokaq_ops import FatalJobError, JobContext, job

_DIR = os.environ.get("CHOKAQ_TEST_DIR", ".")
_fd: int | None = None


def record(event: str, ctx: JobContext) -> None:
    global _fd
    if _fd is None:
        _fd = os.open(os.path.join(_DIR, f"exec-{os.getpid()}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.write(_fd, f"{event} {ctx.job_id} {ctx.attempt} {os.getpid()}\n".encode())


@job("crash.noop")
def noop(payload, ctx: JobContext) -> None:
    record("start", ctx)


@job("crash.block")
def block(payload, ctx: JobContext) -> None:
    """Runs until the file `$CHOKAQ_TEST_DIR/release` exists (or the worker cancels it)."""
    record("start", ctx)
    gate = os.path.join(_DIR, "release")
    while not os.path.exists(gate) and not ctx.cancelled.is_set():
        time.sleep(0.02)
    record("end", ctx)


@job("crash.fastgate")
def fastgate(payload, ctx: JobContext) -> None:
    """Returns at once, unless the file `$CHOKAQ_TEST_DIR/hold` exists: then it records "hold" and runs
    until `release` exists (or the worker cancels it)."""
    record("start", ctx)
    if os.path.exists(os.path.join(_DIR, "hold")):
        record("hold", ctx)
        gate = os.path.join(_DIR, "release")
        while not os.path.exists(gate) and not ctx.cancelled.is_set():
            time.sleep(0.02)


@job("crash.sleep", timeout=120)
def sleep(payload, ctx: JobContext) -> None:
    """Sleeps `payload["seconds"]` without looking at cancellation: a handler that must be waited for."""
    record("start", ctx)
    time.sleep(float(payload.get("seconds", 1)))
    record("end", ctx)


def soak_fate(job_id: str) -> str:
    """5 % of soak jobs fail, decided by the id alone: half fatally, half on every attempt."""
    h = zlib.crc32(job_id.encode())
    if h % 100 >= 5:
        return "ok"
    return "fatal" if h % 2 else "flaky"


@job("soak.work", max_attempts=2)
def soak(payload, ctx: JobContext) -> None:
    record("start", ctx)
    fate = soak_fate(ctx.job_id)
    if fate == "fatal":
        raise FatalJobError(f"soak job {ctx.job_id} is fatal by design")
    if fate == "flaky":
        raise RuntimeError(f"soak job {ctx.job_id} fails on every attempt")


@job("crash.clock", timeout=120)
def clock(payload, ctx: JobContext) -> None:
    """Records the process's wall clock (under faketime: the skewed one), then sleeps like crash.sleep."""
    record("start", ctx)
    record(f"clock={time.time():.3f}", ctx)
    time.sleep(float(payload.get("seconds", 1)))
    record("end", ctx)


@job("crash.downstream", max_attempts=50)
def downstream(payload, ctx: JobContext) -> None:
    """Calls a "downstream" that is down while the file `$CHOKAQ_TEST_DIR/down` exists."""
    record("start", ctx)
    if os.path.exists(os.path.join(_DIR, "down")):
        raise ConnectionError("downstream unavailable")
