"""`chokaq queues ls|pause|resume|set`: see and steer the queues.

set takes --max-workers N and --zombie-timeout DURATION (each `none` clears the override), and --active /
--inactive. Pausing stops new fetches (running jobs finish); an inactive queue is skipped entirely.
Changes are audited under --actor (default CHOKAQ_ACTOR, else cli:<your OS user name>).
"""

from __future__ import annotations

import argparse
from typing import Any

from chokaq_ops.cli import common
from chokaq_ops.cli.dlq import add_actor, client_of
from chokaq_ops.settings import parse_duration
from chokaq_ops.storage.admin_ops import UNSET

LS_COLUMNS = (
    "name",
    "paused",
    "active",
    "pending",
    "fetched",
    "processing",
    "max_lag_seconds",
    "max_workers",
    "zombie_timeout_seconds",
    "failed_total",
)


def _none_or(convert: Any) -> Any:
    def parse(text: str) -> Any:
        if text.strip().lower() in ("none", "null", "default", "-"):
            return None
        try:
            return convert(text)
        except Exception as exc:
            raise argparse.ArgumentTypeError(f"{exc} (or `none` to clear)") from None

    return parse


def _whole(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(f"must be at least 1, got {value}")
    return value


def _seconds(text: str) -> int:
    seconds = parse_duration(text)
    if seconds != int(seconds) or seconds < 1:
        raise ValueError(f"a zombie timeout is a whole number of seconds of at least 1, got {text!r}")
    return int(seconds)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "queues",
        help="list queues; pause, resume or limit them",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmds = p.add_subparsers(dest="queues_command", metavar="COMMAND", parser_class=type(p))
    cmds.required = True
    ls = cmds.add_parser("ls", help="every queue with its counts, lag and limits")
    common.add_common(ls)
    common.add_format(ls)
    ls.set_defaults(handler=run_ls)
    for name, help_text in (
        ("pause", "stop fetching from a queue"),
        ("resume", "fetch from a paused queue again"),
    ):
        q = cmds.add_parser(name, help=help_text)
        common.add_common(q)
        common.add_format(q)
        add_actor(q)
        q.add_argument("name")
        q.set_defaults(handler=run_set, paused=name == "pause")
    s = cmds.add_parser("set", help="change a queue's limits")
    common.add_common(s)
    common.add_format(s)
    add_actor(s)
    s.add_argument("name")
    s.add_argument("--max-workers", type=_none_or(_whole), default=UNSET, metavar="N|none")
    s.add_argument("--zombie-timeout", type=_none_or(_seconds), default=UNSET, metavar="DURATION|none")
    active = s.add_mutually_exclusive_group()
    active.add_argument("--active", dest="active", action="store_true", default=UNSET)
    active.add_argument("--inactive", dest="active", action="store_false")
    s.set_defaults(handler=run_set, paused=UNSET)


def run_ls(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        rows = client.store.queue_stats()
    common.emit(rows, LS_COLUMNS, args.format, noun="queues")
    return 0


def run_set(args: argparse.Namespace) -> int:
    changes = {
        "paused": args.paused,
        "active": getattr(args, "active", UNSET),
        "zombie_timeout_seconds": getattr(args, "zombie_timeout", UNSET),
        "max_workers": getattr(args, "max_workers", UNSET),
    }
    with client_of(args) as client:
        row = client.set_queue(args.name, **changes)
    common.emit(
        [row],
        ("name", "paused", "active", "max_workers", "zombie_timeout_seconds", "updated_at"),
        args.format,
    )
    return 0
