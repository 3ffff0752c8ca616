"""`chokaq plans ls|show|discard|resume`: the bulk plans that `chokaq dlq resurrect|purge`, `chokaq cancel`
(and notebooks and the API) freeze, seen and finished from a shell or a cron job, on the database or the
API (--api).

resume runs an unfinished plan to its end with the contract of `chokaq dlq resurrect` (JSON lines with
--format json, the plan id first; docs/cli-json.md). discard drops what a plan has not done yet (done
chunks stay done; discarding a discarded plan is no error); both are audited. `ls --orphans` lists the
freezes of plans in the making and abandoned ones (their rows are reclaimed automatically).
"""

from __future__ import annotations

import argparse

from chokaq_ops.cli import common, target
from chokaq_ops.cli.dlq import add_actor, duration, per_second

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
    "rate",
    "created_at",
    "finished_at",
)
SHOW_ORDER = (
    *LS_COLUMNS,
    "chunk_size",
    "lease_holder",
    "lease_until",
    "approved_by",
    "approved_at",
    "updated_at",
)
ORPHAN_COLUMNS = ("plan_id", "actor", "state", "items", "abandoned", "started_at", "beat_at")


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
    target.add_target(ls)
    common.add_format(ls)
    ls.add_argument("--state", choices=("ready", "running", "done", "discarded"))
    ls.add_argument("--action", choices=("resurrect", "purge", "cancel"))
    ls.add_argument("--label", help="only plans with this label")
    ls.add_argument(
        "--orphans",
        action="store_true",
        help="instead: plans being frozen and abandoned freezes (reclaimed automatically)",
    )
    ls.add_argument("--limit", type=int, default=50, help="at most this many (default 50, at most 1000)")
    ls.set_defaults(handler=run_ls)
    show = cmds.add_parser("show", help="one plan: counts, state, label, pace, lease, approval")
    target.add_target(show)
    common.add_format(show)
    show.add_argument("id")
    show.set_defaults(handler=run_show)
    discard = cmds.add_parser("discard", help="drop what an unfinished plan has not done")
    target.add_target(discard)
    common.add_format(discard)
    add_actor(discard)
    discard.add_argument("id")
    discard.set_defaults(handler=run_discard)
    resume = cmds.add_parser("resume", help="run an unfinished plan to its end")
    target.add_target(resume)
    common.add_format(resume)
    add_actor(resume)
    resume.add_argument("id")
    resume.add_argument("--rate", type=per_second, help="the plan's pace from now on, jobs per second")
    resume.add_argument("--wait", type=duration, default=0.0, metavar="DURATION", help="as in dlq resurrect")
    resume.add_argument(
        "--lease-ttl", type=duration, default=60.0, metavar="DURATION", help="as in dlq resurrect"
    )
    resume.set_defaults(handler=run_resume)


def run_ls(args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= 1000:
        from chokaq_ops import errors

        raise errors.ValidationError("--limit is between 1 and 1000", field="limit")
    columns: tuple[str, ...]
    with target.client_of(args) as client:
        if args.orphans:
            rows = client.orphan_rows()
            columns, noun = ORPHAN_COLUMNS, "freezes"
        else:
            rows = client.plan_rows(state=args.state, action=args.action, label=args.label, limit=args.limit)
            columns, noun = LS_COLUMNS, "plans"
    if args.format == "json":
        common.print_json(rows)
        return 0
    common.print_table(rows, columns)
    common.footer(len(rows), len(rows), noun)
    return 0


def run_show(args: argparse.Namespace) -> int:
    with target.client_of(args) as client:
        return _print_plan(args, client.plan_record(args.id))


def run_discard(args: argparse.Namespace) -> int:
    with target.client_of(args) as client:
        return _print_plan(args, client.plan(args.id).discard().as_dict())


def _print_plan(args: argparse.Namespace, plan: dict) -> int:
    if args.format == "json":
        common.print_json(plan)
    else:
        common.print_record(plan, SHOW_ORDER)
    return 0


def run_resume(args: argparse.Namespace) -> int:
    """Any plan (resurrect, purge, cancel) resumed by id, as `chokaq dlq <action> --resume ID` does."""
    from chokaq_ops.cli import interrupted_by, output
    from chokaq_ops.cli.dlq import _TextEvents, progress_wanted
    from chokaq_ops.client import runs

    with target.client_of(args) as client:
        plan = client.plan(args.id)
        args.action, args.label = plan.action, None
        final = runs.run_plan(
            client,
            plan.action,
            plan_id=plan.id,
            rate=args.rate,
            wait=args.wait,
            lease_ttl=args.lease_ttl,
            progress=progress_wanted(),
            on_event=output.current().line if args.format == "json" else _TextEvents(args),
            interrupted=interrupted_by,
        )
    return int(final["exit_code"])
