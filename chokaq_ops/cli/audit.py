"""`chokaq audit ls`: the audit log, newest first (who changed what: edits, resurrects, purges, plans and
their lifecycle: plan_create, plan_start, plan_lease, plan_pace, plan_halt, plan_interrupt, plan_resume,
plan_release, plan_finish, plan_discard, plan_reclaim), from the database or the API (--api). With
--format json each row's `details` is an object."""

from __future__ import annotations

import argparse
import json

from chokaq_ops import errors
from chokaq_ops.cli import common, target
from chokaq_ops.cli.dlq import WHEN_HELP, when

COLUMNS = ("id", "at", "actor", "action", "job_id", "plan_id", "count", "details")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="read the audit log", description=__doc__)
    cmds = p.add_subparsers(dest="audit_command", metavar="COMMAND", parser_class=type(p))
    cmds.required = True
    ls = cmds.add_parser("ls", help="audit rows, newest first")
    target.add_target(ls)
    common.add_format(ls)
    ls.add_argument("--actor")
    ls.add_argument("--action", help="e.g. resurrect, purge_dlq, plan_create, plan_interrupt")
    ls.add_argument("--job-id")
    ls.add_argument("--plan-id")
    ls.add_argument("--since", type=when, metavar="TIME", help=WHEN_HELP)
    ls.add_argument("--limit", type=int, default=100, help="at most this many (default 100, at most 1000)")
    ls.set_defaults(handler=run_ls)


def run_ls(args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= 1000:
        raise errors.ValidationError("--limit is between 1 and 1000", field="limit")
    # --actor filters by who acted here (it is not who this command acts as).
    with target.client_of(_without_actor(args)) as client:
        rows, total = client.audit_rows(
            actor=args.actor,
            action=args.action,
            job_id=args.job_id,
            plan_id=args.plan_id,
            since=args.since,
            limit=args.limit,
        )
    if args.format == "json":
        common.print_json(rows)
        return 0
    table = [
        r | {"details": json.dumps(r["details"]) if r.get("details") is not None else None} for r in rows
    ]
    common.print_table(table, COLUMNS)
    common.footer(len(rows), total, "audit rows", page_size=args.limit)
    return 0


def _without_actor(args: argparse.Namespace) -> argparse.Namespace:
    copy = argparse.Namespace(**vars(args))
    copy.actor = None
    return copy
