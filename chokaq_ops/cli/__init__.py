"""The `chokaq` command. Each command group lives in its own module with a `register(subparsers)`.

Packages above the library add commands through the `chokaq.commands` entry-point group (a name and a
`register(subparsers)` function): `chokaq serve` is chokaq_api's (chokaq_api/serve.py), so this package
runs the web API without importing it.

Exit codes (docs/cli-json.md): 0 ok, 1 halted by a canary or the failure guard, 2 usage (bad flags or
input, unknown id, wrong state, a label bound to another selection), 3 interrupted (SIGINT/SIGTERM),
4 database or API unreachable, 5 other failure, 6 the API refused the token or its role, 7 another run
works the plan. With --format json every exit path ends with one final JSON line naming it.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import Any, NoReturn

from chokaq_ops import errors
from chokaq_ops.cli import output
from chokaq_ops.redact import install_log_filter

# The group other packages register commands in (pyproject.toml, [project.entry-points."chokaq.commands"]).
COMMAND_GROUP = "chokaq.commands"

# Order is the order of `chokaq --help`, after the entry-point commands (serve).
COMMAND_MODULES = (
    "worker",
    "migrate",
    "token",
    "enqueue",
    "jobs",
    "queues",
    "circuits",
    "alerts",
    "schedules",
    "workers",
    "dlq",
    "plans",
    "cancel",
    "audit",
    "stats",
    "archive",
    "rescue",
    "doctor",
    "demo",
    "bench",
)


class _Parser(argparse.ArgumentParser):
    # argparse exits 2 on its own; keep its contract, add our prefix, and remember the message for the
    # final JSON line of a `--format json` invocation. No abbreviated flags: a script's `--token x` must
    # not quietly mean `--token-file x`, nor break when a new flag shares its prefix.
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        global _usage_message
        _usage_message = message
        self.print_usage(sys.stderr)
        self.exit(2, f"chokaq: error: {message}\n")


_usage_message = ""
# Commands that own their signals (they stop gracefully on SIGTERM themselves) or print no JSON contract.
OWN_SIGNALS = {"serve", "worker", "demo", "bench"}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="chokaq", description="chokaq: a job queue on a relational database, for its operators."
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR (default INFO)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for entry in sorted(entry_points(group=COMMAND_GROUP), key=lambda e: e.name):
        entry.load()(sub)
    for name in COMMAND_MODULES:
        importlib.import_module(f"chokaq_ops.cli.{name}").register(sub)
    _remember_parsers(parser)
    return parser


def _remember_parsers(parser: argparse.ArgumentParser) -> None:
    """Give every (sub)command's namespace its own parser, so a flag it does not know is reported with
    its usage (`chokaq dlq ls [--queue QUEUE] ...`), not the top level's `chokaq [-h] COMMAND`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                child.set_defaults(usage_parser=child)
                _remember_parsers(child)


def command_path(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str:
    """The words of an argv that name its (sub)commands: `alerts receivers add`, `dlq show` (not its id),
    whatever the depth; read before parsing, so a usage error's final line names its command too."""
    words: list[str] = []
    for arg in argv:
        children = next(
            (a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None
        )
        if not children or arg not in children:
            break
        words.append(arg)
        parser = children[arg]
    return " ".join(words)


# Exit codes: chokaq_ops/cli/output.py and docs/cli-json.md.
EXIT_DB_UNREACHABLE = output.EXIT_UNREACHABLE


def classify(exc: BaseException) -> tuple[int, str]:
    """The exit code and reason of an error that ended a command (docs/cli-json.md, "Exit codes")."""
    table: tuple[tuple[type[BaseException], int, str], ...] = (
        (errors.LabelMismatch, output.EXIT_USAGE, "label_mismatch"),
        (errors.PlanBusy, output.EXIT_BUSY, "busy"),
        (errors.UsageError, output.EXIT_USAGE, "usage"),
        (errors.ValidationError, output.EXIT_USAGE, "usage"),
        (errors.ConfigError, output.EXIT_USAGE, "usage"),
        (errors.JobNotFound, output.EXIT_USAGE, "not_found"),
        (errors.InvalidState, output.EXIT_USAGE, "conflict"),
        (errors.Conflict, output.EXIT_USAGE, "conflict"),
        (errors.Unauthorized, output.EXIT_DENIED, "unauthorized"),
        (errors.Forbidden, output.EXIT_DENIED, "forbidden"),
        (errors.SchemaOutdated, output.EXIT_FAILURE, "schema_outdated"),
        (errors.ApiUnreachable, output.EXIT_UNREACHABLE, "api_unreachable"),
        # Over the API too: a 5xx answer means the server is up and its database is not.
        (errors.TransientStorageError, output.EXIT_UNREACHABLE, "database_unreachable"),
        (errors.ChokaqError, output.EXIT_FAILURE, "failure"),
    )
    for kind, code, reason in table:
        if isinstance(exc, kind):
            return code, reason
    return output.EXIT_FAILURE, "failure"


_signal_seen: dict[str, str] = {}


def interrupted_by() -> str:
    """The signal that interrupted this run (SIGINT unless SIGTERM was seen)."""
    return _signal_seen.get("signal", "SIGINT")


def _on_signal(signum: int, _frame: Any) -> None:
    _signal_seen["signal"] = signal.Signals(signum).name
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = output.begin(json_lines=output.wants_json(argv), command=output.command_of(argv))
    _signal_seen.clear()
    parser = build_parser()
    out.command = command_path(parser, argv)
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            getattr(args, "usage_parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
        if code:
            out.finish(code, reason="usage", message=_usage_message)
        return code
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    install_log_filter()
    # Only the main thread may install handlers (main() called from another thread keeps the process's).
    own = args.command in OWN_SIGNALS or threading.current_thread() is not threading.main_thread()
    previous = None if own else signal.signal(signal.SIGTERM, _on_signal)
    try:
        code = int(args.handler(args) or 0)
        out.finish(code)
        return code
    except errors.ChokaqError as exc:
        code, reason = classify(exc)
        prefix = {"database_unreachable": "database unreachable: ", "api_unreachable": "API unreachable: "}
        label = "chokaq: error: " if code == output.EXIT_USAGE and reason == "usage" else "chokaq: "
        print(f"{label}{prefix.get(reason, '')}{exc}", file=sys.stderr)
        out.finish(code, reason=reason, message=str(exc), **({"field": exc.field} if exc.field else {}))
        return code
    except KeyboardInterrupt:
        out.finish(output.EXIT_INTERRUPTED, signal=interrupted_by())
        return output.EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`| head`, `| grep -q`): not our error. Point stdout at /dev/null so the
        # interpreter's final flush does not raise again, and exit as a process killed by SIGPIPE would.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:  # a bug or an unforeseen failure: still one final line for a script
        logging.getLogger("chokaq.cli").exception("chokaq %s failed", out.command)
        out.finish(output.EXIT_FAILURE, reason="failure", message=f"{type(exc).__name__}: {exc}")
        return output.EXIT_FAILURE
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
