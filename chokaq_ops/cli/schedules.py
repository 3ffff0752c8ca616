"""`chokaq schedules ls|show|add|pause|resume|run|rm`: recurring schedules (docs/schedules.md).

A schedule enqueues a job of its type at every tick of its cron expression; every `chokaq serve` and
`chokaq worker` process checks for due ticks, and each tick runs once however many do.

  chokaq schedules add reports.nightly report.v1 "30 2 * * *" --tz Europe/Berlin --payload '{"region": "eu"}'
  chokaq schedules ls
  chokaq schedules run reports.nightly        # one job now, outside the ticks; prints its id

CRON is five crontab fields, six with seconds first (`*/10 * * * * *`), or @hourly, @daily, @weekly,
@monthly, @yearly. --misfire says what happens to ticks missed while no process ran: skip, once (the
newest runs, the default) or catch_up (the newest --catch-up N run). Changes are audited under --actor
(default CHOKAQ_ACTOR, else cli:<your OS user name>); over a running API (--api URL, docs/cli-json.md)
under the token's name: pause, resume and run need an operator token, add and rm an admin one.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from chokaq_ops.cli import common, target
from chokaq_ops.cli.dlq import add_actor
from chokaq_ops.schedules import MISFIRE_POLICIES
from chokaq_ops.settings import parse_duration

LS_COLUMNS = (
    "name",
    "type",
    "cron",
    "tz",
    "paused",
    "next_run_at",
    "last_run_at",
    "last_outcome",
    "runs_total",
)
RUN_COLUMNS = ("tick_at", "kind", "late", "job_id", "outcome", "failure_reason", "fired_by")
SHOW_ORDER = (
    "name", "type", "cron", "tz", "paused", "source", "next_runs", "last_tick_at", "last_run_at",
    "last_job_id", "last_outcome", "last_failure_reason", "runs_total", "missed_total", "misfire",
    "catch_up_max", "misfire_grace_seconds", "queue", "priority", "tags", "payload",
)  # fmt: skip
RECENT_RUNS = 10


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "schedules",
        help="list, add, pause, resume, trigger or remove recurring schedules",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmds = p.add_subparsers(dest="schedules_command", metavar="COMMAND", parser_class=type(p))
    cmds.required = True
    ls = cmds.add_parser("ls", help="every schedule: next tick, last run and its outcome")
    target.add_target(ls)
    common.add_format(ls)
    ls.add_argument("--type", help="only schedules of this job type")
    state = ls.add_mutually_exclusive_group()
    state.add_argument("--paused", dest="paused", action="store_true", default=None, help="only paused ones")
    state.add_argument("--active", dest="paused", action="store_false", help="only running ones")
    ls.set_defaults(handler=run_ls)
    show = cmds.add_parser("show", help="one schedule, its next ticks and its recent runs")
    target.add_target(show)
    common.add_format(show)
    show.add_argument("name")
    show.set_defaults(handler=run_show)
    add = cmds.add_parser("add", help="create a schedule")
    target.add_target(add)
    common.add_format(add)
    add_actor(add)
    add.add_argument("name", help="letters, digits and . _ : @ - (at most 80)")
    add.add_argument("type", help="the job type each tick enqueues")
    add.add_argument("cron", help='the cron expression, quoted: "*/5 * * * *"')
    add.add_argument("--tz", default="UTC", help="IANA time zone of the expression (default UTC)")
    add.add_argument("--payload", help="each job's payload: JSON text, or - for stdin (default {})")
    add.add_argument("--queue", default="default", help="queue of the jobs (default: default)")
    add.add_argument("--priority", type=int, default=10, help="priority of the jobs (default 10)")
    add.add_argument("--tags", help="comma-separated tags of the jobs (each also gets schedule:<name>)")
    add.add_argument(
        "--misfire", choices=MISFIRE_POLICIES, default="once", help="missed ticks (default once)"
    )
    add.add_argument("--catch-up", type=int, default=1, metavar="N", help="with --misfire catch_up: run N")
    add.add_argument(
        "--grace", metavar="DURATION", help="later than this a tick is missed (Schedules.MisfireGrace)"
    )
    add.add_argument("--paused", action="store_true", help="create it paused")
    add.set_defaults(handler=run_add)
    for name, help_text, handler in (
        ("pause", "stop a schedule's ticks until resumed", run_pause),
        ("resume", "run a paused schedule's ticks again, from the next one", run_resume),
        ("run", "enqueue the schedule's job now, outside its ticks; prints the job id", run_now),
        ("rm", "delete a schedule and its run history", run_rm),
    ):
        c = cmds.add_parser(name, help=help_text)
        target.add_target(c)
        common.add_format(c)
        add_actor(c)
        c.add_argument("name")
        c.set_defaults(handler=handler)


def _emit_one(schedule: dict[str, Any], fmt: str) -> None:
    if fmt == "json":
        common.print_json(schedule)
    else:
        common.print_table([schedule], LS_COLUMNS)


def run_ls(args: argparse.Namespace) -> int:
    with target.client_of(args) as client:
        found = client.schedule_rows(type=args.type, paused=args.paused)
    common.emit(found, LS_COLUMNS, args.format, noun="schedules")
    return 0


def run_show(args: argparse.Namespace) -> int:
    with target.client_of(args) as client:
        schedule = client.schedule(args.name)
        runs, total = client.schedule_run_rows(args.name, limit=RECENT_RUNS)
    if args.format == "json":
        common.print_json({**schedule, "recent_runs": runs})
        return 0
    shown = {**schedule, "next_runs": ", ".join(common.text(t) for t in schedule["next_runs"]) or None}
    common.print_record(shown, SHOW_ORDER)
    print()
    common.print_table(runs, RUN_COLUMNS)
    common.footer(len(runs), total, "runs")
    return 0


def run_add(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {
        "tz": args.tz,
        "queue": args.queue,
        "priority": args.priority,
        "misfire": args.misfire,
        "catch_up_max": args.catch_up,
        "paused": args.paused,
    }
    if args.tags is not None:
        fields["tags"] = args.tags
    if args.payload is not None:
        fields["payload"] = sys.stdin.read() if args.payload == "-" else args.payload
    if args.grace is not None:
        fields["misfire_grace_seconds"] = parse_duration(args.grace, "grace")
    with target.client_of(args, create=True) as client:
        made = client.create_schedule(args.name, args.type, args.cron, **fields)
    _emit_one(made, args.format)
    return 0


def run_pause(args: argparse.Namespace) -> int:
    with target.client_of(args) as client:
        _emit_one(client.pause_schedule(args.name), args.format)
    return 0


def run_resume(args: argparse.Namespace) -> int:
    with target.client_of(args) as client:
        _emit_one(client.resume_schedule(args.name), args.format)
    return 0


def run_now(args: argparse.Namespace) -> int:
    with target.client_of(args) as client:
        run = client.trigger_schedule(args.name)
    if args.format == "json":
        common.print_json(run)
    else:
        print(run["job_id"])
    return 0


def run_rm(args: argparse.Namespace) -> int:
    with target.client_of(args) as client:
        client.delete_schedule(args.name)
    if args.format == "json":
        common.print_json({"deleted": args.name})
    else:
        print(f"chokaq: schedule {args.name} deleted", file=sys.stderr)
    return 0
