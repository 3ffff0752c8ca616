"""`chokaq circuits ls|open|close`: the circuit breaker per job type (docs/circuits.md).

open forces a type's circuit open: its jobs are deferred (no attempt consumed) until someone closes it;
close closes it and clears its failure count. Both are audited under --actor (default CHOKAQ_ACTOR, else
cli:<your OS user name>).
"""

from __future__ import annotations

import argparse

from chokaq_ops.cli import common
from chokaq_ops.cli.dlq import add_actor, client_of

LS_COLUMNS = ("type", "state", "forced", "failures", "open_for_s", "probes", "transitions", "last_failure_at")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "circuits",
        help="list circuit breakers; force one open or closed",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmds = p.add_subparsers(dest="circuits_command", metavar="COMMAND", parser_class=type(p))
    cmds.required = True
    ls = cmds.add_parser("ls", help="every job type whose circuit failed or was forced")
    common.add_common(ls)
    common.add_format(ls)
    ls.set_defaults(handler=run_ls)
    for name, help_text in (
        ("open", "force a type's circuit open until it is closed"),
        ("close", "close a type's circuit and clear its failure count"),
    ):
        c = cmds.add_parser(name, help=help_text)
        common.add_common(c)
        common.add_format(c)
        add_actor(c)
        c.add_argument("type", help="the job type")
        c.set_defaults(handler=run_set, state="open" if name == "open" else "closed")


def run_ls(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        rows = client.store.list_circuits()
    common.emit(rows, LS_COLUMNS, args.format, noun="circuits")
    return 0


def run_set(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        row = client.set_circuit(args.type, args.state)
    common.emit([row], LS_COLUMNS, args.format)
    return 0
