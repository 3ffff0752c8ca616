"""`chokaq doctor`: what holds back vacuum in the queue's database, and how the queue tables fare.

PostgreSQL: the session holding the oldest snapshot (pid, application, user, client, state, transaction
age, the head of its query), replication slots with an xmin, prepared transactions, and the dead row
versions and size of each queue table. SQLite: the write-ahead log's size, its limit, and for how long a
reader has pinned it. A held snapshot no longer slows the queue down, but the tables grow until it ends
(docs/endurance.md); an admin ends the session from The Deck or `POST /api/v1/horizon/cancel`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from chokaq_ops.cli import common


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="show what holds back vacuum (the oldest snapshot's session, slots, the SQLite log)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common.add_common(p)
    common.add_format(p, default="table")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    settings = common.settings_from(args)
    with common.open_store(args, settings) as store:
        report = store.horizon().to_dict()
        tables = [
            {"table": t["name"], "live": t["live"], "dead": t["dead"], "bytes": t["bytes"]}
            for t in store.run("queue_tables", write=False)
        ]
    limit = settings.health.horizon_degraded
    report |= {"tables": tables, "degraded_after_seconds": limit, "degraded": _degraded(report, limit)}
    if args.format == "json":
        common.print_json(report)
        return 0
    _print(report)
    return 0


def _degraded(report: dict[str, Any], limit: float) -> bool:
    wal = report["wal"]
    if wal is not None:
        return bool(wal["pinned_seconds"] >= limit)
    inactive = any(not s["active"] for s in report["replication_slots"])
    return inactive or report["held_seconds"] >= limit


def _print(report: dict[str, Any]) -> None:
    wal = report["wal"]
    if wal is not None:
        mb = (wal["size_bytes"] or 0) / 2**20
        print(f"write-ahead log: {mb:.1f} MB (cut back to {wal['limit_bytes'] / 2**20:.0f} MB once unpinned)")
        pinned = wal["pinned_seconds"]
        print(f"pinned by a reader for {pinned:.0f}s" if pinned else "no reader pins it")
        return
    held = report["oldest_snapshot"]
    if held is None:
        print("oldest snapshot: none held")
    else:
        print(
            f"oldest snapshot: {held['transaction_age_seconds']:.0f}s, pid {held['pid']}, "
            f"application {held['application'] or '-'}, user {held['user'] or '-'}, "
            f"client {held['client'] or 'local'}, {held['state'] or '-'}"
        )
        print(f"  query: {(held['query'] or '-').strip()}")
    for slot in report["replication_slots"]:
        state = "active" if slot["active"] else "INACTIVE"
        name, kind, age = slot["slot_name"], slot["slot_type"], slot["xmin_age"]
        print(f"replication slot {name} ({kind}, {state}): xmin age {age}")
    for p in report["prepared_transactions"]:
        print(f"prepared transaction {p['gid']} by {p['owner']}: {p['age_s']:.0f}s")
    if report["tables"]:
        print()
        common.print_table(report["tables"], ["table", "live", "dead", "bytes"])
    if report["degraded"]:
        print(
            f"chokaq: the horizon has been held for more than {report['degraded_after_seconds']:g}s; "
            "an admin can end the session (The Deck, or POST /api/v1/horizon/cancel)",
            file=sys.stderr,
        )
