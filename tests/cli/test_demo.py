"""`chokaq demo` on PostgreSQL (the notebook tests run it on the embedded SQLite default); its refusals."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chokaq_ops.cli import main
from chokaq_ops.models import DlqFilter, FailureReason, NewJob
from chokaq_ops.storage import Store
from chokaq_ops.storage.migrate import migrate
from tests.support.cli import record
from tests.support.dbprobe import sql

CHOKAQ = str(Path(sys.executable).with_name("chokaq"))


def test_demo_on_postgresql(pg_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHOKAQ_")}
    done = subprocess.run(
        [CHOKAQ, "demo", "--db", pg_url, "--jobs", "60", "--history", "2d", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    made = record(done.stdout)
    assert made["hot"] == 0 and made["archive"] > 0
    assert {"MaxRetriesExceeded", "Fatal", "Timeout", "Zombie", "Cancelled"} <= set(made["dlq_by_reason"])
    assert made["dlq_by_reason"]["Zombie"] == 6, "three dead workers: 3 renders, a settlement, 2 renders"
    with Store(pg_url, pool_size=1) as store:
        summary = store.dlq_summary()
        first = min(e["first_failed_at"] for e in summary["by_reason"])
        last = max(e["last_failed_at"] for e in summary["by_reason"])
        span = (last - first).total_seconds()
        assert 86_400 < span <= 2 * 86_400 + 1, "spread over the --history window, ending now"
        assert 0 <= (store.now() - last).total_seconds() < 12 * 3600, "the history ends now, not later"
        assert summary["total"] == store.stats()["dlq"]
        zombies = store.list_dlq(DlqFilter(reason=FailureReason.Zombie)).items
        for (
            z
        ) in zombies:  # moved into history with the message quoting the moved heartbeat (PostgreSQL's SQL)
            stamp = z["heartbeat_at"].isoformat(timespec="milliseconds").replace("+00:00", "Z")
            assert f"last heartbeat {stamp} " in z["error_details"]


def test_demo_refuses_a_database_with_jobs_and_bad_arguments(tmp_path: Path, capsys) -> None:
    url = f"sqlite:///{tmp_path / 'busy.db'}"
    with Store(url, pool_size=1) as store:
        migrate(store)
        store.enqueue([NewJob(type="keep.me.v1", id="keep-1")])
    assert main(["demo", "--db", url, "--jobs", "60"]) == 2
    assert "already holds 1 jobs" in capsys.readouterr().err
    assert main(["demo", "--db", url, "--jobs", "10"]) == 2
    with Store(url, pool_size=1) as store:
        assert store.get_job("keep-1")["location"] == "hot"


@pytest.mark.slow  # real workers for the real part
def test_demo_beyond_the_real_run_copies_outcomes_and_moves_failure_history(tmp_path: Path) -> None:
    """`--jobs` beyond the real run: copies of finished jobs at their own moments, their failure history
    with them; every failure row of every job lies in the history window, before the job's end."""
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHOKAQ_")}
    done = subprocess.run(
        [
            CHOKAQ,
            "demo",
            "--db",
            url,
            "--jobs",
            "400",
            "--real-jobs",
            "100",
            "--history",
            "2d",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    made = record(done.stdout)
    assert made["copies"] == 300 and made["archive"] + made["dlq"] >= 400
    with Store(url, pool_size=1) as store:
        rows = sql(
            store,
            """SELECT f.job_id, f.failed_at, coalesce(a.finished_at, d.failed_at)
               FROM job_failures f LEFT JOIN jobs_archive a ON a.id = f.job_id
               LEFT JOIN jobs_dlq d ON d.id = f.job_id""",
        )
        now = store.now()
        assert rows and all(end is not None for _, _, end in rows), "every failure belongs to a kept job"
        for job_id, failed, end in rows:
            failed_at, end_at = _utc(failed), _utc(end)
            assert failed_at <= end_at + timedelta(seconds=1), (job_id, failed, end)
            assert now - timedelta(days=2, hours=1) <= failed_at <= now, (job_id, failed)
        copies = sql(store, "SELECT count(*) FROM jobs_archive WHERE id LIKE '%.c%'")[0][0]
        copies += sql(store, "SELECT count(*) FROM jobs_dlq WHERE id LIKE '%.c%'")[0][0]
        assert copies == 300
        copied_failures = sql(store, "SELECT count(*) FROM job_failures WHERE job_id LIKE '%.c%'")[0][0]
        assert copied_failures > 0, "copies carry their originals' failure history"


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(str(text)).replace(tzinfo=UTC)
