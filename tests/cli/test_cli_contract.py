"""The JSON-lines contract (docs/cli-json.md), command by command and exit path by exit path, on SQLite,
PostgreSQL and through the API (`--api`): every stdout line is one compact object with `event` and
`schema_version` that validates against the schema shipped in the package, every run ends with exactly
one final line naming its exit code and reason, and the exit code is the documented one.

Exit paths: success, usage (a bad flag; an unknown id), halted (a canary; only `dlq resurrect` can halt),
SIGINT and SIGTERM (delivered to the running command: the real handlers turn them into the final line),
database down, API down, and a role the API refuses. Runs are in-process (main(argv)) and share one
seeded database per test; the kill matrix with real processes is tests/crash/test_kill_matrix.py.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from chokaq_ops.cli import target
from chokaq_ops.models import Actor, DlqFilter, FailureReason
from chokaq_ops.storage import Store
from tests.support.cli import Target
from tests.support.cli import target as target_of
from tests.support.clients import served_api
from tests.support.dbprobe import enqueue
from tests.support.seeds import seed_dlq

DEAD_PG = "postgresql://postgres@127.0.0.1:1/nowhere"  # nothing listens on port 1
DEAD_API = "http://127.0.0.1:1"
QUIET = {"CHOKAQ_STORAGE__MAX_TRANSIENT_RETRIES": "0"}
HOOK = "https://hooks.example.com/contract/secret-path"
# The ids an unreachable target's commands are given: none of them is ever looked up.
NOWHERE = {
    "dead": "x", "dead2": "y", "hot": "z", "plan": "p", "plan2": "q", "schedule": "s", "receiver": "r",
    "rule": "u",
}  # fmt: skip


def seed(store: Store) -> dict[str, str]:
    """One of everything the commands act on."""
    dead = seed_dlq(store, 4, queue="contract", reason=FailureReason.Zombie)
    seed_dlq(store, 3, queue="canary", reason=FailureReason.Zombie)
    [hot] = enqueue(store, 1, prefix="contract-hot", queue="contract-hot")
    plan = store.create_plan("resurrect", actor=Actor("seed"), ids=dead[2:3])
    other = store.create_plan("resurrect", actor=Actor("seed"), ids=dead[3:4])
    seeder = Actor("seed")
    store.create_schedule({"name": "contract.nightly", "type": "report.v1", "cron": "@daily"}, actor=seeder)
    store.create_alert_receiver({"name": "contract-ops", "url": HOOK, "secret": "s" * 20}, actor=seeder)
    store.create_alert_rule(
        {"name": "contract-zombies", "kind": "zombies", "receivers": ["contract-ops"]}, actor=seeder
    )
    at = datetime(2026, 12, 4, 20, 10, 3, 120000, tzinfo=UTC)
    alert = {"rule": "contract-zombies", "alert_key": "k", "status": "firing", "value": 3.0}
    alert |= {"labels": {"alertname": "contract-zombies", "severity": "warning"}}
    alert |= {"annotations": {"summary": "3 zombies"}, "active_at": at, "firing_at": at, "resolved_at": None}
    store.save_alert_cycle(states=[alert], drop_states=[], groups=[], drop_groups=[], deliveries=[])
    return {
        "dead": dead[0],
        "dead2": dead[1],
        "hot": hot,
        "plan": plan["id"],
        "plan2": other["id"],
        "schedule": "contract.nightly",
        "receiver": "contract-ops",
        "rule": "contract-zombies",
    }


@pytest.fixture(params=["db", "http"])
def where(request, store, db_url, monkeypatch) -> Iterator[Target]:
    ids = seed(store)
    # Over the API the token's name is the actor.
    with target_of(request.param, store, db_url, monkeypatch, actor="cron-admin") as on:
        on.ids = ids
        yield on


# Every command of the contract with a run that succeeds on the seeded data.
SUCCESS = {
    "dlq ls": ["dlq", "ls"],
    "dlq show": ["dlq", "show", "{dead}"],
    "dlq summary": ["dlq", "summary"],
    "dlq resurrect": ["dlq", "resurrect", "--ids", "{dead}"],
    "dlq resurrect --dry-run": ["dlq", "resurrect", "--queue", "contract", "--dry-run"],
    "dlq purge": ["dlq", "purge", "--ids", "{dead2}"],
    "cancel": ["cancel", "--ids", "{hot}"],
    "plans ls": ["plans", "ls"],
    "plans show": ["plans", "show", "{plan}"],
    "plans resume": ["plans", "resume", "{plan}"],
    "plans discard": ["plans", "discard", "{plan2}"],
    "audit ls": ["audit", "ls"],
    "stats": ["stats"],
    "schedules add": ["schedules", "add", "contract.new", "report.v1", "*/5 * * * *", "--tz", "Asia/Tokyo"],
    "schedules ls": ["schedules", "ls"],
    "schedules show": ["schedules", "show", "{schedule}"],
    "schedules pause": ["schedules", "pause", "{schedule}"],
    "schedules resume": ["schedules", "resume", "{schedule}"],
    "schedules run": ["schedules", "run", "{schedule}"],
    "schedules rm": ["schedules", "rm", "contract.new"],
    "alerts ls": ["alerts", "ls"],
    "alerts receivers add": [
        "alerts",
        "receivers",
        "add",
        "contract-new",
        "--url",
        HOOK,
        "--generate-secret",
    ],
    "alerts receivers set": ["alerts", "receivers", "set", "{receiver}", "--timeout", "5"],
    "alerts receivers ls": ["alerts", "receivers", "ls"],
    "alerts rules add": [
        "alerts",
        "rules",
        "add",
        "contract-new",
        "--kind",
        "zombies",
        "--receivers",
        "{receiver}",
    ],
    "alerts rules set": ["alerts", "rules", "set", "{rule}", "--no-enabled", "--for", "1m"],
    "alerts rules ls": ["alerts", "rules", "ls"],
    "alerts rules rm": ["alerts", "rules", "rm", "contract-new"],
    "alerts receivers rm": ["alerts", "receivers", "rm", "contract-new"],
    "alerts test": ["alerts", "test", "{receiver}", "--wait", "0"],
}
FIRST_EVENT = {"row", "record", "plan", "finished"}
# What each command of schedules and alerts prints before its final line: rows of a listing, the one
# record of anything else.
SHAPE = {
    name: "row" if name.endswith(" ls") else "record"
    for name in SUCCESS
    if name.startswith(("schedules", "alerts"))
}
# The audit actions a run of SUCCESS writes for schedules and alerts, each under the target's actor.
CHANGES = {
    "schedule_create", "schedule_pause", "schedule_resume", "schedule_trigger", "schedule_delete",
    "alert_receiver_create", "alert_receiver_update", "alert_receiver_delete", "alert_rule_create",
    "alert_rule_update", "alert_rule_delete", "alert_test",
}  # fmt: skip


def test_every_command_succeeds_with_the_contract(where, capsys, store) -> None:
    seeded = store.list_audit(page_size=1).items[0]["id"]
    for name, argv in SUCCESS.items():
        code, lines, err = where.run(capsys, *argv)
        assert code == 0, (where.name, name, err)
        end = lines[-1]
        assert (end["event"], end["exit_code"], end["command"]) == ("finished", 0, name.split(" --")[0]), (
            name,
            end,
        )
        assert lines[0]["event"] in FIRST_EVENT, (name, lines[0])
        if name in SHAPE:
            [*before, _] = lines
            assert before and {line["event"] for line in before} == {SHAPE[name]}, (name, lines)
            assert SHAPE[name] == "row" or len(before) == 1, (name, lines)
        if name.startswith(("dlq resurrect", "dlq purge", "cancel", "plans resume")):
            assert (lines[0]["event"] == "plan" and lines[0]["plan_id"] is None) or lines[0]["plan_id"], name
            assert lines[0]["dry_run"] is name.endswith("--dry-run"), name
    code, lines, _ = where.run(capsys, "audit", "ls", "--action", "plan_discard")
    assert all(isinstance(line["row"]["details"], dict) for line in lines[:-1]), "details are objects"
    changes = [
        a for a in store.list_audit(page_size=1000).items if a["action"] in CHANGES and a["id"] > seeded
    ]
    assert {a["action"] for a in changes} == CHANGES
    assert {a["actor"] for a in changes} == {where.actor}, "over the API the actor is the token's name"


# Each wrong invocation, the reason of its final line and the input named at fault (None: no field).
USAGE = [
    (["dlq", "ls", "--bogus"], "usage"),
    (["dlq", "show", "nope"], "not_found"),
    (["dlq", "summary", "--top", "0"], "usage"),
    (["dlq", "resurrect"], "usage"),  # no selection
    (["dlq", "resurrect", "--failed-from", "2026-01-01T00:00"], "usage"),  # a time without a zone
    (["dlq", "purge", "--ids", "{dead}", "--queue", "x"], "usage"),
    (["cancel"], "usage"),
    (["plans", "ls", "--state", "odd"], "usage"),
    (["plans", "show", "nope"], "not_found"),
    (["plans", "resume", "nope"], "not_found"),
    (["plans", "discard", "nope"], "not_found"),
    (["audit", "ls", "--limit", "0"], "usage"),
    (["stats", "--bogus"], "usage"),
    (["schedules", "ls", "--paused", "--active"], "usage"),
    (["schedules", "show", "nope"], "not_found", "name"),
    (["schedules", "pause", "nope"], "not_found", "name"),
    (["schedules", "resume", "nope"], "not_found", "name"),
    (["schedules", "run", "nope"], "not_found", "name"),
    (["schedules", "rm", "nope"], "not_found", "name"),
    (["schedules", "add", "{schedule}", "report.v1", "@hourly"], "conflict", "name"),
    (["schedules", "add", "x", "report.v1", "0 24 * * *"], "usage", "cron"),
    (["schedules", "add", "x", "report.v1", "@daily", "--tz", "Moon/Base"], "usage", "tz"),
    (["schedules", "add", "x", "report.v1", "@daily", "--payload", "{{bad"], "usage", "payload"),
    (["schedules", "add", "x", "report.v1", "@daily", "--grace", "soon"], "usage", "grace"),
    (["schedules", "add", "x y", "report.v1", "@daily"], "usage", "name"),
    (["alerts", "ls", "--bogus"], "usage"),
    (["alerts", "receivers", "add", "{receiver}", "--url", HOOK, "--generate-secret"], "conflict", "name"),
    (["alerts", "receivers", "add", "y", "--url", "ftp://nope", "--generate-secret"], "usage", "url"),
    (["alerts", "receivers", "add", "y", "--generate-secret"], "usage", "url"),
    (["alerts", "receivers", "set", "{receiver}"], "usage"),
    (["alerts", "receivers", "set", "nope", "--timeout", "5"], "not_found", "name"),
    (["alerts", "receivers", "rm", "{receiver}"], "conflict", "name"),  # a rule sends to it
    (["alerts", "receivers", "rm", "nope"], "not_found", "name"),
    (["alerts", "rules", "add", "x", "--kind", "zombies"], "usage", "receivers"),
    (["alerts", "rules", "add", "x", "--kind", "zombies", "--receivers", "nobody"], "usage", "receivers"),
    (
        ["alerts", "rules", "add", "x", "--kind", "zombies", "--receivers", "{receiver}", "--window", "soon"],
        "usage",
        "window",
    ),
    (
        ["alerts", "rules", "add", "{rule}", "--kind", "zombies", "--receivers", "{receiver}"],
        "conflict",
        "name",
    ),
    (["alerts", "rules", "set", "nope", "--no-enabled"], "not_found", "name"),
    (["alerts", "rules", "rm", "nope"], "not_found", "name"),
    (["alerts", "test", "nope", "--wait", "0"], "not_found", "name"),
    (["alerts", "test", "{receiver}", "--wait", "-1"], "usage", "wait"),
]


def test_usage_and_unknown_ids_exit_2_with_a_final_line(where, capsys, store) -> None:
    before = store.list_audit(page_size=1).total
    for argv, reason, *field in USAGE:
        code, lines, err = where.run(capsys, *argv)
        assert code == 2 and err, (where.name, argv)
        [end] = lines
        assert (end["event"], end["exit_code"], end["reason"]) == ("error", 2, reason), (argv, end)
        assert end["message"], argv
        if field:
            assert end.get("field") == field[0], (argv, end)
    assert store.list_audit(page_size=1).total == before, "a refused command changes nothing"


def test_a_canary_that_sees_nothing_finish_halts_with_exit_1(where, capsys) -> None:
    argv = ["dlq", "resurrect", "--queue", "canary", "--chunk-size", "1", "--canary", "1", "--watch", "1s"]
    code, lines, err = where.run(capsys, *argv)
    assert code == 1, err
    plan, end = lines[0], lines[-1]
    assert plan["event"] == "plan" and [e["event"] for e in lines[1:-1]] == ["chunk"]
    assert (end["event"], end["exit_code"], end["reason"], end["plan_id"]) == (
        "halted",
        1,
        "halted",
        plan["plan_id"],
    )
    assert end["remaining"] == 2 and "none was picked up by a worker" in end["message"]
    assert isinstance(end["outcomes"], dict) and end["outcomes"]["waiting"] == 1


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_signal_ends_every_command_with_an_interrupted_line(where, capsys, monkeypatch, sig) -> None:
    """The signal arrives while the command works (here: as it opens its client); the real handlers run."""
    real = target.client_of

    def signalled(args, **kwargs):
        os.kill(os.getpid(), sig)
        return real(args, **kwargs)

    monkeypatch.setattr(target, "client_of", signalled)
    for name, argv in SUCCESS.items():
        code, lines, _ = where.run(capsys, *argv)
        [end] = lines
        assert code == 3 and (end["event"], end["reason"], end["signal"]) == (
            "interrupted",
            "interrupted",
            sig.name,
        ), name


@pytest.mark.parametrize("down", ["database", "api"])
def test_an_unreachable_database_or_api_exits_4(capsys, monkeypatch, tmp_path, down) -> None:
    for key, value in QUIET.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("CHOKAQ_API_TOKEN", "chq_whatever")
    where = Target(down, ["--db", DEAD_PG] if down == "database" else ["--api", DEAD_API], NOWHERE)
    for name, argv in SUCCESS.items():
        code, lines, _ = where.run(capsys, *argv)
        [end] = lines
        assert code == 4 and end["event"] == "error", (name, end)
        assert end["reason"] == f"{down}_unreachable", (name, end)


def test_an_api_whose_database_is_down_exits_4(capsys, monkeypatch) -> None:
    """The API answers 503: the server is up, its database is not (database_unreachable). Every command
    reaches the API through the same transport, so a read and a plan run stand for all (a 503 to a read
    is retried once after the server's Retry-After)."""
    monkeypatch.setenv("CHOKAQ_API_TOKEN", "chq_any")  # the API cannot even check it: 503 before 401
    broken = Store(DEAD_PG, max_transient_retries=0, connect_timeout=2)
    with served_api(broken, DEAD_PG) as url:
        where = Target("api-db-down", ["--api", url], NOWHERE)
        for name in ("dlq ls", "dlq resurrect", "schedules ls", "schedules pause", "alerts receivers add"):
            code, lines, _ = where.run(capsys, *SUCCESS[name])
            [end] = lines
            assert code == 4 and end["reason"] == "database_unreachable", (name, end)


def test_a_role_the_api_refuses_exits_6_and_changes_nothing(store, db_url, capsys, monkeypatch) -> None:
    ids = seed(store)
    with served_api(store, db_url) as url:
        monkeypatch.setenv("CHOKAQ_API_TOKEN", store.create_token("night", "reader", actor=Actor("setup")))
        where = Target("reader", ["--api", url], ids)
        for argv in (
            ["dlq", "resurrect", "--ids", "{dead}"],
            ["dlq", "purge", "--ids", "{dead}"],
            ["cancel", "--ids", "{hot}"],
        ):
            code, lines, _ = where.run(capsys, *argv)
            assert code == 6 and lines[-1]["reason"] == "forbidden" and "role" in lines[-1]["message"], argv
        code, lines, _ = where.run(capsys, "dlq", "ls")
        assert code == 0, "reading is what a reader may do"
        monkeypatch.setenv("CHOKAQ_API_TOKEN", "chq_not-a-token")
        code, lines, _ = where.run(capsys, "dlq", "ls")
        assert code == 6 and lines[-1]["reason"] == "unauthorized"
    assert store.get_job(ids["dead"])["location"] == "dlq" and store.get_job(ids["hot"])["location"] == "hot"
    assert store.list_plans(action="cancel")[1] == 0


def test_the_token_comes_from_a_file_or_the_environment_never_the_command_line(
    store, db_url, capsys, monkeypatch, tmp_path
) -> None:
    ids = seed(store)
    for key in ("CHOKAQ_API_TOKEN", "CHOKAQ_API_TOKEN_FILE", "CHOKAQ_DB"):
        monkeypatch.delenv(key, raising=False)
    with served_api(store, db_url) as url:
        token_file = tmp_path / "token"
        token_file.write_text(store.create_token("cron", "operator", actor=Actor("setup")) + "\n")
        monkeypatch.setenv("CHOKAQ_API_URL", url)  # no --api, no --db: the environment's API
        where = Target("env", ["--token-file", str(token_file)], ids)
        code, lines, err = where.run(capsys, "dlq", "resurrect", "--ids", "{dead}")
        assert code == 0, err
        assert store.list_audit(job_id=ids["dead"], action="resurrect").items[0]["actor"] == "cron"
        code, lines, _ = where.run(capsys, "dlq", "ls", "--token", "x")
        assert code == 2 and lines[-1]["reason"] == "usage", "there is no --token flag"
        monkeypatch.delenv("CHOKAQ_API_URL")
        where.argv = ["--api", url]
        code, lines, _ = where.run(capsys, "dlq", "ls")
        assert code == 2 and "CHOKAQ_API_TOKEN" in lines[-1]["message"]
        code, lines, _ = where.run(
            capsys,
            "dlq",
            "resurrect",
            "--ids",
            "{dead2}",
            "--actor",
            "mallory",
            "--token-file",
            str(token_file),
        )
        assert code == 2 and "token's name" in lines[-1]["message"]


def test_the_same_run_prints_the_same_lines_over_the_database_and_the_api(
    store, db_url, capsys, monkeypatch
) -> None:
    """Apart from ids and times, a labelled resurrect says the same thing either way."""
    seed_dlq(store, 6, queue="same-a", reason=FailureReason.Zombie)
    seed_dlq(store, 6, queue="same-b", reason=FailureReason.Zombie)
    monkeypatch.setenv("CHOKAQ_ACTOR", "cron")
    db = Target("db", ["--db", db_url])
    code, over_db, _ = db.run(
        capsys, "dlq", "resurrect", "--queue", "same-a", "--label", "a", "--chunk-size", "4"
    )
    with served_api(store, db_url) as url:
        monkeypatch.setenv("CHOKAQ_API_TOKEN", store.create_token("cron", "operator", actor=Actor("setup")))
        monkeypatch.delenv("CHOKAQ_ACTOR")
        api = Target("api", ["--api", url])
        code2, over_api, _ = api.run(
            capsys, "dlq", "resurrect", "--queue", "same-b", "--label", "b", "--chunk-size", "4"
        )
    assert code == code2 == 0

    def shape(lines):
        return [{k: v for k, v in line.items() if k not in ("plan_id", "label")} for line in lines]

    assert shape(over_db) == shape(over_api)
    assert store.preview_dlq(flt=DlqFilter(queue=["same-a", "same-b"][0]))["matched"] == 0


def test_schedules_and_alerts_refused_by_role_exit_6_and_change_nothing(store, db_url, capsys, monkeypatch):
    """Pausing, resuming and triggering a schedule need an operator; creating and deleting schedules and
    anything that changes alerts need an admin (docs/schedules.md, docs/alerts.md)."""
    ids = seed(store)
    operator_may = [["schedules", "pause", "{schedule}"], ["schedules", "run", "{schedule}"]]
    admin_only = [
        ["schedules", "add", "new.one", "report.v1", "@daily"],
        ["schedules", "rm", "{schedule}"],
        ["alerts", "receivers", "add", "new-one", "--url", HOOK, "--generate-secret"],
        ["alerts", "receivers", "set", "{receiver}", "--timeout", "5"],
        ["alerts", "rules", "set", "{rule}", "--no-enabled"],
        ["alerts", "rules", "rm", "{rule}"],
        ["alerts", "test", "{receiver}", "--wait", "0"],
    ]
    reads = [
        ["schedules", "ls"],
        ["schedules", "show", "{schedule}"],
        ["alerts", "ls"],
        ["alerts", "rules", "ls"],
    ]
    with target_of("http", store, db_url, monkeypatch, actor="night", role="reader") as reader:
        reader.ids = ids
        before = store.list_audit(page_size=1).total
        for argv in operator_may + admin_only:
            code, lines, _ = reader.run(capsys, *argv)
            assert code == 6 and lines[-1]["reason"] == "forbidden" and "role" in lines[-1]["message"], argv
        assert store.list_audit(page_size=1).total == before, "a refused change changes nothing"
        for argv in reads:
            assert reader.run(capsys, *argv)[0] == 0, argv
    with target_of("http", store, db_url, monkeypatch, actor="shift", role="operator") as operator:
        operator.ids = ids
        before = store.list_audit(page_size=1).total
        for argv in admin_only:
            code, lines, _ = operator.run(capsys, *argv)
            assert code == 6 and lines[-1]["reason"] == "forbidden", argv
        assert store.list_audit(page_size=1).total == before, "a refused change changes nothing"
        for argv in operator_may:
            code, lines, err = operator.run(capsys, *argv)
            assert code == 0, (argv, err)
        code, lines, _ = operator.run(capsys, "schedules", "resume", "{schedule}", "--actor", "mallory")
        assert code == 2 and "token's name" in lines[-1]["message"], "--actor is refused over the API"
    assert [a["actor"] for a in store.list_audit(action="schedule_trigger").items] == ["shift"]
    assert store.get_schedule(ids["schedule"]).paused is True


READS = [
    ["schedules", "ls"],
    ["schedules", "ls", "--active"],
    ["schedules", "show", "{schedule}"],
    ["alerts", "ls"],
    ["alerts", "receivers", "ls"],
    ["alerts", "rules", "ls"],
]


def test_schedules_and_alerts_print_the_same_lines_over_the_database_and_the_api(
    store, db_url, capsys, monkeypatch
) -> None:
    """The clients give the CLI the same fields with the same types either way: every line is equal."""
    ids = seed(store)
    store.trigger_schedule(ids["schedule"], actor=Actor("seed"))
    seen: dict[str, list] = {}
    for kind in ("db", "http"):
        with target_of(kind, store, db_url, monkeypatch) as on:
            on.ids = ids
            seen[kind] = [on.run(capsys, *argv)[:2] for argv in READS]
            seen[kind + " text"] = [on.text(capsys, *argv)[:2] for argv in READS]
    assert seen["db"] == seen["http"]
    assert seen["db text"] == seen["http text"]
    [show] = [lines for argv, (_, lines) in zip(READS, seen["db"], strict=True) if argv[1] == "show"]
    assert len(show[0]["record"]["next_runs"]) == 5 and len(show[0]["record"]["recent_runs"]) == 1
    [alert] = seen["db"][READS.index(["alerts", "ls"])][1][:-1]
    assert alert["row"] == {
        "rule": "contract-zombies",
        "status": "firing",
        "labels": {"alertname": "contract-zombies", "severity": "warning"},
        "annotations": {"summary": "3 zombies"},
        "value": 3.0,
        "active_at": "2026-12-04T20:10:03.120000Z",
        "firing_at": "2026-12-04T20:10:03.120000Z",
        "resolved_at": None,
    }
