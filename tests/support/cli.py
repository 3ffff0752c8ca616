"""`chokaq` in-process, as the CLI tests call it: argv in, exit code and both outputs out; and a Target,
the same commands on the database (`--db URL`) or through the real API (`--api URL`, a token in the
environment), so one test runs a command group both ways."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

from chokaq_ops.cli import main
from chokaq_ops.models import Actor
from chokaq_ops.storage import Store

API_ENV = ("CHOKAQ_API_URL", "CHOKAQ_API_TOKEN", "CHOKAQ_API_TOKEN_FILE", "CHOKAQ_DB", "CHOKAQ_ACTOR")


def chokaq(capsys: pytest.CaptureFixture[str], db_url: str, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([*argv, "--db", db_url])
    out, err = capsys.readouterr()
    return code, out, err


def lines(out: str) -> list[dict]:
    """stdout of a `--format json` run as its JSON lines, each checked against the shipped schema and
    the contract's shape: one compact object per line with `event`, the last one final."""
    from tests.support.contract import check_stream

    return check_stream(out)


def rows(out: str) -> list[dict]:
    """The `row` objects of a listing's JSON lines."""
    return [line["row"] for line in lines(out) if line["event"] == "row"]


def record(out: str) -> dict:
    """The one `record` object of a show-like command's JSON lines."""
    [found] = [line["record"] for line in lines(out) if line["event"] == "record"]
    return found


def final(out: str) -> dict:
    return lines(out)[-1]


@dataclass
class Target:
    """Where the commands run: `--db URL` or `--api URL` (with a token in the environment). `actor` is
    who the audit log names for a change made here: CHOKAQ_ACTOR on the database, the token's name on
    the API."""

    name: str
    argv: list[str]
    ids: dict[str, str] = field(default_factory=dict)
    actor: str = ""

    @property
    def api(self) -> bool:
        return self.argv[:1] == ["--api"]

    def run(self, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict], str]:
        """With --format json: the exit code, every stdout line checked against the contract, stderr."""
        capsys.readouterr()
        words = [w.format(**self.ids) for w in argv]
        code = main([*words, *self.argv, "--format", "json"])
        out, err = capsys.readouterr()
        from tests.support.contract import check_stream

        return code, check_stream(out), err

    def text(self, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
        """The human output: the exit code, stdout, stderr."""
        capsys.readouterr()
        code = main([*(w.format(**self.ids) for w in argv), *self.argv])
        out, err = capsys.readouterr()
        return code, out, err


@contextmanager
def target(
    kind: str,
    store: Store,
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    *,
    actor: str = "cron",
    role: str = "admin",
) -> Iterator[Target]:
    """A Target on the database (`kind` db, CHOKAQ_ACTOR `actor`) or on the real API served over `store`
    (`kind` http, a token named `actor` of `role` in CHOKAQ_API_TOKEN)."""
    from tests.support.clients import served_api

    for key in API_ENV:
        monkeypatch.delenv(key, raising=False)
    if kind == "db":
        monkeypatch.setenv("CHOKAQ_ACTOR", actor)
        yield Target(f"db-{store.dialect.name}", ["--db", db_url], actor=actor)
        return
    with served_api(store, db_url) as url:
        monkeypatch.setenv("CHOKAQ_API_TOKEN", store.create_token(actor, role, actor=Actor("setup")))
        yield Target(f"http-{store.dialect.name}", ["--api", url], actor=actor)
