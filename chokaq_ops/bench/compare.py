"""compare: named benches for the working tree (head) and a base revision, in interleaved rounds.

Round r runs every named bench once on each side, base first in odd rounds and head first in even
ones, on the same scratch database (or `--base-db` when the two revisions' schemas differ). Each
invocation is `chokaq bench NAME --repeat K` in a process of its own, started in that side's tree
(compare_sides.py). Output, JSON lines on stdout: a `compare` line (revisions, trees, machine), one
`round` line per measurement a bench printed, then one `summary` line per bench, variant and metric:
median, min-max and quartiles per side, the ratio of the medians head/base and the median of the
per-round ratios. A text table of the summaries goes to stderr (or alone to stdout, `--format table`).

With `--peer pgqueuer` instead of `--base`, the base side is a peer queue measured by its harness
(chokaq_ops/bench/peer_pgqueuer.py, docs/peers.md) in the same interleaved rounds; only the benches the
peer measures are allowed, and the `compare` line names the peer and its version.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from chokaq_ops import errors
from chokaq_ops.argtypes import positive_int
from chokaq_ops.bench import compare_sides as sides
from chokaq_ops.bench import compare_stats as stats
from chokaq_ops.bench.harness import machine
from chokaq_ops.redact import redact

Runner = sides.Runner


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--benches", required=True, metavar="B1,B2", help="benches to run, e.g. enqueue,resurrect"
    )
    parser.add_argument("--base", default=None, metavar="REV", help="base revision (default HEAD)")
    parser.add_argument(
        "--peer",
        choices=sorted(sides.PEERS),
        help="a peer queue as the base side instead of a revision (docs/peers.md; pip install '.[peers]')",
    )
    parser.add_argument(
        "--peer-args",
        default="",
        metavar="FLAGS",
        help="flags for the peer's harness alone, e.g. '--style limit' (docs/peers.md)",
    )
    parser.add_argument(
        "--rounds", type=positive_int, default=5, metavar="N", help="interleaved rounds (default 5)"
    )
    parser.add_argument(
        "--repeat", type=positive_int, default=1, metavar="K", help="runs per bench invocation (default 1)"
    )
    parser.add_argument(
        "--bench-args",
        action="append",
        default=[],
        metavar="BENCH:FLAGS",
        help="flags for one bench on both sides, e.g. 'enqueue:--rows 3000 --kinds plain,single' "
        "(repeatable)",
    )
    parser.add_argument("--db", metavar="URL", help="scratch database (default CHOKAQ_DB); benches empty it")
    parser.add_argument(
        "--base-db",
        metavar="URL",
        help="the base's scratch database, needed when the two schemas differ (the peer's, with --peer)",
    )
    parser.add_argument(
        "--base-python",
        metavar="PATH",
        help="interpreter for the base or the peer (default: this one, its packages)",
    )
    parser.add_argument(
        "--metrics", metavar="M1,M2", help=f"figures to compare (default {','.join(stats.DEFAULT_METRICS)})"
    )
    parser.add_argument(
        "--format", choices=("json", "table"), default="json", help="json lines (default) or table"
    )


def bench_args(specs: Sequence[str], benches: Sequence[str]) -> dict[str, list[str]]:
    """`--bench-args` values (`NAME:FLAGS`, FLAGS split as a shell would) by bench name."""
    out: dict[str, list[str]] = {b: [] for b in benches}
    for spec in specs:
        name, sep, flags = spec.partition(":")
        if not sep or name.strip() not in out:
            raise errors.UsageError(
                f"--bench-args takes NAME:FLAGS with NAME one of {','.join(benches)}: {spec!r}"
            )
        out[name.strip()] += shlex.split(flags)
    return out


def run(
    args: argparse.Namespace,
    *,
    runner: Runner | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    from chokaq_ops import bench as registry  # the registry imports nothing of this module

    benches = [b.strip() for b in str(args.benches).split(",") if b.strip()]
    unknown = [b for b in benches if b not in registry.names()]
    if not benches or unknown:
        raise errors.UsageError(f"--benches takes names of {','.join(registry.names())} (unknown: {unknown})")
    flags = bench_args(args.bench_args, benches)
    db = args.db or os.environ.get("CHOKAQ_DB")
    if not db:
        raise errors.UsageError("bench compare needs --db (a scratch database: benches delete every job)")
    metrics = [m.strip() for m in args.metrics.split(",")] if args.metrics else list(stats.DEFAULT_METRICS)
    peer = getattr(args, "peer", None)
    base_db = args.base_db or db
    peer_args = shlex.split(getattr(args, "peer_args", "") or "")
    if peer_args and not peer:
        raise errors.UsageError("--peer-args are for a --peer's harness: give --peer too")
    if peer:
        check_peer(peer, args.base, benches, flags, base_db, peer_args)
    root = sides.repo_root()
    python = sides.interpreter(None)
    with tempfile.TemporaryDirectory(prefix="chokaq-compare-") as tmp:
        head = sides.Side("head", "working tree", root, python, db)
        if peer:
            base, about = _peer_side(peer, root, sides.interpreter(args.base_python), base_db, peer_args)
        else:
            base, about = _revision_side(root, args.base or "HEAD", Path(tmp), args.base_python, db, base_db)
        header = {
            "event": "compare",
            **({"peer": about.pop("peer")} if peer else {}),
            "base": about["base"],
            "head": {"rev": "working tree", "tree": str(root), "db": redact(db), "imports": head.probe()},
            "benches": benches,
            "bench_args": flags,
            "rounds": args.rounds,
            "repeat": args.repeat,
            "bench_code_same": about["bench_code_same"],
            "machine": machine(),
        }
        if header["bench_code_same"] is False:
            err.write(
                f"note: the benches' own code differs between {base.rev[:12]} and the working tree: each "
                "side measures with its own\n"
            )
        emit = _emitter(out if args.format == "json" else None)
        emit(header)
        lines = list(
            rounds(base, head, benches, flags, args.rounds, args.repeat, runner or sides.Side.run, emit)
        )
    summaries = list(summarise(lines, metrics))
    for s in summaries:
        emit(s)
    (out if args.format == "table" else err).write(stats.table(summaries, header))
    return 0


def check_peer(
    peer: str,
    base: str | None,
    benches: Sequence[str],
    flags: dict[str, list[str]],
    db: str,
    peer_args: Sequence[str] = (),
) -> None:
    """Refuse, before any round, a peer comparison the peer's harness could not run as asked."""
    if base is not None:
        raise errors.UsageError(f"--peer {peer} is the base side: give --peer or --base, not both")
    harness = sides.peer_harness(peer)
    unsupported = [b for b in benches if b not in harness.BENCHES]
    if unsupported:
        raise errors.UsageError(
            f"--peer {peer} measures {','.join(harness.BENCHES)} only, not {','.join(unsupported)}"
        )
    if not db.startswith(("postgresql://", "postgres://")):
        raise errors.UsageError(f"--peer {peer} runs on PostgreSQL only: give a postgresql:// scratch --db")
    for bench in benches:
        harness.check_args(bench, [*flags[bench], *peer_args])


def _peer_side(
    peer: str, root: Path, python: str, db: str, peer_args: Sequence[str] = ()
) -> tuple[sides.Side, dict[str, Any]]:
    """The peer as the base side (its harness from the working tree) and what the compare line says of it."""
    side = sides.PeerSide("base", peer, root, python, db, peer=peer, extra=tuple(peer_args))
    versions = side.probe()
    side = side.versioned(versions)
    about: dict[str, Any] = {
        "peer": {
            "name": peer,
            "args": list(peer_args),
            **{k: v for k, v in versions.items() if k != "harness"},
        },
        "base": {
            "rev": side.rev,
            "peer": peer,
            "version": versions.get(peer),
            "tree": str(root),
            "db": redact(db),
            "imports": versions,
        },
        "bench_code_same": None,  # the two sides measure with different code by design
    }
    return side, about


def _revision_side(
    root: Path, rev: str, tmp: Path, python: str | None, db: str, base_db: str
) -> tuple[sides.Side, dict[str, Any]]:
    """A base revision exported into `tmp` as the base side, and what the compare line says of it."""
    commit = sides.resolve(root, rev)
    tree = sides.export(root, commit, tmp)
    dialect = "postgresql" if db.startswith("postgres") else "sqlite"
    if base_db == db and sides.digest(tree, sides.schema_paths(dialect)) != sides.digest(
        root, sides.schema_paths(dialect)
    ):
        raise errors.UsageError(
            f"the schema of {commit[:12]} differs from the working tree's: give the base a scratch "
            "database of its own (--base-db)"
        )
    base = sides.Side("base", commit, tree, sides.interpreter(python), base_db)
    about: dict[str, Any] = {
        "base": {"rev": commit, "tree": str(tree), "db": redact(base_db), "imports": base.probe()},
        "bench_code_same": sides.digest(tree, sides.BENCH_CODE) == sides.digest(root, sides.BENCH_CODE),
    }
    return base, about


def rounds(
    base: sides.Side,
    head: sides.Side,
    benches: Sequence[str],
    flags: dict[str, list[str]],
    count: int,
    repeat: int,
    runner: Runner,
    emit: Callable[[dict[str, Any]], None],
) -> Iterator[dict[str, Any]]:
    """Every bench on both sides per round, the side that goes first alternating (base in odd rounds):
    a drift of the machine's load over the run then falls on both sides alike."""
    for n in range(1, count + 1):
        order = (base, head) if n % 2 else (head, base)
        for bench in benches:
            for position, side in enumerate(order, start=1):
                for record in runner(side, bench, flags[bench], repeat):
                    if "stat" in record:
                        continue  # the bench's own median over --repeat; the rounds are summarised here
                    line = {
                        "event": "round",
                        "bench": bench,
                        "round": n,
                        "position": position,
                        "side": side.name,
                        "rev": side.rev,
                        "variant": stats.variant_of(record),
                        "metrics": _figures(record),
                    }
                    emit(line)
                    yield line


def summarise(lines: Sequence[dict[str, Any]], metrics: Sequence[str]) -> Iterator[dict[str, Any]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for line in lines:
        groups.setdefault((line["bench"], stats.variant_label(line["variant"])), []).append(line)
    for (bench, _), group in groups.items():
        for metric in metrics:
            summary = stats.summarise(bench, metric, group[0]["variant"], group)
            if summary is not None:
                yield summary


# Numbers in a bench line that describe the run, not its speed.
NOT_FIGURES = frozenset(
    {"rows", "run", "runs", "cpu_count", "producers", "noise", "batch", "batch_size", "batches", "claims"}
)


def _figures(record: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v
        for k, v in record.items()
        if isinstance(v, int | float)
        and not isinstance(v, bool)
        and k not in NOT_FIGURES
        and k not in stats.VARIANT_KEYS
    }


def _emitter(out: TextIO | None) -> Callable[[dict[str, Any]], None]:
    def emit(line: dict[str, Any]) -> None:
        if out is not None:
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
            out.flush()

    return emit
