"""`chokaq enqueue TYPE PAYLOAD`: add one job and print its id.

PAYLOAD is JSON text, or `-` to read it from stdin. It is stored as given, even when it is not valid JSON:
the worker then fails the job as Fatal with the parse error, which an operator can fix in the DLQ (the
operator's workflow). With an idempotency key already held by an active job, nothing is added and the
existing job's id is printed (a note goes to stderr).
"""

from __future__ import annotations

import argparse
import getpass
import sys
from datetime import datetime

from chokaq_ops import errors
from chokaq_ops.cli import common
from chokaq_ops.models import NewJob
from chokaq_ops.settings import parse_duration
from chokaq_ops.storage import Store


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "enqueue",
        help="add a job; prints its id",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common.add_common(p)
    p.add_argument("type", metavar="TYPE", help="job type key, e.g. email.send.v1")
    p.add_argument("payload", metavar="PAYLOAD", help="JSON text, or - to read it from stdin")
    p.add_argument("--queue", default="default", help="queue name (default: default)")
    p.add_argument("--priority", type=int, default=None, help="0..1000000, higher runs first (default 10)")
    p.add_argument("--tags", help="comma-separated tags")
    p.add_argument("--idempotency-key", metavar="KEY", help="skip when an active job holds this key")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--delay", metavar="DURATION", help="run after this long: 30, 30s, 10m, 1h, hh:mm:ss")
    when.add_argument(
        "--at", metavar="TIME", help="run at this ISO 8601 time with a zone, e.g. 2026-01-01T09:00Z"
    )
    p.add_argument("--id", metavar="ID", help="the job id (default: a generated sortable id)")
    p.add_argument("--created-by", metavar="NAME", help="recorded as created_by (default cli:<user>)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    payload = sys.stdin.read() if args.payload == "-" else args.payload
    delay = None
    if args.delay is not None:
        delay = parse_duration(args.delay, "delay")
        if delay < 0:
            raise errors.ValidationError("--delay must not be negative", field="delay")
    job = NewJob(
        type=args.type,
        payload=payload,
        queue=args.queue,
        priority=10 if args.priority is None else args.priority,
        tags=args.tags,
        idempotency_key=args.idempotency_key,
        id=args.id,
        delay_seconds=delay,
        scheduled_at=_when(args.at) if args.at else None,
        created_by=args.created_by or f"cli:{_user()}",
    )
    with ready_store(args, create=True) as store:
        (result,) = store.enqueue([job])
    if result.status == "conflict":
        raise errors.Conflict(f"a job with id {result.id} already exists; nothing was added", field="id")
    if result.status == "duplicate":
        print(
            f"chokaq: an active job already holds idempotency key {args.idempotency_key!r}; "
            "its id follows, nothing was added",
            file=sys.stderr,
        )
    print(result.id)
    return 0


def ready_store(args: argparse.Namespace, *, create: bool = False) -> Store:
    """The store, with its schema checked: SQLite (the embedded default) is upgraded on the spot, and
    with `create` (enqueue) made, so `chokaq enqueue` works on a fresh install; readers need an existing
    file. PostgreSQL must be current (`chokaq migrate`)."""
    from chokaq_ops.storage.migrate import migrate, require_current

    store = common.open_store(args, create=create)
    try:
        if store.dialect.name == "sqlite":
            migrate(store)
        else:
            require_current(store)
    except BaseException:
        store.close()
        raise
    return store


def _when(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise errors.ValidationError(f"--at: not an ISO 8601 time: {text!r}", field="at")
    if value.tzinfo is None:
        raise errors.ValidationError("--at needs a time zone, e.g. 2026-01-01T09:00Z", field="at")
    return value


def _user() -> str:
    try:
        return getpass.getuser()[:90]
    except Exception:
        return "unknown"
