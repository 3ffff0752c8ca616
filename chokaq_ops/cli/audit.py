"""`chokaq audit ls`: the audit log, newest first (who changed what: edits, resurrects, purges, plans and
their lifecycle: plan_create, plan_start, plan_halt, plan_interrupt, plan_resume, plan_finish,
plan_discard)."""

from __future__ import annotations

import argparse

from chokaq_ops.cli import common
from chokaq_ops.cli.dlq import WHEN_HELP, client_of, when

COLUMNS = ("id", "at", "actor", "action", "job_id", "plan_id", "count", "details")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="read the audit log", description=__doc__)
    cmds = p.add_subparsers(dest="audit_command", metavar="COMMAND", parser_class=type(p))
    cmds.required = True
    ls = cmds.add_parser("ls", help="audit rows, newest first")
    common.add_common(ls)
    common.add_format(ls)
    ls.add_argument("--actor")
    ls.add_argument("--action", help="e.g. resurrect, purge_dlq, plan_create, plan_interrupt")
    ls.add_argument("--job-id")
    ls.add_argument("--plan-id")
    ls.add_argument("--since", type=when, metavar="TIME", help=WHEN_HELP)
    ls.add_argument("--limit", type=int, default=100, help="at most this many (default 100, at most 1000)")
    ls.set_defaults(handler=run_ls)


def run_ls(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        page = client.store.list_audit(
            actor=args.actor,
            action=args.action,
            job_id=args.job_id,
            plan_id=args.plan_id,
            since=args.since,
            page_size=args.limit,
        )
    if args.format == "json":
        common.print_json(page.items)
        return 0
    common.print_table(page.items, COLUMNS)
    common.footer(len(page.items), page.total, "audit rows", page_size=args.limit)
    return 0
