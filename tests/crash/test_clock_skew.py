"""A worker whose wall clock is an hour off (libfaketime) creates no false zombies and misses no real ones:
every liveness time is the database's.

PostgreSQL only: SQLite's `'now'` is the clock of whichever process runs the statement (SQLite is an
embedded, single-host database, so all its processes share one clock) - see docs/rescue.md."""

from __future__ import annotations

import glob
import os
import time
from pathlib import Path

import pytest

from chokaq_ops.engine.rescue import Rescuer
from chokaq_ops.models import NewJob
from chokaq_ops.settings import load_settings
from crash.procs import TESTS_DIR, executions, run_rescue, starts, wait_for, write_config
from crash.support import counts

pytestmark = [pytest.mark.slow, pytest.mark.postgres_only]

LIBFAKETIME = next(
    (
        p
        for pattern in ("/usr/lib/*/faketime/libfaketimeMT.so.1", "/usr/lib/faketime/libfaketimeMT.so.1")
        for p in sorted(glob.glob(pattern))
    ),
    None,
)


def skewed(skew: str) -> dict:
    """Environment for a worker whose wall clock is `skew` off. libfaketime is preloaded into the worker
    itself (not through the `faketime` wrapper, which forks: killing it would orphan the worker). Only the
    wall clock is skewed, as on a host with a wrong clock; monotonic timers stay real. faketime_site/
    works around libfaketime's clock_nanosleep in that mode (see its docstring)."""
    if LIBFAKETIME is None:
        pytest.fail("libfaketime is not installed (apt-get install faketime); .ci/run installs it")
    site = Path(__file__).with_name("faketime_site")
    return {
        "env": {
            "LD_PRELOAD": LIBFAKETIME,
            "FAKETIME": skew,
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "PYTHONPATH": os.pathsep.join([str(site), str(TESTS_DIR)]),
        }
    }


def clock_offset(tmp_path, store) -> float:
    """How far the worker's wall clock is from the database's, from its crash.clock record (written just
    after the handler's start record, so it is waited for)."""

    def stamps() -> list[float]:
        return [float(e.split("=", 1)[1]) for e, *_ in executions(tmp_path) if e.startswith("clock=")]

    wait_for(stamps, 10, "the handler's clock record")
    [stamp] = stamps()
    return stamp - store.now().timestamp()


@pytest.mark.parametrize("skew", ["-1h", "+1h"])
def test_a_skewed_worker_creates_no_false_zombies(pg_store, pg_url, tmp_path, spawn, skew):
    """The job runs 4 s, twice the zombie timeout, while sweeps run from normal processes: its heartbeats
    are stamped by the database, so it is never rescued, and it is archived normally."""
    store = pg_store
    config = write_config(tmp_path / "chokaq.toml")
    store.enqueue([NewJob(type="crash.clock", id="skewed", payload='{"seconds": 4}')])
    spawn(pg_url, config, "skewed", concurrency=1, **skewed(skew))
    wait_for(lambda: starts(tmp_path)["skewed"] == 1, 30, "the job to start on the skewed worker")
    offset = clock_offset(tmp_path, store)
    assert abs(abs(offset) - 3600) < 60, f"the worker's clock is not an hour off ({offset:.0f}s)"

    normal = Rescuer(store, load_settings(config, env={}), holder="normal-clock")
    beats, sweeps = [], []
    while (job := store.get_job("skewed"))["location"] == "hot":
        lag = (store.now() - job["heartbeat_at"]).total_seconds()
        assert -1 < lag < 1.5, f"heartbeat {lag:.1f}s from the database clock"
        if job["heartbeat_at"] not in beats:
            beats.append(job["heartbeat_at"])
        sweeps.append(normal.run(force=True))
        time.sleep(0.2)
    assert len(beats) >= 8 and beats == sorted(beats)
    assert sweeps and all(s.archived == 0 and s.recovered == 0 for s in sweeps)
    assert run_rescue(pg_url, config, tmp_path) == {"recovered": 0, "archived": 0}
    done = store.get_job("skewed")
    assert done["location"] == "archive" and done["worker_id"] == "skewed"
    assert abs((store.now() - done["finished_at"]).total_seconds()) < 5  # database time, not the worker's
    assert 3.9 < (done["finished_at"] - done["started_at"]).total_seconds() < 6
    assert counts(store)["dlq"] == 0


def test_a_dead_worker_with_a_fast_clock_is_rescued_on_time(pg_store, pg_url, tmp_path, spawn):
    """The other direction: a worker an hour ahead dies; its job is a zombie 2 s after its last
    heartbeat, not an hour and 2 s later."""
    store = pg_store
    config = write_config(tmp_path / "chokaq.toml")
    store.enqueue([NewJob(type="crash.clock", id="ahead", payload='{"seconds": 60}')])
    w = spawn(pg_url, config, "ahead", concurrency=1, **skewed("+1h"))
    wait_for(lambda: starts(tmp_path)["ahead"] == 1, 30, "the job to start")
    assert clock_offset(tmp_path, store) > 3500
    time.sleep(0.6)
    w.kill()
    last = store.get_job("ahead")["heartbeat_at"]
    wait_for(lambda: (store.now() - last).total_seconds() > 2.2, 10, "the zombie timeout")
    assert run_rescue(pg_url, config, tmp_path) == {"recovered": 0, "archived": 1}
    dead = store.get_job("ahead")
    assert (dead["failure_reason"], dead["heartbeat_at"]) == ("Zombie", last)
