"""`chokaq workers ls|set`: the worker registry and live concurrency (docs/worker.md "Registry").

ls lists registered workers (alive: seen within Health.WorkerHeartbeatTimeout) with the jobs each holds.
set ID --concurrency N sets a worker's handler slots; the worker applies it at its next heartbeat,
without a restart, and lowering never cancels running jobs. Audited under --actor (default
CHOKAQ_ACTOR, else cli:<your OS user name>).
"""

from __future__ import annotations

import argparse

from chokaq_ops.cli import common
from chokaq_ops.cli.dlq import add_actor, client_of

LS_COLUMNS = (
    "worker_id",
    "host",
    "pid",
    "alive",
    "concurrency",
    "desired_concurrency",
    "running",
    "prefetched",
    "queues",
    "last_seen_at",
    "seen_s",
)


def _slots(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number, got {text!r}") from None
    if not 1 <= value <= 1024:
        raise argparse.ArgumentTypeError(f"must be from 1 to 1024, got {value}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "workers",
        help="list registered workers; change one's concurrency",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmds = p.add_subparsers(dest="workers_command", metavar="COMMAND", parser_class=type(p))
    cmds.required = True
    ls = cmds.add_parser("ls", help="registered workers")
    common.add_common(ls)
    common.add_format(ls)
    ls.set_defaults(handler=run_ls)
    s = cmds.add_parser("set", help="change a running worker's concurrency")
    common.add_common(s)
    common.add_format(s)
    add_actor(s)
    s.add_argument("worker_id")
    s.add_argument("--concurrency", type=_slots, required=True, metavar="N")
    s.set_defaults(handler=run_set)


def _alive(rows: list[dict], timeout: float) -> list[dict]:
    return [r | {"alive": r["seen_s"] <= timeout} for r in rows]


def run_ls(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        rows = _alive(client.store.list_registry(), client.settings.health.worker_heartbeat_timeout)
    common.emit(rows, LS_COLUMNS, args.format, noun="workers")
    return 0


def run_set(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        row = client.set_worker_concurrency(args.worker_id, args.concurrency)
        timeout = client.settings.health.worker_heartbeat_timeout
    common.emit(_alive([row], timeout), LS_COLUMNS, args.format)
    return 0
