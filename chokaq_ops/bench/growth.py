"""growth: one bench at several data sizes; whether its figure stays flat as the data grows, and a PNG.

Runs `chokaq bench BENCH --rows SIZE` (or another size flag: `--size-flag archive` for the archived
rows beside a throughput drain) for each of `--sizes`, every size once per round, the order reversed in
every other round (a drift of the machine's load then falls on small and large sizes alike), each run a
process of its own as `bench compare` starts them. Output, JSON lines on stdout: a `growth` line (bench,
flags, sizes, machine), a `run` line per measurement, a `point` line per variant and size (median and
min-max of the figure), and a `shape` line per variant: each size's median against the smallest size's,
`flat` when every one stays within `--tolerance` (worse by at most that fraction), else `grows`. A table
goes to stderr; `--plot PATH` draws the figure against the size on a log axis, one line per variant.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from chokaq_ops import errors
from chokaq_ops.argtypes import positive_int
from chokaq_ops.bench import compare_sides, compare_stats
from chokaq_ops.bench.harness import machine
from chokaq_ops.redact import redact

Runner = compare_sides.Runner


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bench", required=True, metavar="NAME", help="the bench, e.g. claim or resurrect")
    parser.add_argument(
        "--sizes", required=True, metavar="N1,N2", help="data sizes, e.g. 10000,1000000,5000000"
    )
    parser.add_argument(
        "--size-flag",
        default="rows",
        metavar="FLAG",
        help="the bench flag the size goes to, without its dashes (default rows; archive for throughput)",
    )
    parser.add_argument(
        "--args", default="", metavar="FLAGS", help="more flags for the bench, e.g. '--batch 20 --claims 200'"
    )
    parser.add_argument(
        "--metric", default="per_second", metavar="NAME", help="the figure to follow (default per_second)"
    )
    parser.add_argument(
        "--rounds",
        type=positive_int,
        default=1,
        metavar="N",
        help="rounds over all sizes (default 1)",
    )
    parser.add_argument(
        "--repeat", type=positive_int, default=1, metavar="K", help="runs per invocation (default 1)"
    )
    parser.add_argument(
        "--tolerance",
        type=float,
        default=0.2,
        metavar="F",
        help="how much worse than the smallest size still counts as flat (default 0.2: 20 %%)",
    )
    parser.add_argument(
        "--db", metavar="URL", help="scratch database (default CHOKAQ_DB); the bench empties it"
    )
    parser.add_argument("--plot", metavar="PATH", help="write the curve as a PNG")


def sizes_of(text: str) -> list[int]:
    try:
        sizes = [int(x.replace("_", "")) for x in str(text).split(",") if x.strip()]
    except ValueError:
        sizes = []
    if len(sizes) < 2 or any(n < 1 for n in sizes) or len(set(sizes)) != len(sizes):
        raise errors.UsageError(
            f"--sizes wants two or more distinct whole numbers, e.g. 10000,1000000 (got {text!r})"
        )
    return sorted(sizes)


def run(
    args: argparse.Namespace,
    *,
    runner: Runner | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    from chokaq_ops import bench as registry

    if args.bench not in registry.names():
        raise errors.UsageError(f"--bench takes one of {','.join(registry.names())} (got {args.bench!r})")
    sizes = sizes_of(args.sizes)
    size_flag = "--" + str(args.size_flag).lstrip("-")
    if not re.fullmatch(r"--[a-z][a-z0-9-]*", size_flag):
        raise errors.UsageError(
            f"--size-flag wants a bench flag's name such as rows (got {args.size_flag!r})"
        )
    if not 0 <= args.tolerance < 10:
        raise errors.UsageError(f"--tolerance wants a fraction such as 0.2 (got {args.tolerance})")
    db = args.db or os.environ.get("CHOKAQ_DB")
    if not db:
        raise errors.UsageError("bench growth needs --db (a scratch database: the bench deletes every job)")
    flags = shlex.split(args.args)
    root = Path(__file__).resolve().parents[2]
    side = compare_sides.Side("head", "working tree", root, compare_sides.interpreter(None), db)
    header = {
        "event": "growth",
        "bench": args.bench,
        "size_flag": size_flag,
        "sizes": sizes,
        "args": flags,
        "metric": args.metric,
        "rounds": args.rounds,
        "repeat": args.repeat,
        "tolerance": args.tolerance,
        "db": redact(db),
        "machine": machine(),
    }
    _write(out, header)
    runs: list[dict[str, Any]] = []
    for n in range(1, args.rounds + 1):
        for size in sizes if n % 2 else list(reversed(sizes)):
            for record in (runner or compare_sides.Side.run)(
                side, args.bench, [size_flag, str(size), *flags], args.repeat
            ):
                if "stat" in record or args.metric not in record:
                    continue
                line = {
                    "event": "run",
                    "round": n,
                    "size": size,
                    "variant": compare_stats.variant_of(record),
                    "value": record[args.metric],
                }
                _write(out, line)
                runs.append(line)
    points = list(points_of(runs, args.metric))
    shapes = list(shapes_of(points, args.metric, args.tolerance))
    for line in points + shapes:
        _write(out, line)
    err.write(table(shapes, header))
    if args.plot:
        from chokaq_ops.bench import growth_plot

        growth_plot.plot(points, Path(args.plot), header)
        err.write(f"plot: {args.plot}\n")
    return 0


def points_of(runs: Sequence[dict[str, Any]], metric: str) -> list[dict[str, Any]]:
    """The median and spread of `metric` per variant and size."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((compare_stats.variant_label(r["variant"]), r["size"]), []).append(r)
    out = []
    for (label, size), group in sorted(groups.items()):
        values = [float(g["value"]) for g in group]
        out.append(
            {
                "event": "point",
                "variant": group[0]["variant"],
                "label": label,
                "size": size,
                "metric": metric,
                **compare_stats.spread(values),
            }
        )
    return out


def shapes_of(points: Sequence[dict[str, Any]], metric: str, tolerance: float) -> list[dict[str, Any]]:
    """Per variant: each size's median against the smallest size's; `flat` when none is worse than the
    tolerance allows (lower for a rate, higher for a time)."""
    higher = compare_stats.better(metric) == "higher"
    by_label: dict[str, list[dict[str, Any]]] = {}
    for p in points:
        by_label.setdefault(p["label"], []).append(p)
    out = []
    for label, group in by_label.items():
        group.sort(key=lambda p: p["size"])
        first = group[0]["median"]
        ratios = {str(p["size"]): compare_stats.ratio(p["median"], first) for p in group}
        worst = [r for r in ratios.values() if r is not None]
        flat = bool(worst) and all((r >= 1 - tolerance) if higher else (r <= 1 + tolerance) for r in worst)
        out.append(
            {
                "event": "shape",
                "variant": group[0]["variant"],
                "label": label,
                "metric": metric,
                "better": "higher" if higher else "lower",
                "medians": {str(p["size"]): p["median"] for p in group},
                "against_smallest": ratios,
                "tolerance": tolerance,
                "verdict": "flat" if flat else "grows",
            }
        )
    return out


def table(shapes: Sequence[dict[str, Any]], header: dict[str, Any]) -> str:
    sizes = [str(s) for s in header["sizes"]]
    lines = [
        f"bench {header['bench']} ({header['size_flag']} {', '.join(f'{int(s):,}' for s in sizes)}), "
        f"{header['metric']}, {header['rounds']} round(s); tolerance {header['tolerance']:.0%}",
        "| variant | " + " | ".join(f"{int(s):,}" for s in sizes) + " | verdict |",
        "|---|" + "---|" * len(sizes) + "---|",
    ]
    for s in shapes:
        cells = []
        for size in sizes:
            median, r = s["medians"].get(size), s["against_smallest"].get(size)
            ratio = "" if r is None else f" ({r:.2f}x)"
            cells.append("-" if median is None else f"{compare_stats.fmt(median)}{ratio}")
        lines.append(f"| {s['label'] or '-'} | " + " | ".join(cells) + f" | {s['verdict']} |")
    return "\n".join(lines) + "\n"


def _write(out: TextIO, line: dict[str, Any]) -> None:
    out.write(json.dumps(line, ensure_ascii=False) + "\n")
    out.flush()
