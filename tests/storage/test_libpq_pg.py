"""The hot and producer connections on libpq (chokaq_ops/storage/libpq.py, docs/architecture.md "Drivers"):
the same values, errors and recoveries as the pyodbc connections they replace, on a real server."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from chokaq_ops import errors
from chokaq_ops.models import NewJob
from chokaq_ops.storage import Store, dialects, libpq
from tests.support.dbprobe import scalar, sql

pytestmark = pytest.mark.postgres_only

# One value of every type the hot statements return (and a NULL), as both drivers read them.
TYPED = (
    "SELECT CAST(7 AS integer) AS i, CAST(9000000000 AS bigint) AS b, CAST(2 AS smallint) AS s, true AS t,"
    " false AS f, CAST(1.5 AS double precision) AS d, CAST(2.25 AS numeric) AS n, 'héllo' AS x,"
    " CAST('2026-12-06 01:02:03.456789+00' AS timestamptz) AS at, CAST(NULL AS text) AS z,"
    " CAST('{\"a\": 1}' AS json) AS j,"
    " CAST($1 AS text) AS p, CAST($2 AS bigint) AS q, CAST($3 AS boolean) AS r"
)


def _libpq(store: Store) -> libpq.Connection:
    return libpq.Connection(store.dialect.libpq_params(application_name="chokaq-test"))


def _backend_pid(conn: libpq.Connection) -> int:
    cursor = conn.cursor()
    cursor.load(conn.execute_params("SELECT pg_backend_pid()", []))
    return int(cursor.fetchone()[0])


def test_hot_and_producer_connections_are_libpq_and_others_pyodbc(pg_url):
    with Store(pg_url) as store:
        store.enqueue([NewJob(type="t")])
        store.db.run("db_now", write=False)
        kinds = {kind: type(conns[0]).__module__ for kind, conns in store.db.pool._idle.items() if conns}
        assert kinds[dialects.PRODUCER] == "chokaq_ops.storage.libpq"
        assert kinds[""] == "pyodbc"
    # An ODBC option libpq has no word for keeps every connection on pyodbc, as the URL asks.
    with Store(pg_url + "?BoolsAsChar=0") as store:
        assert not store.dialect.hot_on_libpq
        store.enqueue([NewJob(type="t")])
        assert type(store.db.pool._idle[dialects.PRODUCER][0]).__module__ == "pyodbc"


def test_values_come_back_as_pyodbc_returns_them(pg_url):
    with Store(pg_url) as store:
        conn = _libpq(store)
        try:
            conn.script(f"PREPARE typed AS {TYPED}")
            cursor = conn.cursor()
            cursor.load(conn.execute_prepared("typed", ["ünï'\"code", 12345678901, 1]))
            row = cursor.fetchone()
            assert cursor.fetchone() is None
        finally:
            conn.close()
        odbc = store.dialect.connect()
        try:
            other = odbc.cursor()
            other.execute(
                TYPED.replace("$1", "?").replace("$2", "?").replace("$3", "?"), "ünï'\"code", 12345678901, 1
            )
            expected = tuple(other.fetchone())
        finally:
            odbc.close()
    assert [d[0] for d in cursor.description] == [
        "i",
        "b",
        "s",
        "t",
        "f",
        "d",
        "n",
        "x",
        "at",
        "z",
        "j",
        "p",
        "q",
        "r",
    ]
    assert row[:8] == (7, 9000000000, 2, True, False, 1.5, Decimal("2.25"), "héllo")
    assert row[8] == datetime(2026, 12, 6, 1, 2, 3, 456789, tzinfo=UTC)
    assert row[9:] == (None, '{"a": 1}', "ünï'\"code", 12345678901, True)
    # pyodbc returns the time without its zone (the session is UTC); the dialect adds UTC to both.
    assert row[:8] + row[9:] == expected[:8] + expected[9:]
    assert row[8].replace(tzinfo=None) == expected[8].replace(tzinfo=None)


def test_errors_carry_the_sqlstate_the_dialect_classifies(pg_url):
    with Store(pg_url) as store:
        dialect = store.dialect
        conn = _libpq(store)
        try:
            conn.script("PREPARE dup AS INSERT INTO queues (name) VALUES ($1)")
            conn.execute_prepared("dup", ["twice"])
            with pytest.raises(libpq.LibpqError) as info:
                conn.execute_prepared("dup", ["twice"])
            assert dialect.is_db_error(info.value) and dialect.is_unique_violation(info.value)
            assert not dialect.is_transient(info.value)
            # The server ends the session (an operator's pg_terminate_backend, a restart): transient.
            pid = _backend_pid(conn)
            sql(store, "SELECT pg_terminate_backend(?)", pid)
            with pytest.raises(libpq.LibpqError) as info:
                conn.execute_prepared("dup", ["again"])
            assert dialect.is_transient(info.value) and dialect.is_disconnect(info.value)
        finally:
            conn.close()


def test_a_prepared_statement_the_session_lost_is_prepared_again(pg_url):
    with Store(pg_url) as store:
        store.enqueue([NewJob(type="t", queue="q")])
        conn = store.db.pool.acquire(dialects.PRODUCER)
        try:
            assert isinstance(conn, libpq.Connection)
            conn.script("DEALLOCATE ALL")  # what a pooler's reset (DISCARD ALL) does to the session
        finally:
            store.db.pool.release(conn, dialects.PRODUCER)
        assert store.enqueue([NewJob(type="t", queue="q")])[0].status == "new"
        assert not store.dialect._prepare_off
        assert scalar(store, "SELECT count(*) FROM jobs_hot") == 2


def test_a_bounded_call_on_libpq_ends_within_its_bound(pg_url):
    with Store(pg_url, command_timeout=0.5, max_transient_retries=0) as store:
        # Another session holds the queue row the enqueue must lock: the server's statement timeout (and
        # failing that, the client's abort of the socket) ends the call.
        holder = store.dialect.connect()
        holder.autocommit = False
        holder.cursor().execute("LOCK TABLE queues IN ACCESS EXCLUSIVE MODE")
        try:
            start = time.monotonic()
            with pytest.raises(errors.TransientStorageError):
                store.enqueue([NewJob(type="t", queue="new-queue")])
            assert time.monotonic() - start < 3.0
        finally:
            holder.rollback()
            holder.close()
        assert store.enqueue([NewJob(type="t", queue="new-queue")])[0].status == "new"


def test_a_diagnostic_transaction_commits_and_rolls_back_as_on_pyodbc(pg_url):
    with Store(pg_url) as store:
        conn = _libpq(store)
        try:
            conn.autocommit = False
            conn.cursor().execute("INSERT INTO queues (name) VALUES (?)", "rolled-back")
            conn.rollback()
            conn.cursor().execute("INSERT INTO queues (name) VALUES (?)", ["kept-by-commit"])
            conn.commit()
            conn.cursor().execute("INSERT INTO queues (name) VALUES (?)", ("kept-by-autocommit",))
            conn.autocommit = True  # as ODBC: switching autocommit on commits the open transaction
        finally:
            conn.close()
        names = {r[0] for r in sql(store, "SELECT name FROM queues")}
    assert {"kept-by-commit", "kept-by-autocommit"} <= names and "rolled-back" not in names


def test_diagnostic_statements_take_values_as_quoted_literals(pg_url):
    with Store(pg_url) as store:
        conn = _libpq(store)
        try:
            row = (
                conn.cursor()
                .execute(
                    "SELECT CAST(? AS text), CAST(? AS double precision), CAST(? AS double precision), ?, ?",
                    ["it's; DROP TABLE jobs_hot --", float("nan"), float("-inf"), None, True],
                )
                .fetchone()
            )
        finally:
            conn.close()
    assert row[0] == "it's; DROP TABLE jobs_hot --" and row[1] != row[1] and row[2] == float("-inf")
    assert row[3:] == (None, True)
