"""`chokaq enqueue`, `chokaq jobs ls|show` and `chokaq worker` end to end, as real processes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest
from worker_support import settled

from chokaq_ops.cli import main
from tests.support.cli import record, rows

CHOKAQ = os.environ.get("CHOKAQ_TEST_CLI") or str(Path(sys.executable).with_name("chokaq"))
SEEDS_PAYLOAD = '{"to": "ops@example.com" "subject": "Weekly report"}'


def chokaq(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CHOKAQ, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_enqueue_prints_the_id_and_jobs_show_finds_it(db_url, capsys):
    assert main(["enqueue", "report.build", '{"week": 48}', "--db", db_url, "--queue", "reports",
                 "--priority", "20", "--tags", "weekly,ops", "--delay", "10m"]) == 0  # fmt: skip
    job_id = capsys.readouterr().out.strip()
    assert main(["jobs", "show", job_id, "--db", db_url, "--format", "json"]) == 0
    job = record(capsys.readouterr().out)
    assert (job["id"], job["location"], job["status"], job["queue"], job["priority"], job["tags"]) == (
        job_id, "hot", "pending", "reports", 20, "weekly,ops",
    )  # fmt: skip
    assert job["payload"] == '{"week": 48}' and job["created_by"].startswith("cli:")
    assert main(["jobs", "ls", "--db", db_url, "--queue", "reports", "--format", "json"]) == 0
    assert [j["id"] for j in rows(capsys.readouterr().out)] == [job_id]
    assert main(["jobs", "ls", "--db", db_url, "--queue", "nope", "--format", "json"]) == 0
    assert rows(capsys.readouterr().out) == []


def test_enqueue_invalid_json_is_stored_and_idempotency_returns_the_holder(db_url, capsys):
    assert main(["enqueue", "mail.send", SEEDS_PAYLOAD, "--db", db_url, "--idempotency-key", "k-1"]) == 0
    first = capsys.readouterr().out.strip()
    assert main(["enqueue", "mail.send", "{}", "--db", db_url, "--idempotency-key", "k-1"]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == first and "already holds idempotency key" in out.err
    assert main(["enqueue", "mail.send", "{}", "--db", db_url, "--id", first]) == 2  # conflict
    assert "already exists" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        ["enqueue", "t", "{}", "--priority", "-1"],
        ["enqueue", "t", "{}", "--delay", "soon"],
        ["enqueue", "t", "{}", "--at", "2026-01-01T09:00"],  # no zone
        ["enqueue", "t", "{}", "--queue", ""],
        ["jobs", "ls", "--status", "dead", "--location", "hot"],
        ["jobs", "ls", "--sort", "payload"],
        ["jobs", "ls", "--page-size", "5000"],
        ["jobs", "ls", "--status", "bogus"],
    ],
)
def test_bad_input_exits_2_and_changes_nothing(db_url, capsys, args):
    assert main([*args, "--db", db_url]) == 2
    assert "error" in capsys.readouterr().err
    assert main(["jobs", "ls", "--db", db_url, "--format", "json"]) == 0
    assert rows(capsys.readouterr().out) == []


def test_enqueue_reads_the_payload_from_stdin(db_url):
    done = chokaq("enqueue", "t", "-", "--db", db_url, stdin='{"from": "stdin"}\n')
    assert done.returncode == 0, done.stderr
    shown = chokaq("jobs", "show", done.stdout.strip(), "--db", db_url, "--format", "json")
    assert json.loads(record(shown.stdout)["payload"]) == {"from": "stdin"}


HANDLERS = """
    import json, pathlib
    from chokaq_ops import job

    @job("cli.echo")
    def echo(payload, ctx):
        pathlib.Path(payload["out"]).write_text(json.dumps({"id": ctx.job_id, "attempt": ctx.attempt}))
"""


def test_worker_process_drains_jobs_and_stops_on_sigterm(db_url, tmp_path, store, capsys):
    (tmp_path / "cli_echo_handlers.py").write_text(textwrap.dedent(HANDLERS))
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    env.update(CHOKAQ_WORKER__POLLING_INTERVAL="0.05", CHOKAQ_WORKER__SHUTDOWN_GRACE_PERIOD="5")
    for i in range(3):
        assert (
            main(["enqueue", "cli.echo", json.dumps({"out": str(tmp_path / f"out{i}.json")}), "--db", db_url])
            == 0
        )
    assert main(["enqueue", "cli.echo", SEEDS_PAYLOAD, "--db", db_url]) == 0
    *ids, bad = capsys.readouterr().out.split()
    port = _free_port()
    proc = subprocess.Popen(
        [CHOKAQ, "worker", "--db", db_url, "--handlers", "cli_echo_handlers",
         "--concurrency", "2", "--no-retention", "--metrics-port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for job_id in ids:
            settled(store, job_id, "archive", timeout=30)
        dead = settled(store, bad, "dlq", timeout=30)
        assert dead["failure_reason"] == "Fatal" and "Expecting ',' delimiter" in dead["error_details"]
        assert {json.loads((tmp_path / f"out{i}.json").read_text())["id"] for i in range(3)} == set(ids)
        # The worker counts an outcome once its write has returned, so a row can be visible here a
        # moment before its counter moves: scrape until both counters show (or give up after 10 s).
        succeeded = 'chokaq_jobs_succeeded_total{queue="default",type="cli.echo"} 3.0'
        failed = 'chokaq_jobs_failed_total{queue="default",reason="Fatal",type="cli.echo"} 1.0'
        deadline = time.monotonic() + 10
        while True:
            scraped = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
            if (succeeded in scraped and failed in scraped) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert succeeded in scraped
        assert failed in scraped
        assert "chokaq_queue_jobs" in scraped  # gauges read from the database at scrape time
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "chokaq: worker " in out and "concurrency 2" in out
    assert "worker stopped" in err
    assert main(["jobs", "ls", "--db", db_url, "--status", "succeeded", "--format", "json"]) == 0
    assert sorted(j["id"] for j in rows(capsys.readouterr().out)) == sorted(ids)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_worker_refuses_to_start_without_handlers(db_url):
    done = chokaq("worker", "--db", db_url)
    assert done.returncode == 2 and "no job handlers" in done.stderr
    done = chokaq("worker", "--db", db_url, "--handlers", "no_such_module_anywhere")
    assert done.returncode == 2 and "no_such_module_anywhere" in done.stderr


def test_jobs_ls_table_pages(db_url, capsys):
    for i in range(3):
        assert main(["enqueue", "t", "{}", "--db", db_url, "--id", f"job-{i}"]) == 0
    capsys.readouterr()
    assert main(["jobs", "ls", "--db", db_url, "--page-size", "2", "--sort", "id", "--asc"]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert lines[0].split()[:3] == ["ID", "QUEUE", "TYPE"]
    assert [ln.split()[0] for ln in lines[1:]] == ["job-0", "job-1"]
    assert out.err == "-- 1-2 of 3 jobs in hot (page 1 of 2; --page 2 for more)\n"


STUCK = """
    import pathlib
    from chokaq_ops import job

    @job("cli.stuck")
    def stuck(payload, ctx):
        pathlib.Path(payload["out"]).write_text("started")
        ctx.cancelled.wait(60)
"""


def test_a_second_signal_ends_the_grace_period(db_url, tmp_path, store, capsys):
    (tmp_path / "cli_stuck_handlers.py").write_text(textwrap.dedent(STUCK))
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    env.update(CHOKAQ_WORKER__POLLING_INTERVAL="0.05", CHOKAQ_WORKER__SHUTDOWN_GRACE_PERIOD="60")
    marker = tmp_path / "started"
    assert main(["enqueue", "cli.stuck", json.dumps({"out": str(marker)}), "--db", db_url]) == 0
    job_id = capsys.readouterr().out.strip()
    proc = subprocess.Popen(
        [CHOKAQ, "worker", "--db", db_url, "--handlers", "cli_stuck_handlers", "--no-retention",
         "--no-rescue"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), "the handler never started"
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert proc.poll() is None  # waiting for the handler (grace period 60 s)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "ending the shutdown grace period now" in err
    row = store.get_job(job_id)
    assert (row["status"], row["attempt_count"], row["worker_id"]) == ("pending", 1, None)
