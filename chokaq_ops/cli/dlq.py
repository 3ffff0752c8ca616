"""`chokaq dlq ls|show|summary|resurrect|purge`: find, judge, resurrect and purge dead jobs.

Filters are the API's: --queue --type --reason --fingerprint --search --tag, --failed-from/--failed-to and
--created-from/--created-to (an ISO 8601 time, or a duration such as 24h meaning that long ago).
resurrect and purge act on --ids (comma-separated, or - to read one id per line from stdin) or on the
filters; they freeze the matching set as a plan first (chunks of 1000, resumable with --resume PLAN_ID
if interrupted) and print its id. --dry-run shows what would be touched and changes nothing.
resurrect --canary N runs N chunks first and watches their jobs; it stops (exit 1, resumable) when more
than --max-failure-rate of them fail again, and keeps checking later chunks; --rate caps jobs/s.
Changes are audited under --actor (default CHOKAQ_ACTOR, else cli:<your OS user name>).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from chokaq_ops import errors
from chokaq_ops.argtypes import positive_int as positive
from chokaq_ops.cli import common, output, target
from chokaq_ops.filters import TIME_HELP, parse_time
from chokaq_ops.fingerprint import fingerprint_text
from chokaq_ops.models import DlqFilter, FailureReason
from chokaq_ops.records import DeadJob
from chokaq_ops.settings import parse_duration
from chokaq_ops.storage.migrate import require_current
from chokaq_ops.storage.plan_ops import PLAN_CHUNK, error_line
from chokaq_ops.storage.read_ops import DLQ_SORTS

if TYPE_CHECKING:
    from chokaq_ops.client.db import DbClient

JOB_FIELDS = (
    "id",
    "location",
    "status",
    "queue",
    "type",
    "payload",
    "tags",
    "priority",
    "attempt_count",
    "idempotency_key",
    "worker_id",
    "heartbeat_at",
    "scheduled_at",
    "created_at",
    "started_at",
    "finished_at",
    "failed_at",
    "duration_ms",
    "created_by",
    "last_modified_by",
    "failure_reason",
    "fingerprint",
    "trace_context",
    "error_details",
)
LS_COLUMNS = ("id", "queue", "type", "failure_reason", "attempt_count", "failed_at", "error")
FILTERS = ("queue", "type", "reason", "fingerprint", "search", "tag")
TIMES = ("failed_from", "failed_to", "created_from", "created_to")


# ---------------------------------------------------------------------- shared by dlq, archive, queues


def add_actor(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--actor", help="name written to the audit log (default: CHOKAQ_ACTOR, else cli:<OS user name>)"
    )


actor_of = target.actor_of


def client_of(args: argparse.Namespace) -> DbClient:
    """The database client of a command that works on the database only."""
    from chokaq_ops.client.db import DbClient

    settings = common.settings_from(args)
    client = DbClient(
        common.open_store(args, settings), actor=actor_of(args), settings=settings, close_store=True
    )
    require_current(client.store)
    return client


WHEN_HELP = TIME_HELP


def when(text: str) -> datetime:
    """A time in the one filter grammar (chokaq_ops.filters): ISO 8601 with a zone, 24h, 24h ago, 7d,
    now, today, yesterday. A time without a zone is refused: exit 2 with the message."""
    try:
        value = parse_time(text, "time")
    except errors.ValidationError as exc:
        raise argparse.ArgumentTypeError(str(exc).replace("time: ", "", 1)) from None
    assert value is not None
    return value


def when_text(text: str) -> str:
    """`when`, checked now but kept as written (`24h` stays `24h`): a filter's words are what a label
    is bound to, so a labelled re-run an hour later asks for the same selection."""
    when(text)
    return text.strip()


def duration(text: str) -> float:
    try:
        return parse_duration(text, "watch")
    except errors.ChokaqError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def per_second(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected jobs per second, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {value}")
    return value


def fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return value


def progress_wanted() -> bool:
    return sys.stderr.isatty()


# ---------------------------------------------------------------------- parser


def add_filters(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("filters (every one given narrows the match)")
    lists = "comma-separated; !VALUE excludes"
    g.add_argument("--queue", help=lists)
    g.add_argument("--type", help=lists)
    g.add_argument("--reason", help=f"{', '.join(r.name for r in FailureReason)}; {lists}")
    g.add_argument("--fingerprint", help="error group ids, comma-separated (see `chokaq dlq summary`)")
    g.add_argument("--search", help="substring of id, type, tags or error details")
    g.add_argument("--tag")
    for name in TIMES:
        end = "inclusive" if name.endswith("_from") else "exclusive"
        g.add_argument(
            "--" + name.replace("_", "-"), type=when_text, metavar="TIME", help=f"{WHEN_HELP} ({end})"
        )


def filters_of(args: argparse.Namespace) -> dict[str, Any]:
    """The filter options as the grammar's words (chokaq_ops.filters parses them, as for Python and API)."""
    return {k: getattr(args, k) for k in (*FILTERS, *TIMES) if getattr(args, k, None) is not None}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "dlq",
        help="list, inspect, resurrect and purge dead jobs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmds = p.add_subparsers(dest="dlq_command", metavar="COMMAND", parser_class=type(p))
    cmds.required = True

    ls = cmds.add_parser("ls", help="list dead jobs (newest failure first)")
    target.add_target(ls)
    common.add_format(ls)
    add_filters(ls)
    ls.add_argument("--ids", help="only these job ids, comma-separated")
    ls.add_argument("--sort", choices=DLQ_SORTS, default="failed_at")
    ls.add_argument("--order", choices=("asc", "desc"), default="desc")
    ls.add_argument("--limit", type=positive, default=50, help="jobs per page (default 50, at most 1000)")
    ls.add_argument("--page", type=positive, default=1)
    ls.set_defaults(handler=run_ls)

    show = cmds.add_parser("show", help="one dead job with its error and heartbeat evidence")
    target.add_target(show)
    common.add_format(show)
    show.add_argument("id")
    show.set_defaults(handler=run_show)

    summary = cmds.add_parser("summary", help="counts by reason, queue and type, and the top error groups")
    target.add_target(summary)
    common.add_format(summary)
    add_filters(summary)
    summary.add_argument("--top", type=positive, default=10, help="error groups to show (default 10)")
    summary.set_defaults(handler=run_summary)

    for name, verb in (
        ("resurrect", "move dead jobs back to the queue"),
        ("purge", "delete dead jobs for good"),
    ):
        b = cmds.add_parser(name, help=f"{verb}, by --ids or filters, in chunks of 1000")
        target.add_target(b)
        common.add_format(b)
        add_filters(b)
        add_actor(b)
        b.add_argument("--ids", action="append", metavar="IDS", help="comma-separated ids, or - for stdin")
        b.add_argument("--all", action="store_true", help="every dead job (when no filter or ids are given)")
        b.add_argument("--max-jobs", type=positive, metavar="N", help="at most N jobs")
        b.add_argument("--dry-run", action="store_true", help="show what would be touched; change nothing")
        b.add_argument("--resume", metavar="PLAN_ID", help="finish an interrupted run (its plan id)")
        b.add_argument(
            "--idempotent-only",
            action="store_true",
            help="only job types a worker declared idempotent (@job(idempotent=True)); with --type, "
            "those of its types",
        )
        b.add_argument(
            "--label",
            metavar="NAME",
            help="name the plan; a re-run with the same label resumes its unfinished plan instead of "
            "freezing a new one (cron-safe). The label is bound to the selection it froze: a re-run asking "
            "for another is refused (exit 2) naming both; --label alone resumes it",
        )
        b.add_argument(
            "--new",
            action="store_true",
            help="with --label: discard the label's unfinished plan (audited) and freeze a new one",
        )
        b.add_argument(
            "--wait",
            type=duration,
            default=0.0,
            metavar="DURATION",
            help="when another run works the plan (one at a time), wait this long for it (default: exit 7 "
            "at once)",
        )
        b.add_argument(
            "--lease-ttl",
            type=duration,
            default=60.0,
            metavar="DURATION",
            help="how long this run's hold on the plan outlives it if it is killed (default 60s; a killed "
            "run on this host is taken over at once)",
        )
        if name == "resurrect":
            b.add_argument(
                "--keep-budget",
                action="store_true",
                help="do not renew the jobs' retry budget: the lifetime clock (Retry.MaxJobAge) keeps "
                "counting from their creation (default: attempts and the clock restart at the resurrect)",
            )
            b.add_argument("--payload", help="replacement payload (JSON) for every job of --ids")
            b.add_argument(
                "--set-tags", dest="tags", metavar="TAGS", help="replacement tags for every job of --ids"
            )
            b.add_argument("--priority", type=int, help="priority after resurrection (default 10)")
            b.add_argument(
                "--canary",
                type=positive,
                default=0,
                metavar="CHUNKS",
                help="run this many chunks first and watch their jobs until they succeed or fail again; "
                "stop (exit 1, resumable) when too many fail again",
            )
            b.add_argument(
                "--watch",
                type=duration,
                default=300.0,
                metavar="DURATION",
                help="how long to watch the canary's jobs at most (default 5m)",
            )
            b.add_argument(
                "--max-failure-rate",
                type=fraction,
                metavar="F",
                help="stop when more than this share (0-1) of finished jobs failed again: checked after "
                "the canary and after every later chunk (default 0.1 with --canary)",
            )
        b.add_argument(
            "--rate", type=per_second, metavar="JOBS_PER_S", help="at most this many jobs per second"
        )
        if name == "resurrect":
            b.add_argument(
                "--spread",
                type=duration,
                default=0.0,
                metavar="DURATION",
                help="jitter the resurrected jobs' due times over this window (e.g. 60s), so jobs that still "
                "fail do not retry in one synchronized wave",
            )
        b.add_argument(
            "--chunk-size",
            type=positive,
            metavar="N",
            help="jobs per transaction, at most 1000 (default; a smaller chunk makes a smaller canary)",
        )
        b.set_defaults(handler=run_bulk, action=name)


# ---------------------------------------------------------------------- commands


def _jsonable_job(job: Mapping[str, Any]) -> dict[str, Any]:
    return {k: job.get(k) for k in JOB_FIELDS}


def run_ls(args: argparse.Namespace) -> int:
    if args.limit > 1000:
        raise errors.ValidationError("--limit is at most 1000", field="limit")
    with target.client_of(args) as client:
        items, total = client.dlq_page(
            sort=args.sort,
            descending=args.order == "desc",
            page=args.page,
            page_size=args.limit,
            **filters_of(args),
            **({"ids": args.ids} if args.ids else {}),
        )
    if args.format == "json":
        common.print_json([_jsonable_job(j) for j in items])
        output.current().finish(0, total=total, page=args.page)
        return 0
    rows = [dict(j) | {"error": error_line(j.get("error_details"))} for j in items]
    common.print_table(rows, LS_COLUMNS)
    common.footer(len(rows), total, "dead jobs", page=args.page, page_size=args.limit)
    return 0


def run_show(args: argparse.Namespace) -> int:
    with target.client_of(args) as client:
        job = client.get_job(args.id)
    if not isinstance(job, DeadJob):
        raise errors.JobNotFound(f"job {args.id} is in {job.location}, not in the dead-letter queue")
    evidence = job.evidence()
    if args.format == "json":
        common.print_json(_jsonable_job(job) | evidence)
        return 0
    # The same fields, order and spelling as `chokaq jobs show`, then the evidence and the error group.
    from chokaq_ops.cli.jobs import SHOW_ORDER

    fp = fingerprint_text(job.get("error_details"))
    group = f"{fp.exception_type}: {fp.template}" + (f" (at {fp.frame})" if fp.frame else "")
    record = {k: job.get(k) for k in JOB_FIELDS if k != "error_details"}
    common.print_record(record | evidence | {"error_group": group}, [*SHOW_ORDER, *evidence, "error_group"])
    print("\n" + (job.get("error_details") or "(no error details)").rstrip())
    return 0


def run_summary(args: argparse.Namespace) -> int:
    with target.client_of(args) as client:
        summary = client.summary(top=args.top, **filters_of(args))
    if args.format == "json":
        common.print_json(summary)
        return 0
    print(f"{summary['total']} dead job(s)\n")
    for key in ("by_reason", "by_queue", "by_type"):
        rows = [
            {key[3:]: e["value"], "count": e["count"], "last_failed_at": e["last_failed_at"]}
            for e in summary[key]
        ]
        common.print_table(rows, (key[3:], "count", "last_failed_at"))
        print()
    rows = [
        {
            "count": e["count"],
            "fingerprint": e["fingerprint"],
            "reason": e["failure_reason"],
            "error": f"{e['exception_type']}: {e['template']}",
            "frame": e["frame"],
            "last_seen": e["last_seen"],
        }
        for e in summary["top_errors"]
    ]
    print("top error groups (filter with --fingerprint):")
    common.print_table(rows, ("count", "fingerprint", "reason", "error", "frame", "last_seen"))
    return 0


def run_bulk(args: argparse.Namespace) -> int:
    """`dlq resurrect|purge`: one run of a plan (chokaq_ops.client.runs), over the database or the API."""
    action: str = args.action
    filters = filters_of(args)
    ids = common.read_ids(args.ids) if args.ids else None
    edits = {
        k: v
        for k, v in {
            "payload": getattr(args, "payload", None),
            "tags": getattr(args, "tags", None),
            "priority": getattr(args, "priority", None),
        }.items()
        if v is not None
    }
    if args.ids is not None and not ids:
        raise errors.ValidationError("--ids gave no ids", field="ids")
    if args.resume:
        if ids or filters or args.all or edits or args.max_jobs or args.chunk_size or args.label:
            raise errors.ValidationError(
                "--resume takes no selection or label: the plan already has its jobs", field="resume"
            )
    elif ids is not None and (filters or args.all):
        raise errors.ValidationError("give --ids or filters, not both", field="ids")
    elif ids is None and not filters and not args.all and not args.label:
        raise errors.ValidationError(
            f"{action} needs --ids, a filter, or --all (every dead job); --label alone resumes its plan",
            field="ids",
        )
    if args.all and filters:
        raise errors.ValidationError("--all means every dead job: drop the filters or --all", field="all")
    if edits and ids is None:
        raise errors.ValidationError("--payload/--set-tags/--priority need --ids", field="payload")
    if args.new and not args.label:
        raise errors.ValidationError("--new goes with --label", field="new")
    safe_only = bool(getattr(args, "idempotent_only", False))
    if safe_only and ids is not None:
        raise errors.ValidationError(
            "--idempotent-only goes with filters, not --ids", field="idempotent_only"
        )
    renew = not getattr(args, "keep_budget", False)
    selection: Any = ids if ids is not None else (DlqFilter() if args.all else None)
    out = output.current()
    # Imported here: the client brings pandas (0.3-0.7 s), which commands that do not run plans never need.
    from chokaq_ops.cli import interrupted_by
    from chokaq_ops.client import runs

    with target.client_of(args) as client:
        if args.dry_run:
            seen: list[dict[str, Any]] = []
            runs.dry_run(
                client,
                action,
                selection,
                label=args.label,
                plan_id=args.resume,
                max_jobs=args.max_jobs,
                renew=renew if action == "resurrect" else True,
                safe_only=safe_only,
                on_event=out.line if args.format == "json" else seen.append,
                **filters,
            )
            if args.format != "json":
                _print_dry_run(args, seen[0])
            return 0
        pacing: dict[str, Any] = {"rate": args.rate}
        if action == "resurrect":
            pacing |= {
                "canary": args.canary,
                "watch": args.watch,
                "max_failure_rate": args.max_failure_rate,
                "spread": args.spread,
                "renew": renew,
            }
        text_events = _TextEvents(args) if args.format != "json" else None
        final = runs.run_plan(
            client,
            action,
            selection,
            label=args.label,
            new=args.new,
            plan_id=args.resume,
            edits=dict.fromkeys(ids, edits) if edits and ids is not None else None,
            max_jobs=args.max_jobs,
            chunk_size=args.chunk_size or PLAN_CHUNK,
            safe_only=safe_only,
            wait=args.wait,
            lease_ttl=args.lease_ttl,
            progress=progress_wanted(),
            on_event=out.line if args.format == "json" else text_events,
            interrupted=interrupted_by,
            **pacing,
            **filters,
        )
    return int(final["exit_code"])


class _TextEvents:
    """The same run told to a person: the plan on stderr, the result as a table, a halt's advice."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    def __call__(self, event: dict[str, Any]) -> None:
        action, kind = self.args.action, event["event"]
        if kind == "plan":
            verb = "resuming" if event["resumed"] else "plan"
            print(
                f"{verb} {event['plan_id']}: {event['remaining']} of {event['total']} job(s) left",
                file=sys.stderr,
            )
        elif kind == "finished" and event.get("plan_id") is None:
            print(f"no dead job matches: nothing to {action}", file=sys.stderr)
        elif kind == "finished":
            keys = [k for k in event if k not in ("event", "reason", "exit_code", "action")]
            common.print_table([event], keys)
        elif kind == "interrupted":
            print(
                f"\ninterrupted ({event['signal']}); finish with: "
                f"chokaq dlq {action} --resume {event['plan_id']}"
                + (f" (or re-run with --label {self.args.label})" if self.args.label else ""),
                file=sys.stderr,
            )
        elif kind == "halted":
            got = event["outcomes"]
            print(f"chokaq: {event['message']}", file=sys.stderr)
            print(
                f"  watched: {got.get('succeeded', 0)} succeeded, {got.get('failed', 0)} failed again, "
                f"{got.get('waiting', 0) + got.get('retrying', 0) + got.get('running', 0)} not finished",
                file=sys.stderr,
            )
            print(
                f"  go on after a fix: chokaq dlq resurrect --resume {event['plan_id']} (add --canary "
                f"again to re-check); drop the rest: chokaq plans discard {event['plan_id']}",
                file=sys.stderr,
            )


def _print_dry_run(args: argparse.Namespace, plan: dict[str, Any]) -> None:
    """A dry run's `plan` event, for a person."""
    if plan.get("plan_id"):
        print(
            f"would resume plan {plan['plan_id']}: {plan['matched']} job(s) left (dry run: nothing changed)"
        )
        return
    print(f"would {args.action} {plan['matched']} dead job(s) (dry run: nothing changed)")
    for key in ("by_reason", "by_queue", "by_type"):
        if plan.get(key):
            print(f"  {key.replace('_', ' ')}: " + ", ".join(f"{k} {v}" for k, v in plan[key].items()))
    if plan.get("sample_ids"):
        print("  sample: " + ", ".join(plan["sample_ids"]))
    for warning in plan.get("warnings") or ():
        print(f"  warning: {warning}")
