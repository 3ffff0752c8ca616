"""`chokaq schedules ls|show|add|pause|resume|run|rm`: recurring schedules (docs/schedules.md).

A schedule enqueues a job of its type at every tick of its cron expression; every `chokaq serve` and
`chokaq worker` process checks for due ticks, and each tick runs once however many do.

  chokaq schedules add reports.nightly report.v1 "30 2 * * *" --tz Europe/Berlin --payload '{"region": "eu"}'
  chokaq schedules ls
  chokaq schedules run reports.nightly        # one job now, outside the ticks; prints its id

CRON is five crontab fields, six with seconds first (`*/10 * * * * *`), or @hourly, @daily, @weekly,
@monthly, @yearly. --misfire says what happens to ticks missed while no process ran: skip, once (the
newest runs, the default) or catch_up (the newest --catch-up N run). Changes are audited under --actor
(default CHOKAQ_ACTOR, else cli:<your OS user name>).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from chokaq_ops.cli import common
from chokaq_ops.cli.dlq import actor_of, add_actor
from chokaq_ops.cli.enqueue import ready_store
from chokaq_ops.models import Actor
from chokaq_ops.records import ScheduleRecord
from chokaq_ops.schedules import MISFIRE_POLICIES, next_ticks
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
NEXT_RUNS = 5
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
    common.add_common(ls)
    common.add_format(ls)
    ls.add_argument("--type", help="only schedules of this job type")
    state = ls.add_mutually_exclusive_group()
    state.add_argument("--paused", dest="paused", action="store_true", default=None, help="only paused ones")
    state.add_argument("--active", dest="paused", action="store_false", help="only running ones")
    ls.set_defaults(handler=run_ls)
    show = cmds.add_parser("show", help="one schedule, its next ticks and its recent runs")
    common.add_common(show)
    common.add_format(show)
    show.add_argument("name")
    show.set_defaults(handler=run_show)
    add = cmds.add_parser("add", help="create a schedule")
    common.add_common(add)
    common.add_format(add)
    add_actor(add)
    add.add_argument("name", help="letters, digits and . _ : @ - (at most 80)")
    add.add_argument("type", help="the job type each tick enqueues")
    add.add_argument("cron", help='the cron expression, quoted: "*/5 * * * *"')
    add.add_argument("--tz", default="UTC", help="IANA time zone of the expression (default UTC)")
    add.add_argument("--payload", help="each job's payload, JSON text (default {})")
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
        common.add_common(c)
        common.add_format(c)
        add_actor(c)
        c.add_argument("name")
        c.set_defaults(handler=handler)


def _actor(args: argparse.Namespace) -> Actor:
    return Actor(actor_of(args))


def _view(schedule: ScheduleRecord) -> dict[str, Any]:
    return {**schedule, "next_runs": next_ticks(schedule.cron, schedule.tz, schedule.next_run_at, NEXT_RUNS)}


def page_no(found: list[ScheduleRecord]) -> int:
    return len(found) // 1000 + 1


def _emit_one(schedule: ScheduleRecord, fmt: str) -> None:
    if fmt == "json":
        common.print_json(_view(schedule))
    else:
        common.emit([schedule], LS_COLUMNS, fmt)


def run_ls(args: argparse.Namespace) -> int:
    found: list[ScheduleRecord] = []
    with ready_store(args) as store:
        while True:
            page = store.list_schedules(
                type=args.type, paused=args.paused, page=page_no(found), page_size=1000
            )
            found += page.items
            if len(found) >= page.total or not page.items:
                break
    rows = [_view(s) for s in found] if args.format == "json" else found
    common.emit(rows, LS_COLUMNS, args.format, noun="schedules")
    return 0


def run_show(args: argparse.Namespace) -> int:
    with ready_store(args) as store:
        schedule = store.get_schedule(args.name)
        runs = store.schedule_runs(args.name, page_size=RECENT_RUNS)
    view = _view(schedule)
    if args.format == "json":
        common.print_json({**view, "recent_runs": runs.items})
        return 0
    view["next_runs"] = ", ".join(common.text(t) for t in view["next_runs"]) or None
    common.print_record(view, SHOW_ORDER)
    print()
    common.print_table(runs.items, RUN_COLUMNS)
    common.footer(len(runs.items), runs.total, "runs")
    return 0


def run_add(args: argparse.Namespace) -> int:
    definition: dict[str, Any] = {
        "name": args.name,
        "type": args.type,
        "cron": args.cron,
        "tz": args.tz,
        "queue": args.queue,
        "priority": args.priority,
        "tags": args.tags,
        "misfire": args.misfire,
        "catch_up_max": args.catch_up,
        "paused": args.paused,
    }
    if args.payload is not None:
        definition["payload"] = sys.stdin.read() if args.payload == "-" else args.payload
    if args.grace is not None:
        definition["misfire_grace_seconds"] = parse_duration(args.grace, "grace")
    with ready_store(args, create=True) as store:
        made = store.create_schedule(definition, actor=_actor(args))
    _emit_one(made, args.format)
    return 0


def run_pause(args: argparse.Namespace) -> int:
    with ready_store(args) as store:
        _emit_one(store.pause_schedule(args.name, actor=_actor(args)), args.format)
    return 0


def run_resume(args: argparse.Namespace) -> int:
    with ready_store(args) as store:
        _emit_one(store.resume_schedule(args.name, actor=_actor(args)), args.format)
    return 0


def run_now(args: argparse.Namespace) -> int:
    with ready_store(args) as store:
        run = store.trigger_schedule(args.name, actor=_actor(args))
    if args.format == "json":
        common.print_json(run)
    else:
        print(run.job_id)
    return 0


def run_rm(args: argparse.Namespace) -> int:
    with ready_store(args) as store:
        store.delete_schedule(args.name, actor=_actor(args))
    if args.format == "json":
        common.print_json({"deleted": args.name})
    else:
        print(f"schedule {args.name} deleted", file=sys.stderr)
    return 0
