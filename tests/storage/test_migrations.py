"""Schema and named SQL: `migrate` is idempotent and safe from many processes at once, schema.sql equals a
replay of the migrations (catalogs compared on both dialects), and both dialects define and compile the
same named queries."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from storage_factories import sql

from chokaq_ops.storage import Store
from chokaq_ops.storage import queries as named
from chokaq_ops.storage.migrate import current_version, latest_version, migrate, migrations, require_current
from tests.support.cli import record

CHOKAQ = str(Path(sys.executable).with_name("chokaq"))


@pytest.fixture
def fresh_url(request: pytest.FixtureRequest, db_url: str, tmp_path, pg_server) -> Iterator[str]:
    """An empty database (no schema) on the dialect of `db_url`."""
    if db_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    url = pg_server.create(migrated=False)
    yield url
    pg_server.drop(url)


def ledger(store: Store) -> list[tuple[int, str]]:
    return [
        (int(v), n) for v, n in sql(store, "SELECT version, name FROM schema_migrations ORDER BY version")
    ]


def expected_ledger(dialect: str) -> list[tuple[int, str]]:
    return [(m.version, m.name) for m in migrations(dialect)]


def test_migrate_is_idempotent_and_records_each_version_once(fresh_url):
    with Store(fresh_url, pool_size=2) as s:
        dialect = s.dialect.name
        assert current_version(s) == 0
        first = migrate(s)
        assert (first.fresh, first.applied, first.version) == (
            True,
            list(range(1, latest_version(dialect) + 1)),
            latest_version(dialect),
        )
        again = migrate(s)
        assert (again.fresh, again.applied, again.version) == (False, [], latest_version(dialect))
        assert ledger(s) == expected_ledger(dialect)
        assert current_version(s) == latest_version(dialect)
        require_current(s)  # does not raise
        # The seeded control rows exist once.
        assert sql(s, "SELECT name FROM queues") == [("default",)]


def test_an_older_database_gets_only_the_missing_migrations(fresh_url):
    steps = migrations("sqlite" if fresh_url.startswith("sqlite") else "postgresql")
    if len(steps) < 2:
        pytest.skip("needs at least two migrations")
    with Store(fresh_url, pool_size=2) as s:
        # A database that predates the newest migration: every earlier one replayed and recorded.
        *older, last = steps

        def replay(tx):
            tx.run("migrations_ensure_ledger")
            for m in older:
                tx.script(m.path.read_text())
                tx.run("migrations_record", version=m.version, name=m.name)

        with s.db.unbounded():
            s.db.transaction(replay)
        with pytest.raises(Exception, match="run `chokaq migrate`"):
            require_current(s)
        result = migrate(s)
        assert (result.applied, result.fresh) == ([last.version], False)
        assert ledger(s) == expected_ledger(s.dialect.name)


def test_concurrent_migrate_processes_on_a_fresh_database_all_succeed(fresh_url, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHOKAQ_")}
    procs = [
        subprocess.Popen(
            [CHOKAQ, "migrate", "--db", fresh_url, "--format", "json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    results = [record(out) for out, _ in outs]
    with Store(fresh_url, pool_size=1) as s:
        latest = latest_version(s.dialect.name)
        assert ledger(s) == expected_ledger(s.dialect.name)
        assert {r["version"] for r in results} == {latest}
        # Exactly one process built the schema; the others found it done.
        assert sorted(len(r["applied"]) for r in results) == [0, 0, latest]
        assert sum(r["fresh"] for r in results) == 1
        assert sql(s, "SELECT name FROM queues") == [("default",)]


# ------------------------------------------------------------------------------------ catalogs


def _norm(text: str | None) -> str:
    if text is None:
        return ""
    text = re.sub(r"--[^\n]*", "", text)
    return re.sub(r"\s+", " ", text).strip().lower()


def sqlite_catalog(store: Store) -> dict[str, Any]:
    out: dict[str, Any] = {}
    objects = sql(store, "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")
    for typ, name, table, text in objects:
        if typ == "table":
            cols = sql(
                store, f"SELECT cid, name, type, \"notnull\", dflt_value, pk FROM pragma_table_info('{name}')"
            )
            checks = sorted(re.findall(r"check\s*\((?:[^()]|\([^()]*\))*\)", _norm(text)))
            uniques = sorted(re.findall(r"unique\s*\([^)]*\)", _norm(text)))
            fks = sql(store, f"SELECT * FROM pragma_foreign_key_list('{name}')")
            out[f"table {name}"] = {"columns": cols, "checks": checks, "uniques": uniques, "fks": sorted(fks)}
        elif typ == "index":
            cols = sql(
                store, f"SELECT seqno, cid, name, \"desc\", coll, key FROM pragma_index_xinfo('{name}')"
            )
            where = _norm(text).partition(" where ")[2] if text else ""
            unique = sql(
                store,
                f"SELECT \"unique\", origin, partial FROM pragma_index_list('{table}') WHERE name = ?",
                name,
            )
            out[f"index {name}"] = {"table": table, "columns": cols, "where": where, "unique": unique}
        else:
            out[f"{typ} {name}"] = {"table": table, "sql": _norm(text)}
    return out


def pg_catalog(store: Store) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for row in sql(
        store,
        "SELECT table_name, column_name, ordinal_position, data_type, character_maximum_length,"
        " numeric_precision, column_default, is_nullable, is_identity, identity_generation"
        " FROM information_schema.columns"
        " WHERE table_schema = current_schema()",
    ):
        out[f"column {row[0]}.{row[1]}"] = row[2:]
    for name, kind, options in sql(
        store,
        "SELECT c.relname, c.relkind, c.reloptions FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'i', 'S', 'v', 'm')",
    ):
        out[f"relation {name}"] = (kind, options)
    for name, definition in sql(
        store, "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()"
    ):
        out[f"index {name}"] = definition
    for table, name, kind, definition in sql(
        store,
        "SELECT conrelid::regclass::text, conname, contype, pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE connamespace = current_schema()::regnamespace",
    ):
        out[f"constraint {table}.{name}"] = (kind, definition)
    for name, definition in sql(
        store,
        "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal",
    ):
        out[f"trigger {name}"] = definition
    for name, args, body in sql(
        store,
        "SELECT p.proname, pg_get_function_arguments(p.oid), p.prosrc FROM pg_proc p"
        " WHERE p.pronamespace = current_schema()::regnamespace",
    ):
        out[f"function {name}({args})"] = _norm(body)
    return out


def test_schema_sql_equals_a_replay_of_the_migrations(fresh_url, tmp_path, pg_server):
    if fresh_url.startswith("sqlite"):
        other = f"sqlite:///{tmp_path / 'replayed.db'}"
    else:
        other = pg_server.create(migrated=False)
    try:
        with Store(fresh_url, pool_size=1) as a, Store(other, pool_size=1) as b:
            assert migrate(a).fresh and migrate(b, fresh_from_schema=False).applied
            catalog = sqlite_catalog if a.dialect.name == "sqlite" else pg_catalog
            from_schema, replayed = catalog(a), catalog(b)
            assert len(from_schema) > 40  # the comparison saw the schema, not an empty catalog
            assert set(from_schema) == set(replayed), set(from_schema) ^ set(replayed)
            different = {
                k: (from_schema[k], replayed[k]) for k in from_schema if from_schema[k] != replayed[k]
            }
            assert not different
            assert ledger(a) == ledger(b)
            for table in ("queues", "stats_summary"):
                assert sql(a, f"SELECT * FROM {table}")[0][0] == sql(b, f"SELECT * FROM {table}")[0][0]
    finally:
        if not other.startswith("sqlite"):
            pg_server.drop(other)


# ------------------------------------------------------------------------------------ named SQL


def test_both_dialects_define_the_same_query_names():
    for file in ("queries", "schedules", "bench", "alerts", "horizon"):
        lite, pg = named.load("sqlite", file), named.load("postgresql", file)
        only = {name: dialect for name, dialect in named.DIALECT_ONLY.items() if name in set(lite) | set(pg)}
        assert (
            dict.fromkeys(set(lite) - set(pg), "sqlite") | dict.fromkeys(set(pg) - set(lite), "postgresql")
            == only
        ), file
        assert len(lite) > {"queries": 100, "schedules": 5, "bench": 5, "alerts": 15, "horizon": 0}[file]


def _head(text: str) -> str:
    """The first SQL keyword of a statement, after its leading comment lines."""
    return _norm(text).split(None, 1)[0].upper()


def _pg_params(qmark_sql: str) -> str:
    n = 0

    def number(_: re.Match[str]) -> str:
        nonlocal n
        n += 1
        return f"${n}"

    return re.sub(r"\?", number, qmark_sql)


def test_every_named_query_compiles(store):
    """SQLite: EXPLAIN each statement (after creating the temp staging table the blocks use); PostgreSQL:
    PREPARE / DEALLOCATE each statement. Nothing runs, so no parameters are needed."""
    checked, skipped = 0, set()
    with store.connection() as conn:
        cur = conn.cursor()
        try:
            if store.dialect.name == "sqlite":
                # The temp staging table the multi-statement blocks create first must exist to EXPLAIN them.
                for st in store.queries["enqueue"].statements:
                    if _head(st.sql) == "CREATE":
                        cur.execute(st.sql)
            for file in ("queries", "schedules", "bench", "alerts", "horizon"):
                for name, query in named.load(store.dialect.name, file).items():
                    for i, st in enumerate(query.statements):
                        head = _head(st.sql)
                        try:
                            if store.dialect.name == "sqlite":
                                cur.execute("EXPLAIN " + st.sql, dict.fromkeys(st.param_order))
                            elif head in ("SELECT", "WITH", "INSERT", "UPDATE", "DELETE", "VALUES"):
                                cur.execute(f"PREPARE chk_{checked} AS {_pg_params(st.qmark_sql)}")
                                cur.execute(f"DEALLOCATE chk_{checked}")
                            else:
                                skipped.add(
                                    head
                                )  # DDL and maintenance (ledger, VACUUM...) cannot be prepared
                                continue
                        except Exception as exc:
                            pytest.fail(f"{file}.{name} statement {i} does not compile: {exc}\n{st.sql}")
                        checked += 1
        finally:
            cur.close()
    # REINDEX CONCURRENTLY and the DO block of the upkeep (engine/upkeep.py) cannot be prepared either.
    maintenance = {"CREATE", "TRUNCATE", "VACUUM", "ANALYZE", "CHECKPOINT", "SET", "REINDEX", "DO"}
    assert checked > 140 and skipped <= maintenance, (checked, skipped)


def test_postgres_search_indexes_cannot_answer_equality_on_their_columns(pg_url):
    """The DLQ's trigram indexes are on lower(column): on the bare column they also answer `=`, and the
    planner joined a plan's items to the DLQ through the trigram index on id (30 s for 2,500 items)."""
    with Store(pg_url, pool_size=1) as store:
        defs = [
            r[0]
            for r in sql(store, "SELECT indexdef FROM pg_indexes WHERE indexname LIKE 'ix_jobs_dlq_search_%'")
        ]
    assert len(defs) == 4 and all("gin (lower(" in d for d in defs), defs
