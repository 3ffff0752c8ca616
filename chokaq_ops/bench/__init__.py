"""`chokaq bench <name>`: measurements of the storage hot paths (docs/benchmarks.md), on a scratch database.

Every bench is a module registered in `BENCHES` below. The CLI (chokaq_ops/cli/bench.py) builds one
subcommand per entry and gives each the shared flags `--db`, `--config`, `--rows N`, `--repeat K`
(default 3) and `--force`; the module adds its own and does the work:

    add_arguments(parser: argparse.ArgumentParser) -> None
        Extra flags; call `parser.set_defaults(rows=...)` for the default row count.
    run(args: argparse.Namespace) -> Iterator[dict]
        Yields one dict per measurement (at least `bench`, `db`, `rows`, `seconds` and `per_second`,
        or `p50_ms`/`p95_ms`/`ms`), then one summary dict with `"stat": "median"`. The CLI prints each
        as one JSON line and adds the machine (`cpu_count`, `platform`, `cpu_model`) when missing.

`chokaq_ops.bench.harness` holds what benches share: opening the database with the refusal to touch
one that holds jobs (benches delete data), seeding from sql/<dialect>/bench.sql, records and medians.

Adding a bench is one line here, e.g. `"throughput": "chokaq_ops.bench.throughput",` plus its module.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Iterator
from typing import Any, Protocol, cast

BENCHES: dict[str, str] = {
    "purge-archive": "chokaq_ops.bench.purge_archive",
    "purge-dlq": "chokaq_ops.bench.purge_dlq",
    "resurrect": "chokaq_ops.bench.resurrect",
    "sweep": "chokaq_ops.bench.sweep",
    "maintenance": "chokaq_ops.bench.maintenance",
    "claim": "chokaq_ops.bench.claim",
    "throughput": "chokaq_ops.bench.throughput",
    "latency": "chokaq_ops.bench.latency",
    "enqueue": "chokaq_ops.bench.enqueue",
    "api": "chokaq_ops.bench.api",
    "load": "chokaq_ops.bench.frame_load",  # not bench/load.py: it would shadow bench.load()
    "soak": "chokaq_ops.bench.soak",
}


class BenchModule(Protocol):
    __doc__: str | None

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> Iterator[dict[str, Any]]: ...


def names() -> list[str]:
    return list(BENCHES)


def load(name: str) -> BenchModule:
    """The module behind a bench name (imported on first use)."""
    return cast(BenchModule, importlib.import_module(BENCHES[name]))
