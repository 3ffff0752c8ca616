"""`chokaq` in-process, as the CLI tests call it: argv in, exit code and both outputs out."""

from __future__ import annotations

import pytest

from chokaq_ops.cli import main


def chokaq(capsys: pytest.CaptureFixture[str], db_url: str, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([*argv, "--db", db_url])
    out, err = capsys.readouterr()
    return code, out, err
