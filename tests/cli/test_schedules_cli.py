"""`chokaq schedules ls|show|add|pause|resume|run|rm` on both databases: output, audit under --actor, and
usage errors (a bad cron expression or time zone) exiting 2 with a message and no row written."""

from __future__ import annotations

from chokaq_ops.models import Actor
from tests.support.cli import chokaq, record, rows
from tests.support.dbprobe import scalar, sql


def test_add_list_pause_resume_run_and_remove(capsys, store, db_url):
    code, out, err = chokaq(
        capsys,
        db_url,
        "schedules", "add", "reports.nightly", "report.v1", "30 2 * * *",
        "--tz", "Europe/Berlin", "--payload", '{"region": "eu"}', "--misfire", "catch_up", "--catch-up", "3",
        "--grace", "5m", "--actor", "ann", "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    made = record(out)
    assert (made["cron"], made["tz"], made["catch_up_max"], made["misfire_grace_seconds"]) == (
        "30 2 * * *", "Europe/Berlin", 3, 300.0
    )  # fmt: skip
    assert len(made["next_runs"]) == 5 and made["created_by"] == "ann"
    code, out, _ = chokaq(capsys, db_url, "schedules", "ls")
    assert code == 0 and out.splitlines()[0].split()[:4] == ["NAME", "TYPE", "CRON", "TZ"]
    assert "reports.nightly" in out and "Europe/Berlin" in out
    code, out, _ = chokaq(
        capsys, db_url, "schedules", "pause", "reports.nightly", "--actor", "ann", "--format", "json"
    )
    assert code == 0 and record(out)["paused"] is True and record(out)["next_runs"] == []
    code, out, _ = chokaq(capsys, db_url, "schedules", "ls", "--paused", "--format", "json")
    assert [s["name"] for s in rows(out)] == ["reports.nightly"]
    code, out, _ = chokaq(capsys, db_url, "schedules", "run", "reports.nightly", "--actor", "ann")
    job_id = out.strip()
    assert code == 0 and store.get_job(job_id).type == "report.v1"
    code, out, _ = chokaq(capsys, db_url, "schedules", "resume", "reports.nightly", "--actor", "ann")
    assert code == 0 and "False" in out
    code, out, _ = chokaq(capsys, db_url, "schedules", "show", "reports.nightly")
    assert code == 0 and job_id in out and "manual" in out and "catch_up" in out
    code, out, _ = chokaq(capsys, db_url, "schedules", "show", "reports.nightly", "--format", "json")
    shown = record(out)
    assert shown["last_job_id"] == job_id and [r["job_id"] for r in shown["recent_runs"]] == [job_id]
    code, _, err = chokaq(capsys, db_url, "schedules", "rm", "reports.nightly", "--actor", "ann")
    assert code == 0 and "deleted" in err
    assert scalar(store, "SELECT count(*) FROM schedules") == 0
    actions = [a for (a,) in sql(store, "SELECT action FROM audit_log WHERE actor = 'ann' ORDER BY id")]
    assert actions == [
        "schedule_create", "schedule_pause", "schedule_trigger", "schedule_resume", "schedule_delete"
    ]  # fmt: skip


def test_usage_errors_exit_2_naming_the_problem_and_write_nothing(capsys, store, db_url):
    for argv, words in (
        (("add", "x", "t.v1", "* * *"), "fields"),
        (("add", "x", "t.v1", "0 24 * * *"), "cron"),
        (("add", "x", "t.v1", "* * * * *", "--tz", "Moon/Base"), "time zone"),
        (("add", "x y", "t.v1", "* * * * *"), "name must be"),
        (("add", "x", "t.v1", "* * * * *", "--payload", "{bad"), "payload"),
        (("add", "x", "t.v1", "* * * * *", "--grace", "soon"), "grace"),
    ):
        code, _, err = chokaq(capsys, db_url, "schedules", *argv)
        assert code == 2, (argv, err)
        assert words in err, (argv, err)
    assert scalar(store, "SELECT count(*) FROM schedules") == 0
    code, _, err = chokaq(capsys, db_url, "schedules", "add", "x", "t.v1", "* * * * *", "--misfire", "later")
    assert code == 2 and "invalid choice" in err  # argparse's own usage error


def test_unknown_names_exit_2_as_not_found(capsys, store, db_url):
    store.create_schedule({"name": "known", "type": "t.v1", "cron": "@daily"}, actor=Actor("ops"))
    for command in ("show", "pause", "resume", "run", "rm"):
        code, _, err = chokaq(capsys, db_url, "schedules", command, "unknown")
        assert code == 2 and "no schedule named 'unknown'" in err, (command, err)
    code, _, err = chokaq(capsys, db_url, "schedules", "add", "known", "t.v1", "@hourly")
    assert code == 2 and "exists" in err
