"""`chokaq cancel`: cancel pending or fetched jobs (they go to the dead-letter queue as Cancelled), by --ids
or a hot-job filter, as a plan in chunks of 1000: resumable, labelled, audited, over the database or the
API, with the JSON-lines contract of `chokaq dlq resurrect` (docs/cli-json.md). Running jobs are skipped:
stopping user code mid-flight is the owning worker's call."""

from __future__ import annotations

import argparse
from typing import Any

from chokaq_ops import errors
from chokaq_ops.cli import common, output, target
from chokaq_ops.cli.dlq import add_actor, duration, per_second, positive, progress_wanted
from chokaq_ops.storage.plan_ops import PLAN_CHUNK


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "cancel",
        help="cancel pending or fetched jobs, by --ids or filters, in chunks of 1000",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    target.add_target(p)
    common.add_format(p)
    add_actor(p)
    p.add_argument("--ids", action="append", metavar="IDS", help="comma-separated ids, or - for stdin")
    g = p.add_argument_group("filters (every one given narrows the match)")
    g.add_argument("--queue")
    g.add_argument("--type")
    g.add_argument("--status", choices=("pending", "fetched"))
    g.add_argument("--tag")
    g.add_argument("--search", help="substring of id, type or tags")
    p.add_argument("--all", action="store_true", help="every pending or fetched job")
    p.add_argument("--max-jobs", type=positive, metavar="N")
    p.add_argument("--dry-run", action="store_true", help="show what would be cancelled; change nothing")
    p.add_argument("--resume", metavar="PLAN_ID", help="finish an interrupted run (its plan id)")
    p.add_argument("--label", metavar="NAME", help="as in `chokaq dlq resurrect --label`")
    p.add_argument("--new", action="store_true", help="with --label: start over")
    p.add_argument("--rate", type=per_second, metavar="JOBS_PER_S")
    p.add_argument("--chunk-size", type=positive, metavar="N")
    p.add_argument("--wait", type=duration, default=0.0, metavar="DURATION")
    p.add_argument("--lease-ttl", type=duration, default=60.0, metavar="DURATION")
    p.set_defaults(handler=run, action="cancel")


def run(args: argparse.Namespace) -> int:
    from chokaq_ops.cli import interrupted_by
    from chokaq_ops.cli.dlq import _TextEvents
    from chokaq_ops.client import runs
    from chokaq_ops.models import HotFilter

    ids = common.read_ids(args.ids) if args.ids else None
    filters: dict[str, Any] = {
        k: getattr(args, k) for k in ("queue", "type", "status", "tag", "search") if getattr(args, k)
    }
    if args.ids is not None and not ids:
        raise errors.ValidationError("--ids gave no ids", field="ids")
    if args.resume and (ids or filters or args.all or args.label):
        raise errors.ValidationError("--resume takes no selection or label", field="resume")
    if not args.resume and ids is None and not filters and not args.all and not args.label:
        raise errors.ValidationError("cancel needs --ids, a filter, or --all", field="ids")
    if ids is not None and (filters or args.all):
        raise errors.ValidationError("give --ids or filters, not both", field="ids")
    selection: Any = ids if ids is not None else (HotFilter() if args.all else None)
    out = output.current()
    with target.client_of(args) as client:
        if args.dry_run:
            return _dry_run(args, client, ids, filters, out)
        final = runs.run_plan(
            client,
            "cancel",
            selection,
            label=args.label,
            new=args.new,
            plan_id=args.resume,
            max_jobs=args.max_jobs,
            chunk_size=args.chunk_size or PLAN_CHUNK,
            rate=args.rate,
            wait=args.wait,
            lease_ttl=args.lease_ttl,
            progress=progress_wanted(),
            on_event=out.line if args.format == "json" else _TextEvents(args),
            interrupted=interrupted_by,
            **filters,
        )
    return int(final["exit_code"])


def _dry_run(
    args: argparse.Namespace, client: Any, ids: list[str] | None, filters: dict[str, Any], out: Any
) -> int:
    """How many pending or fetched jobs a cancel would touch (running ones are skipped when it runs)."""
    if ids is not None:
        where = client.locate(ids)
        matched = int(((where["location"] == "hot") & where["status"].isin(["pending", "fetched"])).sum())
    else:
        matched = sum(
            len(client.load_hot(heavy=False, status=status, **filters))
            for status in ([filters.pop("status")] if "status" in filters else ["pending", "fetched"])
        )
    if args.max_jobs:
        matched = min(matched, args.max_jobs)
    head = {"event": "plan", "dry_run": True, "plan_id": None, "action": "cancel", "matched": matched}
    if args.format == "json":
        out.line(head)
        out.line(
            {"event": "finished", "dry_run": True, "plan_id": None, "matched": matched, "reason": "dry_run"}
        )
    else:
        print(f"would cancel {matched} pending or fetched job(s) (dry run: nothing changed)")
    return 0
