"""`chokaq archive purge --older-than 30d`: delete succeeded jobs finished before a cutoff.

--older-than takes a duration (30d, 12h, 90m: that long before now) or an ISO 8601 time. Rows go oldest
first in transactions of Storage.CleanupBatchSize (default 1000), each audited. --dry-run counts them.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta

from chokaq_ops import errors
from chokaq_ops.cli import common
from chokaq_ops.cli.dlq import add_actor, client_of, progress_wanted
from chokaq_ops.filters import archive_filter
from chokaq_ops.settings import parse_duration


def cutoff(text: str) -> datetime:
    """A duration means that long before now; otherwise an ISO 8601 time (UTC when it has no zone)."""
    try:
        seconds = parse_duration(text, "older_than")
    except errors.ConfigError:
        try:
            value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a duration such as 30d or an ISO 8601 time, got {text!r}"
            ) from None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if seconds < 0:
        raise argparse.ArgumentTypeError("--older-than must not be negative")
    try:
        return datetime.now(UTC) - timedelta(seconds=seconds)
    except (OverflowError, ValueError):
        raise argparse.ArgumentTypeError(f"--older-than reaches past year 1: {text!r}") from None


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "archive",
        help="purge succeeded jobs older than a cutoff",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmds = p.add_subparsers(dest="archive_command", metavar="COMMAND", parser_class=type(p))
    cmds.required = True
    purge = cmds.add_parser("purge", help="delete archived jobs finished before --older-than")
    common.add_common(purge)
    common.add_format(purge)
    add_actor(purge)
    purge.add_argument("--older-than", required=True, type=cutoff, metavar="AGE", help="e.g. 30d, or a time")
    purge.add_argument("--dry-run", action="store_true", help="count what would be deleted; change nothing")
    purge.set_defaults(handler=run_purge)


def run_purge(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        if args.dry_run:
            page = client.store.list_archive(archive_filter(finished_to=args.older_than), page_size=1)
            out = {"would_purge": page.total, "older_than": args.older_than}
        else:
            show = progress_wanted()
            out = client.purge_archive(args.older_than, progress=show) | {"older_than": args.older_than}
    if args.format == "json":
        common.print_json(out)
    elif args.dry_run:
        print(
            f"would purge {out['would_purge']} archived job(s) finished before "
            f"{common.to_jsonable(args.older_than)} (dry run: nothing changed)"
        )
    else:
        common.print_table([out], ["purged", "batches", "older_than"])
    return 0
