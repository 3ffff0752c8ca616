"""`chokaq bench <name>`: one subcommand per entry of chokaq_ops.bench.BENCHES.

Benches delete data: run them on a scratch database (`createdb chokaq_bench`, or a new SQLite file).
Each prints one JSON object per line on stdout: a line per measurement, then the median summary.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from chokaq_ops import bench, errors
from chokaq_ops.argtypes import positive_int
from chokaq_ops.bench import compare, growth
from chokaq_ops.bench.harness import machine
from chokaq_ops.cli import common


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="measure the storage hot paths (deletes data: use a scratch database)",
        description="Benchmarks (docs/benchmarks.md). They delete every job in the database they run "
        "on: use a scratch database (createdb chokaq_bench). Output: one JSON object per line.",
    )
    benches = p.add_subparsers(dest="bench", metavar="BENCH", parser_class=type(p))
    benches.required = True
    for name in bench.names():
        module = bench.load(name)
        doc = (module.__doc__ or name).strip()
        bp = benches.add_parser(name, help=doc.splitlines()[0], description=doc)
        common.add_common(bp)
        bp.add_argument("--rows", type=positive_int, default=None, metavar="N", help="rows to seed")
        bp.add_argument(
            "--repeat", type=positive_int, default=3, metavar="K", help="runs; the summary is their median"
        )
        bp.add_argument(
            "--force",
            action="store_true",
            help="run even though the database holds jobs or audit rows (they are deleted)",
        )
        module.add_arguments(bp)
        bp.set_defaults(handler=_handler(name, module))
    # The tools that run benches rather than being one.
    for tool, about in (
        (compare, "run benches for the working tree and a base revision in interleaved rounds; ratios"),
        (growth, "one bench at several data sizes: is its figure flat as the data grows (JSON lines, a PNG)"),
    ):
        tp = benches.add_parser(
            tool.__name__.rsplit(".", 1)[1],
            help=about,
            description=(tool.__doc__ or "").strip(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        tool.add_arguments(tp)
        tp.set_defaults(handler=tool.run)


def _handler(name: str, module: bench.BenchModule) -> Any:
    def run(args: argparse.Namespace) -> int:
        if args.rows is None:
            raise errors.UsageError(f"bench {name} needs --rows")
        args.settings = common.settings_from(args)
        for record in module.run(args):
            out = {"bench": name, **record}
            for key, value in machine().items():
                out.setdefault(key, value)
            sys.stdout.write(json.dumps(common.to_jsonable(out), ensure_ascii=False) + "\n")
            sys.stdout.flush()
        return 0

    return run
