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
from dataclasses import dataclass, field

import pytest

from chokaq_ops.cli import main, target
from chokaq_ops.models import Actor, DlqFilter, FailureReason
from chokaq_ops.storage import Store
from tests.support.clients import served_api
from tests.support.contract import check_stream
from tests.support.dbprobe import enqueue
from tests.support.seeds import seed_dlq

DEAD_PG = "postgresql://postgres@127.0.0.1:1/nowhere"  # nothing listens on port 1
DEAD_API = "http://127.0.0.1:1"
QUIET = {"CHOKAQ_STORAGE__MAX_TRANSIENT_RETRIES": "0"}


@dataclass
class Target:
    """Where the commands run: `--db URL` or `--api URL` (with a token in the environment)."""

    name: str
    argv: list[str]
    ids: dict[str, str] = field(default_factory=dict)

    def run(self, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict], str]:
        capsys.readouterr()
        words = [w.format(**self.ids) for w in argv]
        code = main([*words, *self.argv, "--format", "json"])
        out, err = capsys.readouterr()
        return code, check_stream(out), err


def seed(store: Store) -> dict[str, str]:
    """One of everything the commands act on."""
    dead = seed_dlq(store, 4, queue="contract", reason=FailureReason.Zombie)
    seed_dlq(store, 3, queue="canary", reason=FailureReason.Zombie)
    [hot] = enqueue(store, 1, prefix="contract-hot", queue="contract-hot")
    plan = store.create_plan("resurrect", actor=Actor("seed"), ids=dead[2:3])
    other = store.create_plan("resurrect", actor=Actor("seed"), ids=dead[3:4])
    return {"dead": dead[0], "dead2": dead[1], "hot": hot, "plan": plan["id"], "plan2": other["id"]}


@pytest.fixture(params=["db", "http"])
def where(request, store, db_url, monkeypatch) -> Iterator[Target]:
    monkeypatch.setenv("CHOKAQ_ACTOR", "cron")
    for key in ("CHOKAQ_API_URL", "CHOKAQ_API_TOKEN", "CHOKAQ_API_TOKEN_FILE", "CHOKAQ_DB"):
        monkeypatch.delenv(key, raising=False)
    ids = seed(store)
    if request.param == "db":
        yield Target(f"db-{store.dialect.name}", ["--db", db_url], ids)
        return
    with served_api(store, db_url) as url:
        token = store.create_token("cron-admin", "admin", actor=Actor("setup"))
        monkeypatch.setenv("CHOKAQ_API_TOKEN", token)
        monkeypatch.delenv("CHOKAQ_ACTOR")  # over the API the token's name is the actor
        yield Target(f"http-{store.dialect.name}", ["--api", url], ids)


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
}
FIRST_EVENT = {"row", "record", "plan", "finished"}


def test_every_command_succeeds_with_the_contract(where, capsys) -> None:
    for name, argv in SUCCESS.items():
        code, lines, err = where.run(capsys, *argv)
        assert code == 0, (where.name, name, err)
        end = lines[-1]
        assert (end["event"], end["exit_code"]) == ("finished", 0), (name, end)
        assert lines[0]["event"] in FIRST_EVENT, (name, lines[0])
        if name.startswith(("dlq resurrect", "dlq purge", "cancel", "plans resume")):
            assert (lines[0]["event"] == "plan" and lines[0]["plan_id"] is None) or lines[0]["plan_id"], name
            assert lines[0]["dry_run"] is name.endswith("--dry-run"), name
    code, lines, _ = where.run(capsys, "audit", "ls", "--action", "plan_discard")
    assert all(isinstance(line["row"]["details"], dict) for line in lines[:-1]), "details are objects"


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
]


def test_usage_and_unknown_ids_exit_2_with_a_final_line(where, capsys, store) -> None:
    before = store.list_audit(page_size=1).total
    for argv, reason in USAGE:
        code, lines, err = where.run(capsys, *argv)
        assert code == 2 and err, (where.name, argv)
        [end] = lines
        assert (end["event"], end["exit_code"], end["reason"]) == ("error", 2, reason), (argv, end)
        assert end["message"], argv
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

    def signalled(args):
        os.kill(os.getpid(), sig)
        return real(args)

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
    where = Target(down, ["--db", DEAD_PG] if down == "database" else ["--api", DEAD_API])
    where.ids = {"dead": "x", "dead2": "y", "hot": "z", "plan": "p", "plan2": "q"}
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
        where = Target("api-db-down", ["--api", url], {"dead": "x", "plan": "p"})
        for name in ("dlq ls", "dlq resurrect"):
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
