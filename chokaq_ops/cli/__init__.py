"""The `chokaq` command. Each command group lives in its own module with a `register(subparsers)`.

Packages above the library add commands through the `chokaq.commands` entry-point group (a name and a
`register(subparsers)` function): `chokaq serve` is chokaq_api's (chokaq_api/serve.py), so this package
runs the web API without importing it.

Exit codes: 0 ok, 1 failure, 2 usage error (bad flags or bad input, with a message on stderr).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import NoReturn

from chokaq_ops import errors
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
    "schedules",
    "workers",
    "dlq",
    "plans",
    "audit",
    "archive",
    "rescue",
    "demo",
    "bench",
)


class _Parser(argparse.ArgumentParser):
    # argparse exits 2 on its own; keep its contract, add our prefix
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"chokaq: error: {message}\n")


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


# Exit codes (docs/notebooks.md): 0 ok, 1 halted or trouble, 2 usage, 3 interrupted (SIGINT/SIGTERM
# between chunks; resumable), 4 database unreachable.
EXIT_DB_UNREACHABLE = 4


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        getattr(args, "usage_parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    install_log_filter()
    try:
        return int(args.handler(args) or 0)
    except (errors.UsageError, errors.ValidationError, errors.ConfigError) as exc:
        print(f"chokaq: error: {exc}", file=sys.stderr)
        return 2
    except errors.JobNotFound as exc:
        print(f"chokaq: {exc}", file=sys.stderr)
        return 1
    except errors.TransientStorageError as exc:
        # The database did not answer (down, unreachable, timing out): distinct from trouble in the work,
        # so a cron wrapper can retry later instead of paging someone.
        print(f"chokaq: database unreachable: {exc}", file=sys.stderr)
        return EXIT_DB_UNREACHABLE
    except errors.ChokaqError as exc:
        print(f"chokaq: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`, `| grep -q`): not our error. Point stdout at /dev/null so the
        # interpreter's final flush does not raise again, and exit as a process killed by SIGPIPE would.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
