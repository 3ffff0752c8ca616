"""Exactly one job per tick across real `chokaq serve` processes killed with SIGKILL and restarted, no leader:
three processes on PostgreSQL, two on SQLite, a schedule of every second (declared in code, so every
process writes it at start).

1. Churn: every few seconds one live process is killed (kill -9) and a dead one restarted; one at least
   always runs. No tick may be missed or late, and none may run twice.
2. Outage: every process killed, none running for longer than the misfire grace.
3. Restart: the schedule's misfire policy (catch_up 3 by default) runs exactly that many of the missed
   ticks, late; the ticks within the grace run on time; the rest are counted as missed.

The ledger and the jobs are counted at the end: one ledger row per tick, one job per ledger row (its
idempotency key names the tick), wherever the job is now (hot, archive or DLQ: killed workers leave
zombies).

The durations are parameters (environment): CI runs about 20 s of churn and 12 s of outage with a 5 s
grace. The issue's full run, by hand (docs/schedules.md, "Proof"):

    CHOKAQ_SCHEDULE_SOAK_S=600 CHOKAQ_SCHEDULE_OUTAGE_S=120 CHOKAQ_SCHEDULE_GRACE_S=30 \\
      .venv/bin/python -m pytest tests/crash/test_schedules_kill.py -s -p no:randomly --timeout 1800
"""

from __future__ import annotations

import itertools
import json
import os
import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chokaq_ops.schedules import tick_key
from chokaq_ops.storage import Store
from tests.support.dbprobe import sql
from tests.support.handlers_schedule import SCHEDULE
from tests.support.served import FAST_TOML, Served

pytestmark = pytest.mark.slow

SOAK_S = float(os.environ.get("CHOKAQ_SCHEDULE_SOAK_S", "20"))
OUTAGE_S = float(os.environ.get("CHOKAQ_SCHEDULE_OUTAGE_S", "12"))
GRACE_S = float(os.environ.get("CHOKAQ_SCHEDULE_GRACE_S", "5"))
AFTER_S = float(os.environ.get("CHOKAQ_SCHEDULE_AFTER_S", "5"))
CATCH_UP = 3
PROCESSES = {"sqlite": 2, "postgresql": 3}


class Fleet:
    """The serve processes of one test; each incarnation gets its own log (serve-<slot>-<n>.log)."""

    def __init__(self, url: str, workdir: Path, size: int) -> None:
        self.url, self.workdir = url, workdir
        self.slots: list[Served | None] = [None] * size
        self.started = 0
        self.timeline: list[tuple[float, str]] = []

    def start(self, slot: int) -> None:
        self.started += 1
        self.slots[slot] = Served(
            self.url, self.workdir, f"{slot}-{self.started}", "--handlers", "tests.support.handlers_schedule"
        )
        self.timeline.append((time.time(), f"start {slot}"))

    def kill(self, slot: int) -> None:
        proc = self.slots[slot]
        assert proc is not None
        proc.kill()
        proc.stop()
        self.slots[slot] = None
        self.timeline.append((time.time(), f"kill {slot}"))

    def alive(self) -> list[int]:
        return [i for i, p in enumerate(self.slots) if p is not None]

    def dead(self) -> list[int]:
        return [i for i, p in enumerate(self.slots) if p is None]

    def close(self) -> None:
        for proc in self.slots:
            if proc is not None:
                proc.stop()


@pytest.fixture
def fleet_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("CHOKAQ_TEST_MISFIRE", "catch_up")
    monkeypatch.setenv("CHOKAQ_TEST_CATCH_UP", str(CATCH_UP))
    monkeypatch.setenv("CHOKAQ_TEST_GRACE", str(GRACE_S))
    # Checks five times a second; the grace of the settings is the schedule's own (declared in code).
    (tmp_path / "chokaq.toml").write_text(
        FAST_TOML + '[Schedules]\nCheckInterval = "200ms"\nMisfireGrace = "2s"\n'
        '[Retention]\nInterval = "1h"\n'
    )
    return tmp_path


def test_one_job_per_tick_while_serve_processes_are_killed_and_restarted(db_url, store, fleet_env):
    assert OUTAGE_S > GRACE_S + CATCH_UP + 1, (
        "the outage must outlast the grace and the catch-up, or nothing is missed"
    )
    dialect = store.dialect.name
    fleet = Fleet(db_url, fleet_env, PROCESSES[dialect])
    rng = random.Random(29)
    try:
        for slot in range(len(fleet.slots)):
            fleet.start(slot)
        # 1. Churn: a kill every 1.5-3.5 s while another process lives; the dead come back 1-2 s later.
        churn_end = time.time() + SOAK_S
        died_at: dict[int, float] = {}
        while time.time() < churn_end:
            time.sleep(rng.uniform(1.5, 3.5))
            for slot in fleet.dead():
                if time.time() - died_at[slot] >= 1.0:
                    fleet.start(slot)
            if len(fleet.alive()) >= 2:
                victim = rng.choice(fleet.alive())
                fleet.kill(victim)
                died_at[victim] = time.time()
        for slot in fleet.dead():
            fleet.start(slot)
        # 2. Outage: nobody runs.
        outage_start = time.time()
        for slot in fleet.alive():
            fleet.kill(slot)
        time.sleep(OUTAGE_S)
        # 3. Restart (the first process back applies the misfire policy), then run a while.
        restart = time.time()
        for slot in fleet.dead():
            fleet.start(slot)
        time.sleep(AFTER_S)
        end = time.time()
        for slot in fleet.alive():
            fleet.kill(slot)
    finally:
        fleet.close()

    rows = sql(
        store, "SELECT tick_at, late, job_id FROM schedule_runs WHERE schedule = ? ORDER BY tick_at", SCHEDULE
    )
    ticks = [_utc(store, t) for t, _, _ in rows]
    late = {_utc(store, t) for t, is_late, _ in rows if is_late}
    ledger_jobs = [j for _, _, j in rows]
    report = _report(fleet, dialect, ticks, late, outage_start, restart, end)
    report |= {"jobs": len(_job_keys(store)), "missed_total": store.get_schedule(SCHEDULE).missed_total}
    print(json.dumps(report, indent=2))

    # Exactly one job per tick: one ledger row per tick, one job per row, keyed by its tick, and no other.
    keys = _job_keys(store)
    assert len(ticks) == len(set(ticks)) and None not in ledger_jobs
    assert sorted(keys.values()) == sorted(tick_key(SCHEDULE, t) for t in ticks), "jobs and ledger differ"
    assert set(keys) == set(ledger_jobs) and len(keys) == len(ticks)

    # None missed while a process ran: consecutive seconds everywhere except one gap, in the outage.
    gaps = [(a, b) for a, b in itertools.pairwise(ticks) if b - a != timedelta(seconds=1)]
    assert len(gaps) == 1, f"ticks missing outside the outage: {gaps}"
    before, after = gaps[0]
    outage = (_at(outage_start), _at(restart))
    assert outage[0] - timedelta(seconds=2) <= before <= outage[0] + timedelta(seconds=2), (before, outage)
    assert outage[0] < after < outage[1] + timedelta(seconds=AFTER_S)
    # The misfire policy after the outage: exactly the newest CATCH_UP missed ticks ran, late, right after
    # the gap; every other tick ran on time.
    assert sorted(late) == [after + timedelta(seconds=i) for i in range(CATCH_UP)], sorted(late)
    missed = int((after - before).total_seconds()) - 1
    schedule = store.get_schedule(SCHEDULE)
    # Missed: the outage's ticks older than the grace at the first check after it, less the ones run late.
    assert schedule.missed_total == missed and missed >= OUTAGE_S - GRACE_S - CATCH_UP - 1
    assert schedule.runs_total == len(ticks) and schedule.source == "code"
    assert ticks[-1] >= _at(end) - timedelta(seconds=3)  # it kept going to the end


def _utc(store: Store, value: object) -> datetime:
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    return store.dialect.parse_time(value)  # type: ignore[return-value]


def _at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def _job_keys(store: Store) -> dict[str, str]:
    """Every job of the schedule, wherever it is now: id -> idempotency key."""
    out: dict[str, str] = {}
    for table in ("jobs_hot", "jobs_archive", "jobs_dlq"):
        for job_id, key in sql(store, f"SELECT id, idempotency_key FROM {table} WHERE type = 'soak.tick.v1'"):
            assert job_id not in out, f"job {job_id} in two tables"
            out[job_id] = key
    return out


def _report(
    fleet: Fleet, dialect: str, ticks: list, late: set, outage: float, restart: float, end: float
) -> dict:
    kills = sum(1 for _, what in fleet.timeline if what.startswith("kill"))
    return {
        "dialect": dialect,
        "processes": len(fleet.slots),
        "process_starts": fleet.started,
        "kills": kills,
        "seconds": round(end - fleet.timeline[0][0], 1),
        "outage_s": round(restart - outage, 1),
        "ledger_rows": len(ticks),
        "late": len(late),
        "first_tick": ticks[0].isoformat() if ticks else None,
        "last_tick": ticks[-1].isoformat() if ticks else None,
    }
