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
import getpass
import os
import signal
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from chokaq_ops import errors
from chokaq_ops.cli import common
from chokaq_ops.filters import TIME_HELP, dlq_filter, parse_choice, parse_time
from chokaq_ops.fingerprint import fingerprint_text
from chokaq_ops.models import Actor, FailureReason
from chokaq_ops.records import DeadJob
from chokaq_ops.settings import parse_duration
from chokaq_ops.storage.migrate import require_current
from chokaq_ops.storage.plan_ops import PLAN_CHUNK, error_line
from chokaq_ops.storage.read_ops import DLQ_SORTS

if TYPE_CHECKING:
    from chokaq_ops.analysis.plans import Plan
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


def actor_of(args: argparse.Namespace) -> str:
    name = getattr(args, "actor", None) or os.environ.get("CHOKAQ_ACTOR")
    if name:
        return name
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"cli:{user}"


def client_of(args: argparse.Namespace) -> DbClient:
    # Imported here: the client brings pandas (0.3-0.7 s), which no other command needs to start.
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


def positive(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


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
        g.add_argument("--" + name.replace("_", "-"), type=when, metavar="TIME", help=f"{WHEN_HELP} ({end})")


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
    common.add_common(ls)
    common.add_format(ls)
    add_filters(ls)
    ls.add_argument("--ids", help="only these job ids, comma-separated")
    ls.add_argument("--sort", choices=DLQ_SORTS, default="failed_at")
    ls.add_argument("--order", choices=("asc", "desc"), default="desc")
    ls.add_argument("--limit", type=positive, default=50, help="jobs per page (default 50, at most 1000)")
    ls.add_argument("--page", type=positive, default=1)
    ls.set_defaults(handler=run_ls)

    show = cmds.add_parser("show", help="one dead job with its error and heartbeat evidence")
    common.add_common(show)
    common.add_format(show)
    show.add_argument("id")
    show.set_defaults(handler=run_show)

    summary = cmds.add_parser("summary", help="counts by reason, queue and type, and the top error groups")
    common.add_common(summary)
    common.add_format(summary)
    add_filters(summary)
    summary.add_argument("--top", type=positive, default=10, help="error groups to show (default 10)")
    summary.set_defaults(handler=run_summary)

    for name, verb in (
        ("resurrect", "move dead jobs back to the queue"),
        ("purge", "delete dead jobs for good"),
    ):
        b = cmds.add_parser(name, help=f"{verb}, by --ids or filters, in chunks of 1000")
        common.add_common(b)
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
            "freezing a new one (cron-safe)",
        )
        if name == "resurrect":
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
    with client_of(args) as client:
        page = client.store.list_dlq(
            dlq_filter(**filters_of(args), ids=args.ids),
            sort=args.sort,
            descending=args.order == "desc",
            page=args.page,
            page_size=args.limit,
        )
    if args.format == "json":
        common.print_json([_jsonable_job(j) for j in page.items])
        return 0
    rows = [j.to_dict() | {"error": error_line(j.error_details)} for j in page.items]
    common.print_table(rows, LS_COLUMNS)
    common.footer(len(rows), page.total, "dead jobs", page=args.page, page_size=args.limit)
    return 0


def run_show(args: argparse.Namespace) -> int:
    with client_of(args) as client:
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
    with client_of(args) as client:
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
        if ids or filters or args.all or edits or args.max_jobs or args.chunk_size:
            raise errors.ValidationError(
                "--resume takes no selection: the plan already has its jobs", field="resume"
            )
    elif ids is not None and (filters or args.all):
        raise errors.ValidationError("give --ids or filters, not both", field="ids")
    elif ids is None and not filters and not args.all:
        raise errors.ValidationError(
            f"{action} needs --ids, a filter, or --all (every dead job)", field="ids"
        )
    if edits and ids is None:
        raise errors.ValidationError("--payload/--set-tags/--priority need --ids", field="payload")
    if getattr(args, "idempotent_only", False) and not args.resume:
        narrowed = _idempotent_only(args, filters)
        if narrowed is None:
            if args.format == "json":
                common.print_json_line({"matched": 0, "plan_id": None})
            else:
                print(f"no job type is declared idempotent: nothing to {action}", file=sys.stderr)
            return 0
        filters = narrowed
    if args.label and args.resume:
        raise errors.ValidationError("give --label or --resume, not both", field="label")
    plan: Plan | None
    with client_of(args) as client:
        if args.dry_run:
            if args.resume:
                plan = client.plan(args.resume)
                out: dict[str, Any] = {"plan_id": plan.id, "state": plan.state, "remaining": plan.remaining}
            else:
                out = client.preview(ids, **({} if ids is not None else filters))
                if args.max_jobs is not None:
                    out["matched"] = min(out["matched"], args.max_jobs)
            return _print_result(args, out, dry_run=True)
        who = Actor(actor_of(args))
        plan = None
        resumed = False
        if args.resume:
            plan = client.plan(args.resume)
        elif args.label:
            found = client.store.plan_by_label(action, args.label)
            plan = client.plan(found["id"]) if found else None
        if plan is not None:
            if plan.action != action:
                raise errors.ValidationError(
                    f"plan {plan.id} is a {plan.action} plan, not {action}", field="resume"
                )
            resumed = True
            client.store.note_plan(plan.id, "plan_resume", actor=who, details={"by": "cli"})
        else:
            selection: Any = ids
            if ids is None:
                matched = client.store.count_dlq(dlq_filter(**filters)) if filters else None
                if matched == 0:  # nothing to do is not trouble, and leaves no empty plan behind
                    if args.format == "json":
                        common.print_json_line({"matched": 0, "plan_id": None})
                    else:
                        print(f"no dead job matches: nothing to {action}", file=sys.stderr)
                    return 0
                selection = dlq_filter(filters)
            plan_edits = dict.fromkeys(ids, edits) if edits and ids is not None else None
            created = client.store.create_plan(
                action,
                actor=who,
                ids=selection if ids is not None else None,
                flt=None if ids is not None else selection,
                edits=plan_edits,
                max_jobs=args.max_jobs,
                chunk_size=args.chunk_size or PLAN_CHUNK,
                label=args.label,
            )
            plan = client.plan(created["id"])
        # The plan id first, before any work: whatever ends this run, a script has it.
        head = {"event": "plan", "plan_id": plan.id, "label": args.label, "resumed": resumed}
        head |= {"total": plan.total, "remaining": plan.remaining}
        if args.format == "json":
            common.print_json_line(head)
        else:
            verb = "resuming" if resumed else "plan"
            print(f"{verb} {plan.id}: {plan.remaining} of {plan.total} job(s) left", file=sys.stderr)
        before_done, before_chunks = plan.done, plan.chunks_done
        pacing = {"rate": args.rate}
        if action == "resurrect":
            pacing |= {
                "canary": args.canary,
                "watch": args.watch,
                "max_failure_rate": args.max_failure_rate,
                "spread": args.spread,
            }
        with interruptible() as stopped:
            try:
                plan.execute(progress=progress_wanted(), **pacing)
            except errors.PlanHalted as halted:
                client.store.note_plan(plan.id, "plan_halt", actor=who, details={"reason": str(halted)})
                return _print_halted(args, halted, before_done, before_chunks)
            except KeyboardInterrupt:
                plan.refresh()
                signame = stopped.get("signal", "SIGINT")
                client.store.note_plan(plan.id, "plan_interrupt", actor=who, details={"signal": signame})
                out = _counts(plan, action, before_done, before_chunks) | {
                    "event": "interrupted",
                    "signal": signame,
                }
                if args.format == "json":
                    common.print_json_line(out)
                else:
                    print(
                        f"\ninterrupted ({signame}); finish with: chokaq dlq {action} --resume {plan.id}"
                        + (f" (or re-run with --label {args.label})" if args.label else ""),
                        file=sys.stderr,
                    )
                return EXIT_INTERRUPTED
        out = _counts(plan, action, before_done, before_chunks) | {"event": "finished"}
        if args.format == "json":
            common.print_json_line(out)
            return 0
        return _print_result(args, out, dry_run=False)


EXIT_INTERRUPTED = 3


def _idempotent_only(args: argparse.Namespace, filters: dict[str, Any]) -> dict[str, Any] | None:
    """Narrow the type filter to the types workers declared idempotent (server-side, see job_types)."""
    if args.ids:
        raise errors.ValidationError(
            "--idempotent-only goes with filters, not --ids", field="idempotent_only"
        )
    with client_of(args) as client:
        safe = client.store.idempotent_types()
    chosen = parse_choice(filters.get("type"), "type")
    wanted = [t for t in safe if chosen.include is None or t in chosen.include]
    wanted = [t for t in wanted if t not in (chosen.exclude or ())]
    return {**filters, "type": wanted} if wanted else None  # None: no safe type, nothing can match


def _counts(plan: Any, action: str, before_done: int, before_chunks: int) -> dict[str, Any]:
    """A run's numbers: the plan's totals and, apart, what this run did (a resumed plan did some before)."""
    key = "resurrected" if action == "resurrect" else "purged"
    return {
        "plan_id": plan.id,
        "state": plan.state,
        key: plan.done,
        f"{key}_this_run": plan.done - before_done,
        "batches": plan.chunks_done,
        "batches_this_run": plan.chunks_done - before_chunks,
        "skipped": plan.skipped,
        "remaining": plan.remaining,
    }


@contextmanager
def interruptible() -> Iterator[dict[str, str]]:
    """SIGTERM (cron and systemd timeouts) ends a run as SIGINT does: between chunks, with a final line.
    The mapping says which signal it was."""
    seen: dict[str, str] = {}

    def on_signal(signum: int, _frame: Any) -> None:
        seen["signal"] = signal.Signals(signum).name
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield seen
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _print_halted(
    args: argparse.Namespace, halted: errors.PlanHalted, before_done: int, before_chunks: int
) -> int:
    """A paced run that stopped itself: what it did, why, and how to go on. Exit 1."""
    plan: Any = halted.plan  # a Plan: errors.py sits below analysis and cannot name the type
    got = halted.outcomes
    if args.format == "json":
        out = _counts(plan, "resurrect", before_done, before_chunks)
        common.print_json_line(out | {"event": "halted", "halted": str(halted), "outcomes": got})
    else:
        print(f"chokaq: {halted}", file=sys.stderr)
        print(
            f"  watched: {got.get('succeeded', 0)} succeeded, {got.get('failed', 0)} failed again, "
            f"{got.get('waiting', 0) + got.get('retrying', 0) + got.get('running', 0)} not finished",
            file=sys.stderr,
        )
        print(
            f"  go on after a fix: chokaq dlq resurrect --resume {plan.id} (add --canary again to re-check); "
            f"drop the rest: chokaq plans discard {plan.id}",
            file=sys.stderr,
        )
    return 1


def _print_result(args: argparse.Namespace, out: dict[str, Any], *, dry_run: bool) -> int:
    if args.format == "json":
        common.print_json(out)
        return 0
    if dry_run and "matched" in out:
        print(f"would {args.action} {out['matched']} dead job(s) (dry run: nothing changed)")
        for key in ("by_reason", "by_queue", "by_type"):
            if out.get(key):
                print(f"  {key.replace('_', ' ')}: " + ", ".join(f"{k} {v}" for k, v in out[key].items()))
        if out.get("sample_ids"):
            print("  sample: " + ", ".join(out["sample_ids"]))
        return 0
    common.print_table([out], list(out))
    return 0
