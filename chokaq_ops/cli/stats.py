"""`chokaq stats`: totals, per-status counts, throughput and failure rate over 1 and 5 minutes, from the
database or the API (--api), as `GET /api/v1/stats` answers them."""

from __future__ import annotations

import argparse

from chokaq_ops.cli import common, target


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "stats", help="totals, counts by status, throughput and failure rate", description=__doc__
    )
    target.add_target(p)
    common.add_format(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    with target.client_of(args) as client:
        stats = client.stats()
    if args.format == "json":
        common.print_json(stats)
        return 0
    flat = {}
    for key, value in stats.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    common.print_record(flat, list(flat))
    return 0
