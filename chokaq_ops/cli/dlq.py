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
import sys
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from chokaq_ops import errors
from chokaq_ops.cli import common
from chokaq_ops.fingerprint import fingerprint_text
from chokaq_ops.models import FailureReason, dead_job_evidence
from chokaq_ops.settings import parse_duration
from chokaq_ops.storage.migrate import require_current
from chokaq_ops.storage.plan_ops import error_line
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


WHEN_HELP = "an ISO 8601 time (UTC unless it has a zone), or how long ago: 24h, 24h ago, 7d, 90m, 1h30m"


def when(text: str) -> datetime:
    """An ISO 8601 time (UTC when it has no zone) or a duration meaning that long ago (24h, 7d, 90m),
    optionally followed by `ago` ("24h ago"). A negative duration would be in the future: refused."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        body = text.strip()
        body = body[:-3].rstrip() if body.lower().endswith(" ago") else body
        try:
            seconds = parse_duration(body) if body and not body.startswith(("-", "+")) else None
        except errors.ConfigError:
            seconds = None
        if seconds is None:
            raise argparse.ArgumentTypeError(f"expected {WHEN_HELP}; got {text!r}") from None
        return datetime.now(UTC) - timedelta(seconds=seconds)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


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
    g.add_argument("--queue")
    g.add_argument("--type")
    g.add_argument("--reason", help=f"one of {', '.join(r.name for r in FailureReason)}")
    g.add_argument("--fingerprint", help="an error group id (see `chokaq dlq summary`)")
    g.add_argument("--search", help="substring of id, type, tags or error details")
    g.add_argument("--tag")
    for name in TIMES:
        g.add_argument("--" + name.replace("_", "-"), type=when, metavar="TIME", help=WHEN_HELP)


def filters_of(args: argparse.Namespace) -> dict[str, Any]:
    out = {k: getattr(args, k) for k in (*FILTERS, *TIMES) if getattr(args, k, None) is not None}
    if "reason" in out:
        try:
            out["reason"] = FailureReason.parse(out["reason"])
        except ValueError as exc:
            raise errors.ValidationError(str(exc), field="reason") from None
    return out


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
        b.add_argument(
            "--chunk-size",
            type=positive,
            metavar="N",
            help="jobs per transaction, at most 1000 (default; a smaller chunk makes a smaller canary)",
        )
        b.set_defaults(handler=run_bulk, action=name)


# ---------------------------------------------------------------------- commands


def _jsonable_job(job: dict[str, Any]) -> dict[str, Any]:
    return {k: job.get(k) for k in JOB_FIELDS}


def run_ls(args: argparse.Namespace) -> int:
    if args.limit > 1000:
        raise errors.ValidationError("--limit is at most 1000", field="limit")
    with client_of(args) as client:
        from chokaq_ops.client.base import dlq_filter

        page = client.store.list_dlq(
            dlq_filter(**filters_of(args)),
            sort=args.sort,
            descending=args.order == "desc",
            page=args.page,
            page_size=args.limit,
        )
    if args.format == "json":
        common.print_json([_jsonable_job(j) for j in page.items])
        return 0
    rows = [j | {"error": error_line(j.get("error_details"))} for j in page.items]
    common.print_table(rows, LS_COLUMNS)
    common.footer(len(rows), page.total, "dead jobs", page=args.page, page_size=args.limit)
    return 0


def run_show(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        job = client.get_job(args.id)
    if job["location"] != "dlq":
        raise errors.JobNotFound(f"job {args.id} is in {job['location']}, not in the dead-letter queue")
    evidence = dead_job_evidence(job)
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
        if args.resume:
            plan = client.plan(args.resume)
            if plan.action != action:
                raise errors.ValidationError(
                    f"plan {plan.id} is a {plan.action} plan, not {action}", field="resume"
                )
        else:
            selection = ids if ids is not None else None
            plan_edits = dict.fromkeys(ids, edits) if edits and ids is not None else None
            make = client.plan_resurrect if action == "resurrect" else client.plan_purge
            kwargs: dict[str, Any] = {"max_jobs": args.max_jobs}
            if args.chunk_size is not None:
                kwargs["chunk_size"] = args.chunk_size
            if plan_edits:
                kwargs["edits"] = plan_edits
            if selection is None and not filters:
                from chokaq_ops.models import DlqFilter

                selection = DlqFilter()
            plan = make(selection, **kwargs, **({} if ids is not None or not filters else filters))
            if args.format != "json":
                print(f"plan {plan.id}: {plan.total} job(s) in {plan.chunks} chunk(s)", file=sys.stderr)
        before = plan.chunks_done
        pacing = {"rate": args.rate}
        if action == "resurrect":
            pacing |= {"canary": args.canary, "watch": args.watch, "max_failure_rate": args.max_failure_rate}
        try:
            plan.execute(progress=progress_wanted(), **pacing)
        except errors.PlanHalted as halted:
            return _print_halted(args, halted, before)
        except KeyboardInterrupt:
            print(
                f"\ninterrupted; finish with: chokaq dlq {action} --resume {plan.id}",
                file=sys.stderr,
            )
            return 130
        key = "resurrected" if action == "resurrect" else "purged"
        out = {
            key: plan.done,
            "batches": plan.chunks_done - before,
            "skipped": plan.skipped,
            "plan_id": plan.id,
        }
        return _print_result(args, out, dry_run=False)


def _print_halted(args: argparse.Namespace, halted: errors.PlanHalted, before: int) -> int:
    """A paced run that stopped itself: what it did, why, and how to go on. Exit 1."""
    plan = halted.plan
    got = halted.outcomes
    if args.format == "json":
        common.print_json(
            {
                "halted": str(halted),
                "resurrected": plan.done,
                "batches": plan.chunks_done - before,
                "remaining": plan.remaining,
                "plan_id": plan.id,
                "outcomes": got,
            }
        )
    else:
        print(f"chokaq: {halted}", file=sys.stderr)
        print(
            f"  watched: {got.get('succeeded', 0)} succeeded, {got.get('failed', 0)} failed again, "
            f"{got.get('waiting', 0) + got.get('retrying', 0) + got.get('running', 0)} not finished",
            file=sys.stderr,
        )
        print(
            f"  go on after a fix: chokaq dlq resurrect --resume {plan.id} (add --canary again to re-check); "
            f"drop the rest: discard plan {plan.id} (POST /plans/{plan.id}/discard or plan.discard())",
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
