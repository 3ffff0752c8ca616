"""Connections of the prepared hot paths (the worker's claims and moves, the producer's lean enqueues) on
libpq itself, through psycopg's low-level `pgconn`, instead of pyodbc and psqlODBC.

Those connections run nothing but prepared single statements in autocommit (Database._run picks their
kind only for names PostgresDialect.prepare_on_use prepared), so they need no more than this: PREPARE,
execute by name with text parameters, and the reply's few column types. Measured on one connection, a
prepared statement with a 1.6 KB reply: 37 us of client CPU and 100 us of wall time per call, against 80
and 160 through pyodbc (docs/benchmarks.md "The hot statements on libpq"); a claim cycle at concurrency 8
is about 1.2 ms, most of it this call. Everything else (transactions, operators' statements, the
application's own connections, the bulk loaders) stays on pyodbc, the stack's PostgreSQL driver.

psycopg's cursors are not used: their type adaptation cost more than the ODBC layer (357 us a claim).
"""

from __future__ import annotations

import functools
import math
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from psycopg import pq

# A connection that broke under a call: what pyodbc reports as SQLSTATE 08S01 / 08006 (transient).
CONNECTION_LOST = "08006"
# Column types (pg_type OIDs) converted as pyodbc converts them; every other type is read as text.
_BOOL, _NUMERIC, _TIMESTAMPTZ = 16, 1700, 1184
_INTS, _FLOATS = frozenset((20, 21, 23, 26)), frozenset((700, 701))


@functools.cache
def available() -> bool:
    """Whether psycopg (a dependency) can be imported: without it every connection stays on pyodbc.
    Imported on first use, so that SQLite users load neither driver."""
    try:
        import psycopg.pq  # noqa: F401
    except ImportError:
        return False
    return True


class LibpqError(Exception):
    """A failed call: args are (SQLSTATE, message), as pyodbc's errors carry them, so the dialect's
    transient, disconnect and unique-violation checks read both alike."""

    def __init__(self, sqlstate: str, message: str) -> None:
        super().__init__(sqlstate, message)

    def __str__(self) -> str:
        return f"{self.args[0]}: {self.args[1]}"


class Connection:
    """One libpq connection: what the pool, Database._execute and the dialect use of a pyodbc connection
    (cursor, close, autocommit, commit, rollback), and prepared calls. The store runs only prepared
    single statements on it, in autocommit; a transaction (autocommit set off, as on pyodbc) is there for
    diagnostics such as an EXPLAIN ANALYZE rolled back."""

    def __init__(self, params: dict[str, Any]) -> None:
        from psycopg import pq
        from psycopg.conninfo import make_conninfo

        self.pq = pq
        conninfo = make_conninfo(**{k: v for k, v in params.items() if v is not None})
        pgconn = pq.PGconn.connect(conninfo.encode())
        if pgconn.status != pq.ConnStatus.OK:
            message = _text(pgconn.error_message)
            pgconn.finish()
            raise LibpqError(CONNECTION_LOST, message or "could not connect")
        self.pgconn = pgconn
        self._autocommit = True

    @property
    def autocommit(self) -> bool:
        return self._autocommit

    @autocommit.setter
    def autocommit(self, on: bool) -> None:
        # As ODBC does: turning autocommit on commits the open transaction.
        if on != self._autocommit:
            self.script("COMMIT" if on else "BEGIN")
            self._autocommit = on

    def commit(self) -> None:
        if not self._autocommit:
            self.script("COMMIT")
            self.script("BEGIN")

    def rollback(self) -> None:
        if not self._autocommit:
            self.script("ROLLBACK")
            self.script("BEGIN")

    @property
    def socket(self) -> int:
        return self.pgconn.socket

    def cursor(self) -> Cursor:
        return Cursor(self)

    def close(self) -> None:
        self.pgconn.finish()

    def script(self, sql: str) -> None:
        """Run statements without parameters (the session's settings, a PREPARE) in one round trip."""
        self.simple(sql).clear()

    def simple(self, sql: str) -> pq.abc.PGresult:
        return self._result(lambda: self.pgconn.exec_(sql.encode()))

    def literal(self, value: Any) -> str:
        """A value as SQL text: NULL, a number, a boolean, or a quoted string (libpq's escaping)."""
        if value is None:
            return "NULL"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):  # 'nan' and 'inf' are literals only when quoted
            return repr(value) if math.isfinite(value) else f"'{value!r}'"
        return self.pq.Escaping(self.pgconn).escape_literal(str(value).encode()).decode()

    def execute_prepared(self, name: str, values: list[Any]) -> pq.abc.PGresult:
        encoded = [_param(v) for v in values]
        # None is SQL NULL, as in exec_params (exec_prepared's type hints leave it out).
        return self._result(lambda: self.pgconn.exec_prepared(name.encode(), encoded))  # type: ignore[arg-type]

    def execute_params(self, sql: str, values: list[Any]) -> pq.abc.PGresult:
        """A statement with $n parameters, unprepared (a pooler that does not keep prepared statements)."""
        encoded = [_param(v) for v in values]
        return self._result(lambda: self.pgconn.exec_params(sql.encode(), encoded))

    def _result(self, call: Any) -> pq.abc.PGresult:
        try:
            res = call()
        except Exception as exc:  # psycopg's own OperationalError: libpq could not send or returned nothing
            raise LibpqError(self._lost_or("HY000"), str(exc)) from exc
        pq = self.pq
        status = res.status
        if status in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK, pq.ExecStatus.EMPTY_QUERY):
            return res
        code = res.error_field(pq.DiagnosticField.SQLSTATE)
        message = _text(res.error_message) or _text(self.pgconn.error_message)
        res.clear()
        raise LibpqError(code.decode() if code else self._lost_or("HY000"), message)

    def _lost_or(self, sqlstate: str) -> str:
        return CONNECTION_LOST if self.pgconn.status != self.pq.ConnStatus.OK else sqlstate


class Cursor:
    """A call's reply, read as a pyodbc cursor's: `description`, `fetchone`, `fetchall`, `rowcount`."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.description: tuple[tuple[str], ...] | None = None
        self.rowcount = -1
        self._rows: list[tuple[Any, ...]] = []
        self._next = 0

    def execute(self, sql: str, *params: Any) -> Cursor:
        """pyodbc's form, `?` marks in order (a lone sequence is the parameters), for diagnostics and
        tests: the values are written into the text as quoted literals, as psqlODBC does without server
        prepares (so `EXPLAIN EXECUTE name(?, ...)` works); a `?` inside a literal is not told apart. The
        store's own calls go by execute_prepared."""
        values = list(params[0]) if len(params) == 1 and isinstance(params[0], list | tuple) else list(params)
        parts = sql.split("?")
        if len(parts) != len(values) + 1:
            raise LibpqError("07002", f"{len(parts) - 1} parameter marks for {len(values)} values")
        conn = self.connection
        text = parts[0] + "".join(conn.literal(v) + part for v, part in zip(values, parts[1:], strict=True))
        self.load(conn.simple(text))
        return self

    def load(self, res: pq.abc.PGresult) -> None:
        """Take a reply: its rows, each value converted by its column's type as pyodbc converts it."""
        try:
            tuples = res.command_tuples
            self.rowcount = -1 if tuples is None else tuples
            if res.status != self.connection.pq.ExecStatus.TUPLES_OK:
                self.description, self._rows = None, []
                return
            width = res.nfields
            self.description = tuple((_text(res.fname(i) or b""),) for i in range(width))
            kinds = [res.ftype(i) for i in range(width)]
            get = res.get_value
            self._rows = [
                tuple(_value(get(r, c), kinds[c]) for c in range(width)) for r in range(res.ntuples)
            ]
            self._next = 0
        finally:
            res.clear()

    def fetchone(self) -> tuple[Any, ...] | None:
        if self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows, self._rows, self._next = self._rows[self._next :], [], 0
        return rows

    def close(self) -> None:
        self._rows = []


def _param(value: Any) -> bytes | None:
    # Database._param leaves str, int, float and None (booleans as 0/1); every parameter is CAST in the SQL.
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    return (repr(value) if isinstance(value, float) else str(value)).encode()


def _value(raw: bytes | None, oid: int) -> Any:
    if raw is None:
        return None
    if oid in _INTS:
        return int(raw)
    if oid == _BOOL:
        return raw == b"t"
    if oid in _FLOATS:
        return float(raw)
    if oid == _NUMERIC:
        return Decimal(raw.decode())
    text = raw.decode()
    if oid == _TIMESTAMPTZ:  # the session's time zone is UTC: "2026-12-06 01:00:00.123+00"
        return datetime.fromisoformat(text)
    return text


def _text(raw: bytes | None) -> str:
    return raw.decode("utf-8", "replace").strip() if raw else ""
