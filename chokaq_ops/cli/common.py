"""Flags and helpers every command shares: --db, --config, --format, settings and store loading."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from chokaq_ops.settings import Settings, load_settings
from chokaq_ops.storage import Store


def add_common(parser: argparse.ArgumentParser) -> None:
    """--db URL (else CHOKAQ_DB, else the config file, else sqlite:///./chokaq.db) and --config FILE."""
    parser.add_argument(
        "--db", metavar="URL", help="database URL (default: CHOKAQ_DB, config, sqlite:///./chokaq.db)"
    )
    parser.add_argument(
        "--config", metavar="FILE", help="TOML configuration file (default: CHOKAQ_CONFIG, ./chokaq.toml)"
    )


def add_format(parser: argparse.ArgumentParser, default: str = "table") -> None:
    parser.add_argument(
        "--format", choices=("table", "json"), default=default, help=f"output format (default {default})"
    )


def settings_from(args: argparse.Namespace, overrides: Mapping[str, object] | None = None) -> Settings:
    merged: dict[str, object] = {"storage.url": getattr(args, "db", None)}
    merged.update(overrides or {})
    return load_settings(getattr(args, "config", None), env=os.environ, overrides=merged)


def open_store(args: argparse.Namespace, settings: Settings | None = None) -> Store:
    return Store.from_settings(settings or settings_from(args))


def to_jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, Mapping):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return value


def print_json(value: Any) -> None:
    json.dump(to_jsonable(value), sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


def print_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], *, max_width: int = 60) -> None:
    """A plain aligned table; long cells are cut so a terminal stays readable."""

    def cell(v: Any) -> str:
        text = "" if v is None else to_jsonable(v) if not isinstance(v, str) else v
        text = str(text).replace("\n", " ")
        return text if len(text) <= max_width else text[: max_width - 1] + "…"

    body = [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(b[i]) for b in body]) for i, c in enumerate(columns)]
    print("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for b in body:
        print("  ".join(v.ljust(w) for v, w in zip(b, widths, strict=True)).rstrip())


def emit(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], fmt: str) -> None:
    if fmt == "json":
        print_json(list(rows))
    else:
        print_table(rows, columns)


def progress_bar(total: int | None, desc: str) -> Callable[[int], None] | None:
    """A tqdm bar on a terminal, nothing when piped; returns a callback taking the running count."""
    if not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit="job", file=sys.stderr)

    def update(done: int) -> None:
        bar.update(done - bar.n)
        if total is not None and done >= total:
            bar.close()

    return update


def csv_list(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def read_ids(values: Iterable[str]) -> list[str]:
    """Ids from arguments; `-` reads them from stdin, one per line (scripts pipe thousands)."""
    out: list[str] = []
    for v in values:
        if v == "-":
            out.extend(line.strip() for line in sys.stdin if line.strip())
        else:
            out.extend(csv_list(v))
    return out
