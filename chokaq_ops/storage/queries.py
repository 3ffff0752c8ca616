"""Named SQL blocks loaded from sql/<dialect>/queries.sql.

A block starts with `-- name: <name>`; following `--` lines describe it; the body may hold several
statements, each ending with `;` at the end of a line. Parameters are written `:name`.

Two load-time expansions keep the SQL files free of repetition without building SQL at run time:
- `-- fragment: <name>` blocks are pasted wherever a query says `{{name}}`;
- a query with `-- order: key = expr, expr | key2 = expr` becomes one variant per key and
  direction, named `<name>@<key>:asc` / `<name>@<key>:desc`, with `{{order}}` replaced by the
  expressions in that direction. Callers choose a variant from a whitelist, never from raw input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

# Named queries only one dialect defines, and which: every other name exists in both (the storage tests
# check it). PostgreSQL claims by lanes (storage/lanes.py) and needs no head-of-index shortcut; SQLite
# keeps no dead row versions and needs neither lanes, counter deltas to fold, nor marks for the sweep.
DIALECT_ONLY = {
    "fetch_head": "sqlite",
    **dict.fromkeys(
        (
            "fetch_open",
            "discover_lanes",
            "peek_lanes",
            "fold_counters",
            "sweep_mark",
            "mark_abandoned",
            "mark_zombies",
            # Chunks of a bulk operation in flight together (storage/bulk_streams.py): SQLite has one writer.
            "dlq_chunk_bounds",
            # A plan's chunk claimed and acted on in one statement (storage/plan_ops.py): SQLite has no
            # data-modifying CTEs, and its claim and move run in the process anyway.
            "plan_resurrect_chunk",
            "plan_purge_chunk",
        ),
        "postgresql",
    ),
    # The upkeep (engine/upkeep.py): SQLite keeps no dead row versions to vacuum.
    **dict.fromkeys(
        (
            "upkeep_tables",
            "upkeep_invalid_hot_indexes",
            "upkeep_drop_invalid_hot_indexes",
            "upkeep_reindex_jobs_hot",
            "session_statement_timeout",
            "set_session_statement_timeout",
            *(
                f"upkeep_vacuum_{t}"
                for t in (
                    "jobs_hot",
                    "queue_counts",
                    "stats_summary",
                    "metric_buckets",
                    "idle_workers",
                    "workers",
                    "leases",
                    "sweep_marks",
                )
            ),
        ),
        "postgresql",
    ),
}

_BLOCK = re.compile(r"^--\s*(name|fragment):\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_ORDER = re.compile(r"^--\s*order:\s*(.+)$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"\{\{([a-z_][a-z0-9_]*)\}\}")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class Statement:
    sql: str
    """SQL with `:name` parameters (sqlite3 binds these natively)."""
    qmark_sql: str
    """The same SQL with `?` placeholders, for pyodbc."""
    param_order: tuple[str, ...]
    """Parameter names in placeholder order (a name may repeat)."""


@dataclass(frozen=True, slots=True)
class Query:
    name: str
    statements: tuple[Statement, ...]


def sql_root() -> Path:
    """The `sql/` folder: inside the installed package, or the repository root in a checkout."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "sql", here.parent / "sql"):
        if (candidate / "sqlite" / "queries.sql").is_file():
            return candidate
    raise FileNotFoundError("chokaq SQL files not found next to the package or in the repository root")


def _scan(sql: str) -> tuple[str, tuple[str, ...]]:
    """Rewrite `:name` to `?`, leaving string literals, quoted identifiers, comments and `::` casts alone."""
    out: list[str] = []
    names: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in ("'", '"'):
            end = i + 1
            while end < n:
                if sql[end] == ch:
                    if end + 1 < n and sql[end + 1] == ch:
                        end += 2
                        continue
                    break
                end += 1
            out.append(sql[i : end + 1])
            i = end + 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            end = n if end < 0 else end
            out.append(sql[i:end])
            i = end
        elif ch == ":" and i + 1 < n and sql[i + 1] == ":":
            out.append("::")
            i += 2
        elif ch == ":" and (m := _IDENT.match(sql, i + 1)):
            names.append(m.group(0))
            out.append("?")
            i = m.end()
        else:
            out.append(ch)
            i += 1
    return "".join(out), tuple(names)


def _split_statements(body: str) -> list[str]:
    """Split at lines ending with `;`, except inside PostgreSQL dollar-quoted bodies (`$$ ... $$`) and
    SQLite trigger bodies (`CREATE TRIGGER ... BEGIN` up to `END;`)."""
    parts, current = [], []
    in_dollar = in_trigger = False
    for line in body.splitlines():
        current.append(line)
        stripped = line.strip()
        if stripped.count("$$") % 2:
            in_dollar = not in_dollar
        if re.match(r"(?i)create\s+trigger\b", stripped) and re.search(r"(?i)\bbegin$", stripped):
            in_trigger = True
        if in_dollar or not stripped.endswith(";"):
            continue
        if in_trigger:
            if re.fullmatch(r"(?i)end\s*;", stripped):
                in_trigger = False
            else:
                continue
        parts.append("\n".join(current).strip())
        current = []
    tail = "\n".join(current).strip()
    if tail and not all(ln.strip().startswith("--") or not ln.strip() for ln in current):
        parts.append(tail)
    return [p.rstrip(";").rstrip() for p in parts if p.strip()]


def split_script(text: str) -> list[str]:
    """Statements of a schema or migration file (each ends with `;` at the end of a line)."""
    return _split_statements(text)


def _compile(name: str, body: str) -> Query:
    statements = []
    for sql in _split_statements(body):
        qmark, order = _scan(sql)
        statements.append(Statement(sql=sql, qmark_sql=qmark, param_order=order))
    if not statements:
        raise ValueError(f"query {name!r} has no statement")
    return Query(name=name, statements=tuple(statements))


def _expand(name: str, body: str, fragments: dict[str, str]) -> str:
    def paste(m: re.Match[str]) -> str:
        key = m.group(1)
        if key == "order":
            return m.group(0)
        if key not in fragments:
            raise ValueError(f"query {name!r} uses unknown fragment {key!r}")
        return fragments[key]

    for _ in range(8):  # fragments may use fragments; eight levels is plenty and stops cycles
        expanded = _PLACEHOLDER.sub(paste, body)
        if expanded == body:
            return body
        body = expanded
    raise ValueError(f"query {name!r}: fragments nest too deeply")


def _order_variants(name: str, body: str) -> dict[str, str]:
    m = _ORDER.search(body)
    if not m:
        return {name: body}
    variants = {}
    for spec in m.group(1).split("|"):
        key, _, exprs = spec.partition("=")
        columns = [c.strip() for c in exprs.split(",") if c.strip()]
        if not key.strip() or not columns:
            raise ValueError(f"query {name!r} has a malformed order spec {spec!r}")
        for direction in ("asc", "desc"):
            clause = ", ".join(f"{c} {direction.upper()}" for c in columns)
            variants[f"{name}@{key.strip()}:{direction}"] = body.replace("{{order}}", clause)
    return variants


def parse(text: str) -> dict[str, Query]:
    blocks: list[tuple[str, str, str]] = []
    matches = list(_BLOCK.finditer(text))
    for idx, m in enumerate(matches):
        end = matches[idx + 1].start() if idx + 1 < len(matches) else len(text)
        blocks.append((m.group(1), m.group(2), text[m.end() : end]))
    fragments = {
        name: "\n".join(ln for ln in body.strip().splitlines() if not ln.lstrip().startswith("--"))
        for kind, name, body in blocks
        if kind == "fragment"
    }
    queries: dict[str, Query] = {}
    for kind, name, body in blocks:
        if kind != "name":
            continue
        for variant, vbody in _order_variants(name, _expand(name, body, fragments)).items():
            if variant in queries:
                raise ValueError(f"query {variant!r} is defined twice")
            queries[variant] = _compile(variant, vbody)
    return queries


# The files every store loads: queries.sql, and concerns kept in files of their own (schedules.sql).
STORE_FILES = ("queries", "alerts", "horizon", "schedules")


def load_store(dialect: str) -> dict[str, Query]:
    """The named queries of a store: every file of STORE_FILES, whose names must not collide."""
    merged: dict[str, Query] = {}
    for file in STORE_FILES:
        for name, query in load(dialect, file).items():
            if name in merged:
                raise ValueError(f"query {name!r} of {file}.sql is defined in another store file too")
            merged[name] = query
    return merged


@cache
def load(dialect: str, name: str = "queries") -> dict[str, Query]:
    """The blocks of sql/<dialect>/<name>.sql: queries.sql for the Store, bench.sql for `chokaq bench`."""
    if not _IDENT.fullmatch(name):
        raise ValueError(f"bad SQL file name {name!r}")
    return parse((sql_root() / dialect / f"{name}.sql").read_text(encoding="utf-8"))
