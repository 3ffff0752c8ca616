"""The `chokaq` command. Each command group lives in its own module with a `register(subparsers)`.

Exit codes: 0 ok, 1 failure, 2 usage error (bad flags or bad input, with a message on stderr).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from chokaq_ops import errors
from chokaq_ops.redact import install_log_filter

# Order is the order of `chokaq --help`.
COMMAND_MODULES = (
    "serve",
    "worker",
    "migrate",
    "token",
    "enqueue",
    "jobs",
    "queues",
    "dlq",
    "archive",
    "rescue",
    "demo",
    "bench",
)


class UsageError(errors.ChokaqError):
    """Bad command-line usage."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 on its own; keep its contract, add our prefix
        self.print_usage(sys.stderr)
        self.exit(2, f"chokaq: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="chokaq", description="chokaq: a job queue on a relational database, for its operators."
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR (default INFO)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"chokaq_ops.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"chokaq_ops.cli.{name}":
                continue  # command not built yet
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    install_log_filter()
    try:
        return int(args.handler(args) or 0)
    except (UsageError, errors.ValidationError, errors.ConfigError) as exc:
        print(f"chokaq: error: {exc}", file=sys.stderr)
        return 2
    except errors.JobNotFound as exc:
        print(f"chokaq: {exc}", file=sys.stderr)
        return 1
    except errors.ChokaqError as exc:
        print(f"chokaq: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
