"""`chokaq jobs ls` lists jobs (hot by default, or --location archive|dlq); `chokaq jobs show ID` shows any
job wherever it lives, with its `location`."""

from __future__ import annotations

import argparse
from typing import Any

from chokaq_ops import errors
from chokaq_ops.cli import common
from chokaq_ops.cli.enqueue import ready_store
from chokaq_ops.filters import archive_filter, dlq_filter, hot_filter
from chokaq_ops.models import Location, Page, Status
from chokaq_ops.records import ArchivedJob, DeadJob, HotJob

HOT_STATUSES = [s.name for s in Status]
STATUS_CHOICES = [*HOT_STATUSES, "succeeded", "dead"]
DEFAULT_SORT = {"hot": "created_at", "archive": "finished_at", "dlq": "failed_at"}
COLUMNS = {
    "hot": ["id", "queue", "type", "status", "priority", "attempt_count", "worker_id", "created_at"],
    "archive": ["id", "queue", "type", "attempt_count", "duration_ms", "finished_at"],
    "dlq": ["id", "queue", "type", "failure_reason", "attempt_count", "failed_at", "error"],
}
SHOW_ORDER = [
    "id", "location", "status", "queue", "type", "priority", "attempt_count", "tags", "idempotency_key",
    "worker_id", "created_at", "scheduled_at", "started_at", "heartbeat_at", "finished_at", "failed_at",
    "duration_ms", "created_by", "last_modified_by", "failure_reason", "fingerprint", "payload",
    "trace_context",
]  # fmt: skip


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("jobs", help="list jobs or show one", description=__doc__)
    jobs = p.add_subparsers(dest="jobs_command", metavar="COMMAND", parser_class=type(p))
    jobs.required = True

    ls = jobs.add_parser("ls", help="list jobs, newest first", description="List jobs, newest first.")
    common.add_common(ls)
    ls.add_argument("--location", choices=[loc.value for loc in Location], help="table (default hot)")
    ls.add_argument(
        "--status",
        choices=STATUS_CHOICES,
        help="pending, fetched, processing; succeeded = archive; dead = dlq",
    )
    ls.add_argument("--queue")
    ls.add_argument("--type")
    ls.add_argument("--tag", help="jobs carrying this tag")
    ls.add_argument("--search", help="substring of id, type or tags (and error details in the DLQ)")
    ls.add_argument("--sort", help="created_at, priority, ... (default: newest first by location)")
    order = ls.add_mutually_exclusive_group()
    order.add_argument(
        "--desc", dest="descending", action="store_true", default=True, help="descending (default)"
    )
    order.add_argument("--asc", dest="descending", action="store_false", help="ascending")
    ls.add_argument("--page", type=int, default=1)
    ls.add_argument("--page-size", type=int, default=50, help="1..1000 (default 50)")
    common.add_format(ls)
    ls.set_defaults(handler=run_ls)

    show = jobs.add_parser("show", help="one job, wherever it lives", description="Show one job by id.")
    common.add_common(show)
    show.add_argument("id", metavar="ID")
    common.add_format(show)
    show.set_defaults(handler=run_show)


def _location(args: argparse.Namespace) -> str:
    implied = {"succeeded": "archive", "dead": "dlq"}.get(args.status or "", "hot" if args.status else None)
    if args.location and implied and args.location != implied:
        raise errors.ValidationError(
            f"--status {args.status} lives in {implied}, not --location {args.location}", field="status"
        )
    return args.location or implied or "hot"


def run_ls(args: argparse.Namespace) -> int:
    location = _location(args)
    common_kw: dict[str, Any] = {
        "sort": args.sort or DEFAULT_SORT[location],
        "descending": args.descending,
        "page": args.page,
        "page_size": args.page_size,
    }
    filters = {"queue": args.queue, "type": args.type, "tag": args.tag, "search": args.search}
    page: Page[HotJob] | Page[ArchivedJob] | Page[DeadJob]
    with ready_store(args) as store:
        if location == "hot":
            status = Status[args.status] if args.status in HOT_STATUSES else None
            page = store.list_hot(hot_filter(filters, status=status), **common_kw)
        elif location == "archive":
            page = store.list_archive(archive_filter(filters), **common_kw)
        else:
            page = store.list_dlq(dlq_filter(filters), **common_kw)
    items = [item.to_dict() for item in page.items]
    if args.format == "json":
        common.print_json(items)
        return 0
    for item in items:
        item["error"] = (item.get("error_details") or "").split("\n", 1)[0]
    common.print_table(items, COLUMNS[location])
    noun = {"hot": "jobs in hot", "archive": "succeeded jobs", "dlq": "dead jobs"}[location]
    common.footer(len(items), page.total, noun, page=page.page, page_size=page.page_size)
    return 0


def run_show(args: argparse.Namespace) -> int:
    with ready_store(args) as store:
        job = store.get_job(args.id)
    if args.format == "json":
        common.print_json(job)
        return 0
    common.print_record({k: v for k, v in job.items() if k != "error_details"}, SHOW_ORDER)
    if job.get("error_details"):
        print(f"\nerror_details:\n{job['error_details']}")
    return 0
