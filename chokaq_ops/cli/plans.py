"""`chokaq plans ls|show|discard|resume`: the bulk plans that `chokaq dlq resurrect|purge` (and notebooks and
the API) freeze, seen and finished from a shell or a cron job.

resume runs an unfinished plan to its end with the contract of `chokaq dlq resurrect` (JSON lines with
--format json, the plan id first; exit 0 done, 1 halted, 3 interrupted, 4 database unreachable).
discard drops what a plan has not done yet (done chunks stay done); both are audited under --actor.
"""

from __future__ import annotations

import argparse

from chokaq_ops.cli import common
from chokaq_ops.cli.dlq import actor_of, add_actor, client_of
from chokaq_ops.models import Actor

LS_COLUMNS = (
    "id",
    "action",
    "label",
    "state",
    "actor",
    "total",
    "done",
    "skipped",
    "chunks_done",
    "chunks",
    "created_at",
    "finished_at",
)
SHOW_ORDER = (*LS_COLUMNS, "chunk_size", "approved_by", "approved_at", "updated_at")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plans",
        help="list, inspect, resume and discard bulk plans",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmds = p.add_subparsers(dest="plans_command", metavar="COMMAND", parser_class=type(p))
    cmds.required = True
    ls = cmds.add_parser("ls", help="plans, newest first")
    common.add_common(ls)
    common.add_format(ls)
    ls.add_argument("--state", choices=("ready", "running", "done", "discarded"))
    ls.add_argument("--action", choices=("resurrect", "purge", "cancel"))
    ls.add_argument("--limit", type=int, default=50, help="at most this many (default 50, at most 1000)")
    ls.set_defaults(handler=run_ls)
    show = cmds.add_parser("show", help="one plan: counts, state, label, approval")
    common.add_common(show)
    common.add_format(show)
    show.add_argument("id")
    show.set_defaults(handler=run_show)
    discard = cmds.add_parser("discard", help="drop what an unfinished plan has not done")
    common.add_common(discard)
    common.add_format(discard)
    add_actor(discard)
    discard.add_argument("id")
    discard.set_defaults(handler=run_discard)
    resume = cmds.add_parser("resume", help="run an unfinished plan to its end")
    common.add_common(resume)
    common.add_format(resume)
    add_actor(resume)
    resume.add_argument("id")
    resume.add_argument("--rate", type=float, help="at most this many jobs per second")
    resume.set_defaults(handler=run_resume)


def run_ls(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        rows, total = client.store.list_plans(state=args.state, action=args.action, page_size=args.limit)
    if args.format == "json":
        common.print_json(rows)
        return 0
    common.print_table(rows, LS_COLUMNS)
    common.footer(len(rows), total, "plans", page_size=args.limit)
    return 0


def run_show(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        return _print_plan(args, client.store.get_plan(args.id))


def run_discard(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        return _print_plan(args, client.store.discard_plan(args.id, actor=Actor(actor_of(args))))


def _print_plan(args: argparse.Namespace, plan: dict) -> int:
    if args.format == "json":
        common.print_json_line(plan)
    else:
        common.print_record(plan, SHOW_ORDER)
    return 0


def run_resume(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        action = client.store.get_plan(args.id)["action"]
    if action == "cancel":
        with client_of(args) as client:
            plan = client.plan(args.id)
            plan.execute(progress=False, rate=args.rate)
            out = {"event": "finished", "plan_id": plan.id, "state": plan.state, "cancelled": plan.done}
        common.print_json_line(out) if args.format == "json" else common.print_record(out, list(out))
        return 0
    # A resurrect or purge plan resumes exactly as `chokaq dlq <action> --resume ID` does.
    from chokaq_ops.cli import build_parser

    argv = ["dlq", action, "--resume", args.id, "--format", args.format, "--actor", actor_of(args)]
    argv += ["--db", args.db] if getattr(args, "db", None) else []
    argv += ["--config", args.config] if getattr(args, "config", None) else []
    argv += ["--rate", str(args.rate)] if args.rate else []
    again = build_parser().parse_args(argv)
    return int(again.handler(again) or 0)
