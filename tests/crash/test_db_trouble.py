"""The promise when the *database* misbehaves (docs/rescue.md "Outages", docs/configuration.md "Timeouts"),
with a real `chokaq worker` process on PostgreSQL: another session holding one running job's row lock, a
half-open connection (a proxy that stops forwarding without closing) and a paused server (every process of
a private cluster under SIGSTOP) — each for longer than the zombie timeout. Live jobs keep their heartbeats
or get them back before any judgement, no live job is declared a zombie, failures are counted, nothing is
lost or run twice."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chokaq_ops.models import NewJob
from chokaq_ops.storage import Store
from chokaq_ops.storage.migrate import migrate
from crash.procs import FAST, free_port, starts, wait_for, write_config
from crash.proxy import CuttableProxy
from crash.support import assert_one_table_each, counts, sql
from tests.support.dbprobe import row_locked

pytestmark = [pytest.mark.slow, pytest.mark.postgres_only]

# Heartbeats every 0.3-0.5 s, a zombie after 2 s without one, a sweep every 0.5 s in the worker's own
# process; statements bounded to 2 s. Every fault below lasts well beyond the zombie timeout.
TROUBLE = {
    "Execution": {"HeartbeatIntervalMin": "300ms", "HeartbeatIntervalMax": "500ms"},
    "Recovery": {**FAST["Recovery"], "ProcessingZombieTimeout": "2s", "FetchedJobTimeout": "4s"},
    "Storage": {
        "CommandTimeout": "2s",
        "ConnectTimeout": "2s",
        "MaxTransientRetries": 1,
        "TransientRetryBaseDelay": "50ms",
    },
}


def block_jobs(store: Store, n: int) -> list[str]:
    ids = [f"block{i}" for i in range(n)]
    store.enqueue([NewJob(type="crash.block", id=i) for i in ids])
    return ids


def blocked_worker(store: Store, pg_url: str, tmp_path: Path, spawn, n: int):
    """A real worker "w1" (TROUBLE settings, concurrency n, metrics served) running n blocking jobs: the
    worker and the jobs' ids."""
    config = write_config(tmp_path / "chokaq.toml", **TROUBLE)
    ids = block_jobs(store, n)
    w = spawn(pg_url, config, "w1", concurrency=n, metrics_port=free_port())
    wait_for(lambda: len(starts(tmp_path)) == n, 30, f"{n} jobs running")
    return w, ids


def heartbeat_ages(store: Store, ids: list[str]) -> dict[str, float]:
    rows = sql(
        store,
        "SELECT id, extract(epoch FROM now() - heartbeat_at) FROM jobs_hot WHERE status = 2 AND id = ANY(?)",
        "{" + ",".join(ids) + "}",
    )
    return {r[0]: float(r[1]) for r in rows}


def oldest_heartbeat_during(store: Store, ids: list[str], seconds: float) -> float:
    """The oldest heartbeat of `ids` seen while polling for `seconds`; every one must stay processing."""
    worst = 0.0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ages = heartbeat_ages(store, ids)
        assert set(ages) == set(ids), f"a job left processing: {ages}"
        worst = max(worst, *ages.values())
        time.sleep(0.2)
    return worst


def finish_and_check(store: Store, tmp_path: Path, ids: list[str], *, survivors: list[str]) -> None:
    """Release the blocking handlers; every survivor must end archived after exactly one run."""
    (tmp_path / "release").touch()
    wait_for(lambda: counts(store)["hot"] == 0, 60, "every job out of hot")
    where = assert_one_table_each(store, ids)
    dead = sql(store, "SELECT id, failure_reason, error_details FROM jobs_dlq")
    wrongly_dead = [d for d in dead if d[0] in survivors]
    assert not wrongly_dead, f"live jobs declared zombies: {wrongly_dead}"
    assert all(where[i] == ["archive"] for i in survivors), where
    ran = starts(tmp_path)
    assert {j: n for j, n in ran.items() if n != 1} == {}, "a job ran twice"


def test_a_locked_row_does_not_stop_the_heartbeats_of_its_neighbours(pg_store, pg_url, tmp_path, spawn):
    """Another application holds one running job's row (SELECT ... FOR UPDATE) for 3 zombie timeouts. The
    worker's heartbeat skips that row instead of waiting behind it: its three neighbours keep fresh
    heartbeats and end archived, and the skipped beats are counted as heartbeat failures."""
    store = pg_store
    w, ids = blocked_worker(store, pg_url, tmp_path, spawn, 4)
    locked, neighbours = ids[0], ids[1:]

    with row_locked(store, "SELECT id FROM jobs_hot WHERE id = ? FOR UPDATE", locked):
        worst = oldest_heartbeat_during(store, neighbours, 6.0)
    print(f"\nneighbours' oldest heartbeat while one row was locked for 6 s: {worst:.2f} s")
    assert worst < 1.5  # heartbeats every 0.3-0.5 s; the zombie timeout is 2 s
    metrics = w.metrics()
    assert metrics.get("chokaq_jobs_heartbeat_failures_total", 0) >= 3, w.log()[-3000:]
    assert "another session holds the job's row locked" in w.log()
    finish_and_check(store, tmp_path, ids, survivors=neighbours)
    assert w.alive()


def test_a_locked_registry_row_does_not_delay_the_job_heartbeats(pg_store, pg_url, tmp_path, spawn):
    """Another session holds the worker's own registry row (`workers`, SELECT ... FOR UPDATE: an
    operator's open transaction) for 3 zombie timeouts. The beat writes the jobs' heartbeats first and
    leaves a locked registry row for the next beat: every running job keeps a fresh heartbeat, no
    heartbeat failure is counted, and the row is refreshed again once the lock is gone."""
    store = pg_store
    w, ids = blocked_worker(store, pg_url, tmp_path, spawn, 3)

    with row_locked(store, "SELECT id FROM workers WHERE id = ? FOR UPDATE", "w1"):
        worst = oldest_heartbeat_during(store, ids, 6.0)
        seen_while_locked = sql(store, "SELECT last_seen_at FROM workers WHERE id = 'w1'")[0][0]
    print(f"\njobs' oldest heartbeat while the registry row was locked for 6 s: {worst:.2f} s")
    assert worst < 1.5  # heartbeats every 0.3-0.5 s; the zombie timeout is 2 s
    wait_for(
        lambda: sql(store, "SELECT last_seen_at FROM workers WHERE id = 'w1'")[0][0] > seen_while_locked,
        5,
        "the registry row refreshed after the lock",
    )
    assert w.metrics().get("chokaq_jobs_heartbeat_failures_total", 0) == 0, w.log()[-3000:]
    finish_and_check(store, tmp_path, ids, survivors=ids)
    assert w.alive()


def test_a_locked_registry_row_does_not_hold_up_shutdown(pg_store, pg_url, tmp_path, spawn):
    """SIGTERM to an idle worker while another session holds its registry row: the worker leaves the row
    and exits at once, instead of waiting on the lock for Storage.CommandTimeout (here 20 s) per try."""
    store = pg_store
    config = write_config(
        tmp_path / "chokaq.toml", **{**TROUBLE, "Storage": {**TROUBLE["Storage"], "CommandTimeout": "20s"}}
    )
    w = spawn(pg_url, config, "w1", concurrency=2)
    wait_for(lambda: sql(store, "SELECT count(*) FROM workers WHERE id = 'w1'")[0][0] == 1, 30, "registered")
    with row_locked(store, "SELECT id FROM workers WHERE id = ? FOR UPDATE", "w1"):
        start = time.monotonic()
        w.signal(signal.SIGTERM)
        assert w.wait(15) == 0, w.log()[-3000:]
        took = time.monotonic() - start
    print(f"\nshutdown with the registry row locked took {took:.2f} s")
    assert took < 8.0, w.log()[-3000:]  # the shutdown's own waits; the delete alone would take 20 s
    assert "worker registry row left in place" in w.log(), w.log()[-3000:]
    assert sql(store, "SELECT count(*) FROM workers WHERE id = 'w1'")[0][0] == 1


def test_a_half_open_connection_longer_than_the_zombie_timeout_makes_no_zombies(
    pg_store, pg_url, tmp_path, spawn, proxy
):
    """The proxy between the worker (and its sweeper) and the server stops forwarding for 3 zombie
    timeouts without closing anything: statements end at their bound instead of waiting forever, heartbeat
    failures are counted, and after the link is back no live job is judged before its worker heartbeats."""
    store = pg_store
    config = write_config(tmp_path / "chokaq.toml", **TROUBLE)
    ids = block_jobs(store, 3)
    port = free_port()
    w = spawn(proxy.url_for(pg_url), config, "w1", concurrency=4, metrics_port=port)
    wait_for(lambda: len(starts(tmp_path)) == 3, 30, "three jobs running")
    proxy.stall()
    time.sleep(6.0)
    proxy.restore()
    wait_for(lambda: max(heartbeat_ages(store, ids).values(), default=99) < 1.0, 15, "heartbeats back")
    time.sleep(1.5)  # several sweeps with the database in sight again
    assert counts(store)["dlq"] == 0, sql(store, "SELECT id, error_details FROM jobs_dlq")
    log = w.log()
    assert "did not answer within" in log, log[-3000:]
    assert "holding the zombie phase" in log or "zombie phase held" in log, log[-3000:]
    assert w.metrics().get("chokaq_jobs_heartbeat_failures_total", 0) > 0
    finish_and_check(store, tmp_path, ids, survivors=ids)
    assert w.alive()


def test_an_outage_longer_than_the_zombie_timeout_makes_no_zombies(pg_store, pg_url, tmp_path, spawn):
    """The server unreachable (connections closed, new ones refused) for longer than the zombie timeout,
    for a worker and for the sweeper (another process); the sweeper's link heals a second before the
    worker's. Judged at once, every live job would be a zombie: the sweeper waits 2 heartbeat maxima
    after it sees the database again, and the worker retries a failed beat within 2 s."""
    store = pg_store
    to_worker, to_sweeper = CuttableProxy(), CuttableProxy()
    slow_beats = {
        **TROUBLE,
        "Execution": {"HeartbeatIntervalMin": "1s", "HeartbeatIntervalMax": "1500ms"},
        "Recovery": {**TROUBLE["Recovery"], "ProcessingZombieTimeout": "5s"},
    }
    try:
        config = write_config(tmp_path / "chokaq.toml", **slow_beats)
        ids = block_jobs(store, 3)
        worker = spawn(to_worker.url_for(pg_url), config, "w1", concurrency=4, extra_args=["--no-rescue"])
        # A host that only sweeps: its worker serves a queue nobody uses.
        sweeper = spawn(to_sweeper.url_for(pg_url), config, "sweeper", concurrency=1,
                        extra_args=["--queues", "nobody", "--no-retention"])  # fmt: skip
        wait_for(lambda: len(starts(tmp_path)) == 3, 30, "three jobs running")
        time.sleep(3.5)  # the sweeper has had the database in sight for longer than it needs
        to_worker.cut()
        to_sweeper.cut()
        time.sleep(7.0)
        to_sweeper.restore()
        time.sleep(1.0)
        to_worker.restore()
        wait_for(lambda: max(heartbeat_ages(store, ids).values(), default=99) < 2.0, 15, "heartbeats back")
        time.sleep(2.0)  # sweeps every 0.5 s go on
        assert counts(store)["dlq"] == 0, sql(store, "SELECT id, error_details FROM jobs_dlq")
        assert "zombie phase held" in sweeper.log()
        finish_and_check(store, tmp_path, ids, survivors=ids)
        assert worker.alive() and sweeper.alive()
    finally:
        to_worker.close()
        to_sweeper.close()


# ------------------------------------------------------------------------------------ a paused server


@pytest.fixture
def private_pg() -> Iterator[tuple[str, int]]:
    """A PostgreSQL cluster of this test's own (the shared server is never paused): (url, postmaster pid)."""
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not bins:
        pytest.skip("no PostgreSQL server binaries (initdb) on this machine")
    bindir = Path(bins[-1]).parent
    root = Path(tempfile.mkdtemp(prefix="chokaq-pg-"))
    data = root / "data"
    as_owner: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root
        shutil.chown(root, "postgres", "postgres")
        as_owner = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    run = {"check": True, "capture_output": True, "timeout": 120}
    subprocess.run([*as_owner, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                    "--no-sync"], **run)  # fmt: skip
    options = f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60"
    subprocess.run(
        [*as_owner, str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-w", "-l", str(root / "log"),
         "start"], **run)  # fmt: skip
    pid = 0
    try:
        url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        with Store(url, pool_size=1) as s:
            migrate(s)
        pid = int((data / "postmaster.pid").read_text().split()[0])
        yield url, pid
    finally:
        if pid:
            _signal_all(_cluster_pids(pid), signal.SIGCONT)
        subprocess.run([*as_owner, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, timeout=60)  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)


def _cluster_pids(postmaster: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(postmaster)], capture_output=True, text=True)
    return [postmaster, *(int(p) for p in out.stdout.split())]


def _signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # a backend that just ended
            os.kill(pid, sig)


@contextlib.contextmanager
def paused(postmaster: int) -> Iterator[None]:
    pids = _cluster_pids(postmaster)
    try:
        _signal_all(pids, signal.SIGSTOP)
        yield
    finally:
        _signal_all(_cluster_pids(postmaster) + pids, signal.SIGCONT)


def test_a_server_paused_longer_than_the_zombie_timeout_makes_no_zombies(private_pg, tmp_path, spawn):
    """Every process of the server stopped (SIGSTOP) for 3 zombie timeouts, as a frozen VM: the worker's
    calls end at their bounds and are counted; statements already sent run when the server resumes, and a
    sweep decided before the pause moves nothing then; no live job becomes a zombie."""
    url, postmaster = private_pg
    config = write_config(tmp_path / "chokaq.toml", **TROUBLE)
    with Store(url, pool_size=2) as store:
        ids = block_jobs(store, 3)
        port = free_port()
        w = spawn(url, config, "w1", concurrency=4, metrics_port=port)
        wait_for(lambda: len(starts(tmp_path)) == 3, 30, "three jobs running")
        time.sleep(1.0)  # sweeps run with the database in sight, heartbeats fresh
        store.pool.discard_idle()
        with paused(postmaster):
            time.sleep(6.0)
        wait_for(lambda: max(heartbeat_ages(store, ids).values(), default=99) < 1.0, 15, "heartbeats back")
        time.sleep(1.5)
        assert counts(store)["dlq"] == 0, sql(store, "SELECT id, error_details FROM jobs_dlq")
        log = w.log()
        assert "did not answer within" in log, log[-3000:]
        assert w.metrics().get("chokaq_jobs_heartbeat_failures_total", 0) > 0
        finish_and_check(store, tmp_path, ids, survivors=ids)
        assert w.alive()
