"""`chokaq schedules ls|show|add|pause|resume|run|rm` on both databases and through the real API (`on`):
the JSON lines of the contract (docs/cli-json.md, every line checked against the shipped schema) and the
human output, audit under the actor (CHOKAQ_ACTOR on the database, the token's name over the API), usage
errors (a bad cron expression or time zone) exiting 2 naming the field and writing nothing, unknown names
exiting 2 as not_found and a taken one as conflict."""

from __future__ import annotations

from chokaq_ops.models import Actor
from tests.support.dbprobe import scalar, sql


def test_add_list_pause_resume_run_and_remove(capsys, store, on):
    code, lines, err = on.run(
        capsys,
        "schedules", "add", "reports.nightly", "report.v1", "30 2 * * *",
        "--tz", "Europe/Berlin", "--payload", '{{"region": "eu"}}', "--misfire", "catch_up",
        "--catch-up", "3", "--grace", "5m",
    )  # fmt: skip
    assert code == 0, err
    [made, end] = lines
    assert (made["event"], end["event"], end["command"]) == ("record", "finished", "schedules add")
    made = made["record"]
    assert (made["cron"], made["tz"], made["catch_up_max"], made["misfire_grace_seconds"]) == (
        "30 2 * * *", "Europe/Berlin", 3, 300.0
    )  # fmt: skip
    assert made["payload"] == '{"region": "eu"}' and made["created_by"] == on.actor
    assert len(made["next_runs"]) == 5 and all(t.endswith(":30:00Z") for t in made["next_runs"])
    code, out, _ = on.text(capsys, "schedules", "ls")
    assert code == 0 and out.splitlines()[0].split()[:4] == ["NAME", "TYPE", "CRON", "TZ"]
    assert "reports.nightly" in out and "Europe/Berlin" in out
    code, lines, _ = on.run(capsys, "schedules", "pause", "reports.nightly")
    assert code == 0 and [line["event"] for line in lines] == ["record", "finished"]
    assert lines[0]["record"]["paused"] is True and lines[0]["record"]["next_runs"] == []
    code, lines, _ = on.run(capsys, "schedules", "ls", "--paused")
    assert [line["row"]["name"] for line in lines[:-1]] == ["reports.nightly"]
    assert (lines[-1]["event"], lines[-1]["rows"]) == ("finished", 1)
    assert on.run(capsys, "schedules", "ls", "--active")[1][0]["rows"] == 0
    code, out, _ = on.text(capsys, "schedules", "run", "reports.nightly")
    job_id = out.strip()
    assert code == 0 and store.get_job(job_id).type == "report.v1"
    code, out, _ = on.text(capsys, "schedules", "resume", "reports.nightly")
    assert code == 0 and "False" in out
    code, out, _ = on.text(capsys, "schedules", "show", "reports.nightly")
    assert code == 0 and job_id in out and "manual" in out and "catch_up" in out
    code, lines, _ = on.run(capsys, "schedules", "show", "reports.nightly")
    [shown] = [line["record"] for line in lines if line["event"] == "record"]
    assert shown["last_job_id"] == job_id and [r["job_id"] for r in shown["recent_runs"]] == [job_id]
    code, lines, _ = on.run(capsys, "schedules", "run", "reports.nightly")
    assert code == 0 and lines[0]["record"]["kind"] == "manual" and lines[0]["record"]["job_id"] != job_id
    code, out, err = on.text(capsys, "schedules", "rm", "reports.nightly")
    assert code == 0 and out == "" and "deleted" in err
    assert scalar(store, "SELECT count(*) FROM schedules") == 0
    actions = [a for (a,) in sql(store, "SELECT action FROM audit_log WHERE actor = ? ORDER BY id", on.actor)]
    assert actions == [
        "schedule_create", "schedule_pause", "schedule_trigger", "schedule_resume", "schedule_trigger",
        "schedule_delete",
    ]  # fmt: skip
    store.create_schedule({"name": "other", "type": "t.v1", "cron": "@daily"}, actor=Actor("ops"))
    code, lines, _ = on.run(capsys, "schedules", "rm", "other")
    assert code == 0 and lines[0]["record"] == {"deleted": "other"}


def test_usage_errors_exit_2_naming_the_problem_and_the_field_and_write_nothing(capsys, store, on):
    before = scalar(store, "SELECT count(*) FROM audit_log")
    for argv, field, words in (
        (("add", "x", "t.v1", "* * *"), "cron", "fields"),
        (("add", "x", "t.v1", "0 24 * * *"), "cron", "cron"),
        (("add", "x", "t.v1", "* * * * *", "--tz", "Moon/Base"), "tz", "time zone"),
        (("add", "x y", "t.v1", "* * * * *"), "name", "name must be"),
        (("add", "x", "t.v1", "* * * * *", "--payload", "{{bad"), "payload", "payload"),
        (("add", "x", "t.v1", "* * * * *", "--grace", "soon"), "grace", "grace"),
        (("add", "x", "t.v1", "* * * * *", "--catch-up", "0"), "catch_up_max", "catch_up_max"),
    ):
        code, lines, err = on.run(capsys, "schedules", *argv)
        assert code == 2 and words in err, (argv, err)
        [end] = lines
        assert (end["event"], end["reason"], end.get("field")) == ("error", "usage", field), (argv, end)
        assert words in end["message"], (argv, end)
    assert scalar(store, "SELECT count(*) FROM schedules") == 0
    assert scalar(store, "SELECT count(*) FROM audit_log") == before
    code, lines, err = on.run(capsys, "schedules", "add", "x", "t.v1", "* * * * *", "--misfire", "later")
    assert code == 2 and "invalid choice" in err  # argparse's own usage error
    assert (lines[-1]["reason"], lines[-1]["command"]) == ("usage", "schedules add")


def test_unknown_names_exit_2_as_not_found_and_a_taken_one_as_conflict(capsys, store, on):
    store.create_schedule({"name": "known", "type": "t.v1", "cron": "@daily"}, actor=Actor("ops"))
    for command in ("show", "pause", "resume", "run", "rm"):
        code, lines, err = on.run(capsys, "schedules", command, "unknown")
        assert code == 2 and "no schedule named 'unknown'" in err, (command, err)
        [end] = lines
        assert (end["reason"], end["field"], end["command"]) == ("not_found", "name", f"schedules {command}")
    code, lines, err = on.run(capsys, "schedules", "add", "known", "t.v1", "@hourly")
    assert code == 2 and "exists" in err
    assert (lines[-1]["reason"], lines[-1]["field"]) == ("conflict", "name")
    assert store.get_schedule("known").cron == "@daily"
