"""What a newcomer meets on the command line: a mistyped SQLite path, relative times, a wrong flag, the
zombie evidence in `dlq show`, and the one footer every listing prints."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chokaq_ops.cli import main
from chokaq_ops.cli.dlq import when
from chokaq_ops.engine.rescue import Rescuer
from chokaq_ops.models import Actor
from chokaq_ops.settings import Settings
from chokaq_ops.storage import Store
from chokaq_ops.storage.migrate import migrate
from tests.support.cli import chokaq, lines, record, rows
from tests.support.dbprobe import age, processing
from tests.support.seeds import seed_dlq

READERS = (
    ["dlq", "ls"],
    ["dlq", "show", "01J9Z8K3M2"],
    ["dlq", "summary"],
    ["dlq", "resurrect", "--all", "--dry-run"],
    ["dlq", "purge", "--all"],
    ["jobs", "ls"],
    ["jobs", "show", "01J9Z8K3M2"],
    ["queues", "ls"],
    ["queues", "pause", "mail"],
    ["token", "list"],
    ["token", "revoke", "someone"],
    ["archive", "purge", "--older-than", "30d", "--dry-run"],
    ["rescue"],
)
FOOTER = re.compile(r"-- \d+-\d+ of \d+ [a-z ]+( \(page \d+ of \d+(; --page \d+ for more)?\))?\n")


@pytest.mark.parametrize("argv", READERS, ids=[" ".join(a[:2]) for a in READERS])
def test_a_mistyped_sqlite_path_is_refused_and_nothing_is_created(tmp_path, capsys, argv) -> None:
    missing = tmp_path / "nonexistent_dir" / "x.db"
    capsys.readouterr()
    assert main([*argv, "--db", f"sqlite:///{missing}"]) == 2
    err = capsys.readouterr().err
    assert f"no SQLite database at {missing}" in err and "chokaq migrate" in err
    assert not missing.parent.exists(), "the directory and an empty database were created"


def test_a_relative_sqlite_path_is_named_in_full(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["dlq", "ls", "--db", "sqlite:///nonexistent_dir/x.db"]) == 2
    assert f"no SQLite database at {tmp_path / 'nonexistent_dir' / 'x.db'}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_the_commands_that_may_create_a_database_do(tmp_path, capsys) -> None:
    for name, argv in {
        "migrate": ["migrate"],
        "enqueue": ["enqueue", "mail.send.v1", "{}"],
        "token": ["token", "create", "first", "--role", "admin"],
    }.items():
        path = tmp_path / name / "new.db"
        assert main([*argv, "--db", f"sqlite:///{path}"]) == 0, capsys.readouterr().err
        assert path.is_file()
        assert main(["jobs", "ls", "--db", f"sqlite:///{path}"]) == 0, "readable once it exists"


def test_relative_times_accept_the_forms_the_help_names() -> None:
    now = datetime.now(UTC)
    for text, back in (("24h", 86_400), ("24h ago", 86_400), (" 90m AGO ", 5_400), ("1h30m ago", 5_400)):
        assert abs((now - when(text)).total_seconds() - back) < 5, text
    assert when("2026-05-01T00:00:00Z") == datetime(2026, 5, 1, tzinfo=UTC)
    assert when("2026-05-01T02:00:00+02:00") == datetime(2026, 5, 1, tzinfo=UTC)
    assert when("yesterday") == datetime.combine(now.date(), datetime.min.time(), UTC) - timedelta(days=1)
    for bad in ("ago", "-24h", "24 hours ago", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="24h ago"):
            when(bad)
    # A time without a zone would be guessed: refused, saying how to fix it.
    with pytest.raises(argparse.ArgumentTypeError, match="no timezone"):
        when("2026-05-01T00:00:00")


def test_failed_from_filters_by_a_relative_time(capsys, store, db_url) -> None:
    [old, new] = seed_dlq(store, 2, queue="mail")
    age(store, "jobs_dlq", [old], 2 * 86_400, "failed_at")
    code, out, _ = chokaq(capsys, db_url, "dlq", "ls", "--failed-from", "24h ago", "--format", "json")
    assert code == 0 and [j["id"] for j in rows(out)] == [new]
    code, out, _ = chokaq(capsys, db_url, "dlq", "ls", "--failed-to", "1d ago", "--format", "json")
    assert code == 0 and [j["id"] for j in rows(out)] == [old]
    code, _, err = chokaq(capsys, db_url, "dlq", "ls", "--failed-from", "2026-05-01 00:00")
    assert code == 2
    assert err.startswith("usage: chokaq dlq ls") and "no timezone" in err


@pytest.mark.parametrize(
    ("argv", "usage", "unknown"),
    [
        (["dlq", "ls", "--bogus"], "usage: chokaq dlq ls", "--bogus"),
        (["jobs", "show", "x", "--reason", "Zombie"], "usage: chokaq jobs show", "--reason Zombie"),
        (["token", "list", "--role", "admin"], "usage: chokaq token list", "--role admin"),
        (["migrate", "--force"], "usage: chokaq migrate", "--force"),
    ],
)
def test_a_wrong_flag_prints_the_subcommands_usage(capsys, argv, usage, unknown) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(usage) and err.splitlines()[-1] == f"chokaq: error: unrecognized arguments: {unknown}"
    )


def _record(out: str) -> dict[str, str]:
    head = out.split("\n\n", 1)[0]
    return dict(line.split(None, 1) for line in head.splitlines())


def test_dlq_show_of_a_zombie_says_what_its_message_says(capsys, store, db_url) -> None:
    [job_id] = processing(store, "host-a:1", 1, prefix="z")
    age(store, "jobs_hot", [job_id], 100, "started_at")
    age(store, "jobs_hot", [job_id], 40, "heartbeat_at", "updated_at")  # ran 60 s, then went silent
    settings = Settings().with_overrides(
        {
            "execution.heartbeat_interval_min": 0.2,
            "execution.heartbeat_interval_max": 0.3,
            "recovery.processing_zombie_timeout": 30,
        }
    )
    assert Rescuer(store, settings).run().archived_ids == [job_id]

    code, out, _ = chokaq(capsys, db_url, "dlq", "show", job_id)
    assert code == 0
    shown, message = _record(out), out.split("\n\n", 1)[1]
    # The heartbeat time, the runtime and the heartbeat age read the same in the fields and the message.
    assert f"last heartbeat {shown['heartbeat_at']} (" in message
    runtime = float(re.search(r"runtime ([\d.]+)s", message).group(1))
    assert float(shown["runtime_seconds"]) == pytest.approx(runtime, abs=0.05) == pytest.approx(60, abs=1)
    silent = float(re.search(r"\(([\d.]+)s before detection\)", message).group(1))
    assert float(shown["heartbeat_age_seconds"]) == pytest.approx(silent, abs=0.05)
    assert re.fullmatch(r"\d+(\.\d)?", shown["duration_ms"]), shown["duration_ms"]
    assert float(shown["duration_ms"]) / 1000 == pytest.approx(float(shown["runtime_seconds"]), abs=0.001)
    assert shown["error_group"].startswith("Zombie detected: heartbeat expired")
    assert "@" not in shown["error_group"] and not shown["error_group"].endswith("-")

    # `jobs show` prints the same fields in the same order and spelling (tags: `-` in both).
    code, out, _ = chokaq(capsys, db_url, "jobs", "show", job_id)
    general = _record(out.split("\nerror_details:", 1)[0])
    assert shown["tags"] == general["tags"] == "-"
    assert [k for k in shown if k in general] == list(general)
    assert {k: shown[k] for k in general} == general

    code, out, _ = chokaq(capsys, db_url, "dlq", "show", job_id, "--format", "json")
    evidence = record(out)
    assert evidence["runtime_seconds"] == float(shown["runtime_seconds"])
    assert evidence["heartbeat_age_seconds"] == float(shown["heartbeat_age_seconds"])


def test_every_listing_ends_with_the_same_footer(capsys, store, db_url) -> None:
    seed_dlq(store, 3, queue="mail")
    store.create_token("reader-1", "reader", actor=Actor("test"))
    expected = {
        ("dlq", "ls", "--limit", "2"): "-- 1-2 of 3 dead jobs (page 1 of 2; --page 2 for more)\n",
        ("jobs", "ls", "--location", "dlq", "--page-size", "2", "--page", "2"): (
            "-- 3-3 of 3 dead jobs (page 2 of 2)\n"
        ),
        ("jobs", "ls"): "-- 0-0 of 0 jobs in hot (page 1 of 1)\n",
        ("token", "list"): "-- 1-1 of 1 tokens\n",
    }
    for argv, footer in expected.items():
        code, _, err = chokaq(capsys, db_url, *argv)
        assert code == 0 and err == footer and FOOTER.fullmatch(err), (argv, err)
    code, out, err = chokaq(capsys, db_url, "queues", "ls")
    rows = len(out.splitlines()) - 1
    assert code == 0 and err == f"-- 1-{rows} of {rows} queues\n"


def test_json_output_has_no_footer(capsys, store, db_url) -> None:
    seed_dlq(store, 1, queue="mail")
    for argv in (["dlq", "ls"], ["jobs", "ls"], ["queues", "ls"], ["token", "list"]):
        code, out, err = chokaq(capsys, db_url, *argv, "--format", "json")
        got = lines(out)  # a row per item, then the final line; nothing on stderr
        assert code == 0 and err == "" and [g["event"] for g in got][-1] == "finished"
        assert {g["event"] for g in got[:-1]} <= {"row"} and got[-1]["rows"] == len(got) - 1


def test_times_in_tables_are_utc_to_the_millisecond(capsys, store, db_url) -> None:
    [job_id] = seed_dlq(store, 1, queue="mail")
    _, out, _ = chokaq(capsys, db_url, "dlq", "ls")
    failed = re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", out)
    assert failed, out
    parsed = datetime.fromisoformat(failed.group(0).replace("Z", "+00:00"))
    assert abs(parsed - store.get_job(job_id)["failed_at"]) < timedelta(milliseconds=1)


def test_a_reader_that_stops_early_is_no_error(tmp_path) -> None:
    """`chokaq token list --format json | grep -q NAME` (as `make run` does) must not print a traceback when
    grep stops reading."""
    url = f"sqlite:///{tmp_path / 'tokens.db'}"
    with Store(url, pool_size=1) as store:
        migrate(store)
        for i in range(400):  # more output than a pipe holds, so the writer meets the closed end
            store.create_token(f"token-{i:03d}-{'x' * 60}", "reader", actor=Actor("test"))
    chokaq = str(Path(sys.executable).with_name("chokaq"))
    proc = subprocess.Popen(
        [chokaq, "token", "list", "--db", url, "--format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(30) == 141 and "Traceback" not in err and err == "", err
