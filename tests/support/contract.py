"""The JSON-lines contract of `--format json` (docs/cli-json.md), checked the same way by every test: each
stdout line is one compact JSON object with `event` and `schema_version` that validates against the schema
shipped in the package, and a complete run ends with exactly one final line."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import jsonschema

from chokaq_ops.cli.output import FINAL_EVENTS, SCHEMA_VERSION, schema

FINALS = {*FINAL_EVENTS, "error"}


@cache
def validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema())


def check_line(text: str) -> dict[str, Any]:
    """One line: compact (as `json.dumps(..., separators=(",", ":"))` writes it), an object, with `event`
    and `schema_version`, valid against the schema."""
    obj = json.loads(text)
    assert isinstance(obj, dict), f"not an object: {text!r}"
    assert "event" in obj and obj.get("schema_version") == SCHEMA_VERSION, (
        f"no event/schema_version: {text!r}"
    )
    assert text == json.dumps(obj, separators=(",", ":"), ensure_ascii=False), f"not compact: {text!r}"
    errors = sorted(validator().iter_errors(obj), key=str)
    assert not errors, f"{text!r}: {errors[0].message} at {list(errors[0].absolute_path)}"
    return obj


def check_stream(out: str, *, complete: bool = True) -> list[dict[str, Any]]:
    """Every line of a run's stdout; with `complete`, exactly one final line, and it is the last."""
    got = [check_line(line) for line in out.splitlines()]
    finals = [i for i, line in enumerate(got) if line["event"] in FINALS]
    if complete:
        assert finals == [len(got) - 1], f"one final line, last: {[g['event'] for g in got]}"
    else:
        assert len(finals) <= 1 and (not finals or finals[0] == len(got) - 1), [g["event"] for g in got]
    return got
