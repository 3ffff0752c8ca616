"""`chokaq` in-process, as the CLI tests call it: argv in, exit code and both outputs out."""

from __future__ import annotations

import pytest

from chokaq_ops.cli import main


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
