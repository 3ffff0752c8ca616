"""Schema migrations: a fresh database gets schema.sql; an older one replays the missing migrations.

Runs in one transaction under a lock (PostgreSQL advisory lock, SQLite's write lock), so any number of
processes may run `chokaq migrate` at once; the ledger `schema_migrations` records each version once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from chokaq_ops import errors
from chokaq_ops.storage.database import Database, Tx
from chokaq_ops.storage.dialects import Dialect
from chokaq_ops.storage.queries import sql_root

T = TypeVar("T")

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path


@dataclass(frozen=True)
class MigrationResult:
    version: int
    applied: list[int]
    fresh: bool


def migrations(dialect: str) -> list[Migration]:
    found = []
    for path in sorted((sql_root() / dialect / "migrations").glob("*.sql")):
        m = _FILE.match(path.name)
        if not m:
            raise errors.StorageError(f"migration file {path.name} is not named NNNN_name.sql")
        found.append(Migration(int(m.group(1)), m.group(2), path))
    versions = [m.version for m in found]
    if versions != list(range(1, len(versions) + 1)):
        raise errors.StorageError(
            f"{dialect} migrations must be numbered 1..n without gaps, found {versions}"
        )
    return found


def latest_version(dialect: str) -> int:
    return len(migrations(dialect))


class Migratable(Protocol):
    """What migrating needs of a store: a Store, or the Database under it."""

    @property
    def dialect(self) -> Dialect: ...

    def transaction(self, fn: Callable[[Tx], T], *, write: bool = True) -> T: ...

    def run(self, name: str, /, *, write: bool = True, **params: Any) -> list[dict[str, Any]]: ...


def migrate(store: Migratable, *, fresh_from_schema: bool = True) -> MigrationResult:
    """Bring the schema to the latest version. `fresh_from_schema=False` replays every migration on an
    empty database instead of loading schema.sql (the test that the two agree uses it)."""
    dialect = store.dialect.name
    steps = migrations(dialect)

    def apply(tx: Tx) -> MigrationResult:
        tx.run("migrations_lock")
        tx.run("migrations_ensure_ledger")
        applied = {int(r["version"]) for r in tx.run("migrations_applied")}
        empty = not applied and not int(tx.run("schema_has_jobs")[0]["n"])
        if empty and fresh_from_schema:
            tx.script((sql_root() / dialect / "schema.sql").read_text(encoding="utf-8"))
            for m in steps:
                tx.run("migrations_record", version=m.version, name=m.name)
            return MigrationResult(version=len(steps), applied=[m.version for m in steps], fresh=True)
        done = []
        for m in steps:
            if m.version not in applied:
                tx.script(m.path.read_text(encoding="utf-8"))
                tx.run("migrations_record", version=m.version, name=m.name)
                done.append(m.version)
        return MigrationResult(version=len(steps), applied=done, fresh=empty)

    with Database.unbounded():
        return store.transaction(apply)


def current_version(store: Migratable) -> int:
    if not int(store.run("schema_ledger_exists", write=False)[0]["n"]):
        return 0
    rows = store.run("migrations_applied", write=False)
    return max((int(r["version"]) for r in rows), default=0)


def require_current(store: Migratable) -> None:
    have, want = current_version(store), latest_version(store.dialect.name)
    if have < want:
        raise errors.SchemaOutdated(
            f"database schema is at version {have}, this chokaq needs {want}: run `chokaq migrate`"
        )
