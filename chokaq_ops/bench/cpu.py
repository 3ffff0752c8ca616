"""CPU spent per job, by the worker process and by the database backends serving it.

Wall-clock throughput on a shared machine moves with whatever else runs; the CPU a job costs barely
does, so it is what a change to the worker's hot path is judged by (docs/benchmarks.md).

- The worker: this process's user + system time (`getrusage(RUSAGE_SELF)`, every thread; the bench's
  own polling loop is part of it but sleeps between looks). Split by thread role (`thread_roles`): the
  worker's fetch thread (claims), its execution threads (handlers) and its completer (outcomes), each
  from `/proc/self/task/<tid>/schedstat`, so a change to one of them shows where the CPU moved.
- The database (PostgreSQL on this host only): the on-CPU time of the client backends connected to the
  bench database, from `/proc/<pid>/schedstat` (nanoseconds; `/proc/<pid>/stat` ticks where schedstat
  is missing), read before and at the end of the drain. A backend that connects during the drain starts
  from zero. Server processes outside the database (WAL writer, checkpointer, autovacuum) are not
  counted. None when the backends cannot be read (another host, another user's processes hidden) or
  one of them ended during the drain (its time would be lost).
"""

from __future__ import annotations

import os
import re
import resource
import threading
from typing import Any, Protocol

_TICK_S = 1.0 / (os.sysconf("SC_CLK_TCK") or 100)


class Database(Protocol):
    """What the meter needs of a bench's database: its dialect and the named bench SQL
    (`bench_backend_pids`). A BenchDb is one; so is the pgqueuer peer harness's (peer_pgqueuer.py)."""

    @property
    def dialect(self) -> str: ...

    def sql(self, name: str, /, **params: Any) -> list[dict[str, Any]]: ...


def process_seconds() -> float:
    """User + system CPU of this process so far, every thread."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# The worker's threads by name (engine/worker.py, engine/completer.py): chokaq-<role>[-<n>]-<worker id>.
THREAD_ROLES = ("fetch", "exec", "completer")
_ROLE = re.compile(r"chokaq-(" + "|".join(THREAD_ROLES) + r")-")


def _schedstat_seconds(path: str) -> float | None:
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def thread_roles(worker_id: str) -> dict[str, float] | None:
    """On-CPU seconds of the live threads of worker `worker_id` in this process, summed by role (fetch,
    exec, completer), from their start; None where /proc cannot tell (not Linux)."""
    out = dict.fromkeys(THREAD_ROLES, 0.0)
    for thread in threading.enumerate():
        match = _ROLE.match(thread.name)
        if match is None or not thread.name.endswith(f"-{worker_id}") or thread.native_id is None:
            continue
        seconds = _schedstat_seconds(f"/proc/self/task/{thread.native_id}/schedstat")
        if seconds is None:
            return None
        out[match.group(1)] += seconds
    return out


def _proc_seconds(pid: int) -> float | None:
    """On-CPU seconds of a local postgres process, or None when it is not one (or cannot be read)."""
    try:
        with open(f"/proc/{pid}/comm", encoding="ascii") as f:
            if not f.read().startswith("postgres"):
                return None
    except OSError:
        return None
    seconds = _schedstat_seconds(f"/proc/{pid}/schedstat")
    if seconds is not None:
        return seconds
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * _TICK_S  # utime, stime (fields 14, 15)
    except (OSError, ValueError, IndexError):
        return None


class BackendCpu:
    """The CPU the database's client backends used between `start()` and `stop()`."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._before: dict[int, float] | None = None

    def _read(self) -> dict[int, float] | None:
        if self.db.dialect != "postgresql":
            return None
        pids = [int(r["pid"]) for r in self.db.sql("bench_backend_pids")]
        out = {}
        for pid in pids:
            seconds = _proc_seconds(pid)
            if seconds is None:
                return None  # not on this host, or not ours to read: no figure rather than a partial one
            out[pid] = seconds
        return out

    def start(self) -> None:
        self._before = self._read()

    def stop(self) -> float | None:
        """Seconds of backend CPU since start(), or None when it cannot be told."""
        before, after = self._before, self._read()
        if before is None or after is None or any(pid not in after for pid in before):
            return None
        return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def per_job_us(seconds: float | None, jobs: int) -> float | None:
    return None if seconds is None or jobs <= 0 else round(seconds / jobs * 1e6, 1)


class Meter:
    """This process's CPU and the database backends' from construction on, per job when read."""

    def __init__(self, db: Database) -> None:
        self._backends = BackendCpu(db)
        self._backends.start()
        self._start = process_seconds()

    def per_job(self, jobs: int, process_key: str, *, worker_id: str | None = None) -> dict[str, Any]:
        """`process_key` (this process's µs per job, named for its role in the bench) and
        `db_cpu_us_per_job`; with `worker_id` (a worker started after this meter, in this process) also
        `<role>_cpu_us_per_job` for each of its thread roles. Read while the measured connections and
        threads are still there."""
        used = {
            process_key: per_job_us(process_seconds() - self._start, jobs),
            "db_cpu_us_per_job": per_job_us(self._backends.stop(), jobs),
        }
        if worker_id is not None:
            roles = thread_roles(worker_id)
            for role in THREAD_ROLES:
                used[f"{role}_cpu_us_per_job"] = None if roles is None else per_job_us(roles[role], jobs)
        return used
