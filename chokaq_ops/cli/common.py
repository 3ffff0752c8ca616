"""Flags and helpers every command shares: --db, --config, --format, settings and store loading.

Which commands may create a database: `migrate`, `serve`, `worker`, `demo`, `enqueue`, `schedules add`
and `token create` can do their work on a new one, so on SQLite they create the file (and its directory).
Every other command reads or changes jobs, queues or tokens that must already exist; on a SQLite file
that does not exist it stops with exit 2 instead of leaving an empty database behind a mistyped path.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from chokaq_ops import errors
from chokaq_ops.cli import output
from chokaq_ops.settings import Settings, load_settings
from chokaq_ops.storage import Store
from chokaq_ops.storage.dialects import SqliteDialect, from_url
from chokaq_ops.storage.migrate import migrate, require_current

log = logging.getLogger("chokaq.cli")


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


def open_store(args: argparse.Namespace, settings: Settings | None = None, *, create: bool = False) -> Store:
    """The store of --db/CHOKAQ_DB/config. Unless `create`, a SQLite file must exist already."""
    settings = settings or settings_from(args)
    if not create:
        require_existing(settings.storage.url)
    return Store.from_settings(settings)


def ensure_schema(store: Store, *, migrate_requested: bool) -> None:
    """SQLite: migrate (the embedded default must work out of the box). PostgreSQL: require a current
    schema unless asked to migrate (an upgrade of a shared database is an operator's decision)."""
    if store.dialect.name == "sqlite" or migrate_requested:
        result = migrate(store)
        if result.applied:
            log.info("schema at version %d (applied %s)", result.version, result.applied)
        return
    require_current(store)


def require_existing(url: str) -> None:
    """Refuse a SQLite URL whose file is missing (exit 2): opening it would create it, empty."""
    dialect = from_url(url)
    if not isinstance(dialect, SqliteDialect) or dialect.path == ":memory:":
        return
    if not os.path.isfile(dialect.path):
        where = os.path.abspath(dialect.path)
        raise errors.ValidationError(
            f"no SQLite database at {where} (from {url}): check --db or CHOKAQ_DB; "
            "`chokaq migrate --db URL` creates a new one",
            field="db",
        )


to_jsonable = output.jsonable


def print_json(value: Any) -> None:
    """`--format json` output of a listing (a `row` event per item) or of one object (a `record`
    event): JSON lines under the contract of docs/cli-json.md; `main` ends them with the final line."""
    out = output.current()
    if isinstance(value, Mapping):
        out.record(value)
        return
    for item in value:
        out.row(item)


def print_json_line(value: Mapping[str, Any]) -> None:
    """One event (a mapping with `event`), or a `record` of a mapping without one; flushed at once, so a
    script reading a long run's output line by line gets each line when it happens."""
    if "event" in value:
        output.current().line(value)
    else:
        output.current().record(value)


def text(value: Any, key: str = "") -> str:
    """One value as every human-readable view prints it: `-` for none, times in UTC to the millisecond
    (as in error messages), durations in milliseconds (`*_ms`) to a tenth."""
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(value, float):
        value = round(value, 1) if key.endswith("_ms") else value
        return str(int(value)) if value.is_integer() else str(value)
    return str(to_jsonable(value))


def print_record(record: Mapping[str, Any], order: Sequence[str]) -> None:
    """`key  value` lines: the keys of `order` that `record` has, then the rest alphabetically."""
    keys = [k for k in order if k in record] + sorted(k for k in record if k not in order)
    width = max(len(k) for k in keys)
    for key in keys:
        print(f"{key.ljust(width)}  {text(record[key], key)}")


def print_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], *, max_width: int = 60) -> None:
    """A plain aligned table; long cells are cut so a terminal stays readable."""

    def cell(v: Any, key: str) -> str:
        shown = "" if v is None else v if isinstance(v, str) else text(v, key)
        shown = shown.replace("\n", " ")
        return shown if len(shown) <= max_width else shown[: max_width - 1] + "…"

    body = [[cell(r.get(c), c) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(b[i]) for b in body]) for i, c in enumerate(columns)]
    print("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for b in body:
        print("  ".join(v.ljust(w) for v, w in zip(b, widths, strict=True)).rstrip())


def emit(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str], fmt: str, noun: str | None = None
) -> None:
    """JSON, or a table and (with `noun`) its footer on stderr."""
    if fmt == "json":
        print_json(list(rows))
        return
    print_table(rows, columns)
    if noun is not None:
        footer(len(rows), len(rows), noun)


def footer(shown: int, total: int, noun: str, *, page: int = 1, page_size: int | None = None) -> None:
    """The one footer of every listing, on stderr so pipes get only rows:
    `-- 51-100 of 230 dead jobs (page 2 of 5; --page 3 for more)`."""
    first = (page - 1) * (page_size or 0) + 1 if shown else 0
    text = f"-- {first}-{first + shown - 1 if shown else 0} of {total} {noun}"
    if page_size:
        pages = max(1, -(-total // page_size))
        text += f" (page {page} of {pages}{f'; --page {page + 1} for more' if page < pages else ''})"
    print(text, file=sys.stderr)


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
