"""`chokaq demo` on PostgreSQL (the notebook tests run it on the embedded SQLite default); its refusals."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from chokaq_ops.cli import main
from chokaq_ops.models import DlqFilter, FailureReason, NewJob
from chokaq_ops.storage import Store
from chokaq_ops.storage.migrate import migrate
from tests.support.cli import record

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
