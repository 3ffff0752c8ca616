"""The JSON-lines contract of `--format json` (docs/cli-json.md; the schema ships as
chokaq_ops/schemas/cli-json.schema.json).

Every line is one compact JSON object with `event` and `schema_version`; details are objects, never JSON
inside strings. A listing is `row` events, a single object one `record` event, a bulk run `plan`,
`chunk`... events; every run ends with exactly one final event naming its exit code and the reason:
`finished` (0), `halted` (1), `interrupted` (3) or `error` (2, 4, 5, 6, 7). What a command prints goes
through the one `Output` of its invocation, which knows whether the final line was printed: `main`
prints it when the command did not (an exception, a usage error, a lost database).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from datetime import datetime
from typing import Any

SCHEMA_VERSION = 2
SCHEMA_RESOURCE = "schemas/cli-json.schema.json"  # inside the chokaq_ops package

# Exit codes (docs/cli-json.md, "Exit codes"): one meaning each, the same over the database and the API.
EXIT_OK = 0
EXIT_HALTED = 1  # a canary or the failure guard stopped a run; resumable
EXIT_USAGE = 2  # bad flags or input, unknown id, wrong state, a label bound to another selection
EXIT_INTERRUPTED = 3  # SIGINT / SIGTERM between chunks; resumable
EXIT_UNREACHABLE = 4  # the database or the API did not answer (down, cut, 5xx): retry later
EXIT_FAILURE = 5  # any other failure
EXIT_DENIED = 6  # the API refused the token (401) or its role (403)
EXIT_BUSY = 7  # another run works this plan (its lease): one run at a time

FINAL_EVENTS = {"finished": EXIT_OK, "halted": EXIT_HALTED, "interrupted": EXIT_INTERRUPTED}


def jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str | bytes):  # numpy scalars
        return value.item()
    return value


class Output:
    """One invocation's output: JSON lines (`json`) or nothing here (tables are the commands' own)."""

    def __init__(self, *, json_lines: bool, command: str) -> None:
        self.json = json_lines
        self.command = command
        self.final: dict[str, Any] | None = None
        self.rows = 0

    def line(self, obj: Mapping[str, Any]) -> None:
        """Print one event (it must have `event`); a final event is remembered, a second one refused."""
        if not self.json:
            return
        if "event" not in obj:
            raise ValueError("every JSON line has an event")
        out = {"event": obj["event"], "schema_version": SCHEMA_VERSION}
        out |= {k: v for k, v in obj.items() if k != "event"}
        if out["event"] in FINAL_EVENTS or out["event"] == "error":
            if self.final is not None:
                return  # exactly one final line per run
            out.setdefault("exit_code", FINAL_EVENTS.get(out["event"], EXIT_FAILURE))
            out.setdefault("reason", "ok")
            out.setdefault("command", self.command)
            self.final = out
        print(json.dumps(jsonable(out), separators=(",", ":"), ensure_ascii=False), flush=True)

    def row(self, row: Mapping[str, Any]) -> None:
        self.rows += 1
        self.line({"event": "row", "row": row})

    def record(self, record: Mapping[str, Any]) -> None:
        self.line({"event": "record", "record": record})

    def finish(self, code: int, **fields: Any) -> None:
        """The final line of a command that printed none itself."""
        if self.final is not None or not self.json:
            return
        if code == EXIT_INTERRUPTED:
            self.line({"event": "interrupted", "exit_code": code, "reason": "interrupted", **fields})
        elif code == EXIT_OK:
            self.line({"event": "finished", "exit_code": code, "reason": "ok", "rows": self.rows, **fields})
        else:
            self.line({"event": "error", "exit_code": code, **fields})


_current = Output(json_lines=False, command="")


def current() -> Output:
    return _current


def begin(*, json_lines: bool, command: str) -> Output:
    global _current
    _current = Output(json_lines=json_lines, command=command)
    return _current


def wants_json(argv: list[str]) -> bool:
    """Whether an invocation asked for JSON lines (read from argv: a usage error ends before parsing)."""
    for i, arg in enumerate(argv):
        if arg == "--format" and i + 1 < len(argv) and argv[i + 1] == "json":
            return True
        if arg == "--format=json":
            return True
    return False


def command_of(argv: list[str]) -> str:
    """`dlq resurrect` of an argv: its leading words."""
    words = []
    for arg in argv:
        if arg.startswith("-"):
            break
        words.append(arg)
    return " ".join(words[:2])


def schema() -> dict[str, Any]:
    """The shipped JSON Schema of every line (docs/cli-json.md)."""
    from importlib.resources import files

    text = files("chokaq_ops").joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def stdout_is_json() -> bool:
    return _current.json


def to_stderr(text: str) -> None:
    print(text, file=sys.stderr)
