"""`chokaq migrate`: create or upgrade the schema (idempotent, safe to run from many processes)."""

from __future__ import annotations

import argparse

from chokaq_ops.cli import common
from chokaq_ops.storage.migrate import migrate


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("migrate", help="create or upgrade the database schema")
    common.add_common(p)
    common.add_format(p, default="table")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    with common.open_store(args, create=True) as store:
        result = migrate(store)
        if args.format == "json":
            common.print_json({"version": result.version, "applied": result.applied, "fresh": result.fresh})
        elif result.applied:
            print(f"schema at version {result.version} (applied {', '.join(map(str, result.applied))})")
        else:
            print(f"schema at version {result.version} (up to date)")
    return 0
