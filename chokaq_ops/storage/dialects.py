"""What differs per database outside the SQL text: connecting, binding, transient errors, decoding."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import os
import socket
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from chokaq_ops import errors
from chokaq_ops.redact import redact
from chokaq_ops.storage import deadline, libpq
from chokaq_ops.storage.queries import Statement

log = logging.getLogger("chokaq.storage")

# Columns that hold booleans; SQLite returns them as 0/1.
_BOOL_COLUMNS = frozenset({"paused", "active", "beat", "late"})


def _is_time_column(name: str) -> bool:
    return name.endswith("_at") or name in ("at", "bucket_start")


@functools.lru_cache(maxsize=1024)
def _columns(raw_names: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[int, ...], tuple[int, ...]]:
    """A result's column names (lower case) and which of them hold times and booleans: worked out once
    per column list, not for every result (the worker reads the same few shapes thousands of times)."""
    names = tuple(n.lower() for n in raw_names)
    times = tuple(i for i, n in enumerate(names) if _is_time_column(n))
    bools = tuple(i for i, n in enumerate(names) if n in _BOOL_COLUMNS)
    return names, times, bools


# A reply packed into one JSON text: a single column of this name holding `[names, rows]`, the column
# names and the rows as arrays (PostgreSQL `json_build_array`, `json_agg`; rows null when there are
# none). The driver then converts one value, not one per column and row: a claim of 8 read 200 values
# through the ODBC layer, its costliest client-side part (docs/benchmarks.md "Packed replies").
# Dialect.rows reads the arrays as it reads the driver's rows.
PACKED_ROWS = "packed_rows"


HOT = "hot"  # the kind of pooled connection the worker's hot statements run on (PostgresDialect)
# The kind the producer's lean enqueue runs on: prepared, with its one generic plan from the first call
# (see PostgresDialect.prepare_on_use).
PRODUCER = "producer"
# Planner methods a hot connection turns off (they are penalised, not forbidden: used when nothing else
# can answer), so its plans read rows through indexes, in index order, whatever the statistics say.
_RULE_PLANNING = ("enable_seqscan", "enable_bitmapscan", "enable_sort", "enable_hashjoin", "enable_mergejoin")


class Dialect:
    name: str
    url: str
    # True when a statement reads a snapshot taken at its start while other transactions commit around it
    # (PostgreSQL READ COMMITTED): a check inside one statement can miss a move committed meanwhile, so
    # enqueue re-checks explicit ids in a second statement. SQLite runs each writer transaction alone.
    snapshot_per_statement = False
    # True when writer transactions run side by side (PostgreSQL); SQLite runs one writer at a time, so
    # a bulk operation's chunks gain nothing from being in flight together (storage/bulk_streams.py).
    parallel_writers = False

    def connect(self, kind: str = "") -> Any:
        raise NotImplementedError

    def close(self, conn: Any) -> None:
        """Close a connection this dialect made (quietly: it may be dead already) and drop what the
        dialect keeps about it by id(conn), which a long-lived process would otherwise gather one entry
        per connection ever opened (a pool renews them after every disconnect)."""
        with contextlib.suppress(Exception):
            conn.close()
        self._forget(id(conn))

    def _forget(self, key: int) -> None:
        pass

    def execute(self, cursor: Any, statement: Statement, params: dict[str, Any]) -> None:
        raise NotImplementedError

    def begin(self, conn: Any, write: bool) -> None:
        raise NotImplementedError

    def join_transaction(self, conn: Any) -> None:
        """Check that `conn`, an application's own connection, has (or now opens) a transaction an
        enqueue can join; a connection that would commit each statement on its own is refused, since a
        job committed without the application's write breaks the promise of a transactional enqueue."""
        raise NotImplementedError

    def bound(self, conn: Any, seconds: float | None) -> Callable[[], None] | None:
        """Prepare `conn` for a call bounded to `seconds` (None: unbounded); returns what aborts the call
        from another thread once the bound has passed (see storage/deadline.py), or None if nothing can."""
        return None

    def abort_grace(self, default: bool) -> float:
        """Seconds past the bound before the client aborts: with the default bound the server's own timeout
        should end the statement first (cleanly, keeping the connection)."""
        return 0.0

    def commit(self, conn: Any) -> None:
        conn.commit()

    def rollback(self, conn: Any) -> None:
        conn.rollback()

    def is_transient(self, exc: BaseException) -> bool:
        raise NotImplementedError

    def is_disconnect(self, exc: BaseException) -> bool:
        return False

    def is_db_error(self, exc: BaseException) -> bool:
        raise NotImplementedError

    def is_unique_violation(self, exc: BaseException) -> bool:
        raise NotImplementedError

    def parse_time(self, value: Any) -> datetime | None:
        raise NotImplementedError

    def rows(self, cursor: Any) -> list[dict[str, Any]]:
        description = cursor.description
        if description is None:
            return []
        if len(description) == 1 and description[0][0] == PACKED_ROWS:
            packed = cursor.fetchone()[0]
            if not packed:
                return []
            raw_names, raw_rows = json.loads(packed)  # times come as ISO 8601 text: parse_time reads it
            raw_rows = raw_rows or []
            return self._decoded(raw_rows, tuple(raw_names), own=True)
        return self._decoded(cursor.fetchall(), tuple(d[0] for d in description), own=False)

    def _decoded(self, raw_rows: Any, raw_names: tuple[str, ...], *, own: bool) -> list[dict[str, Any]]:
        """Rows as dicts, times parsed and booleans made bools. `own`: the rows are lists of this call's
        own (a packed reply's), changed in place instead of copied."""
        names, times, bools = _columns(raw_names)
        width = len(names)
        if not times and not bools:
            return [dict(zip(names, raw, strict=True)) for raw in raw_rows]
        parse = self.parse_time
        # A reply's times repeat: a claim's rows share their started_at (one now()), and jobs enqueued
        # together their created_at and due_at. Each distinct text is parsed once per reply.
        parsed: dict[Any, Any] = {}
        out = []
        for raw in raw_rows:
            values = raw if own else list(raw)
            if len(values) != width:
                raise ValueError(f"a row of {len(values)} values for {width} columns")
            for i in times:
                value = values[i]
                if value is not None:  # the worker's claims carry several NULL times per row
                    done = parsed.get(value)
                    if done is None:
                        done = parsed[value] = parse(value)
                    values[i] = done
            for i in bools:
                if values[i] is not None:
                    values[i] = bool(values[i])
            out.append(dict(zip(names, values, strict=False)))  # widths checked above
        return out

    def redacted_url(self) -> str:
        return redact(self.url)


@dataclass
class SqliteDialect(Dialect):
    url: str
    path: str
    busy_timeout_ms: int = 30000
    # A log that restarts is cut back to this (PRAGMA journal_size_limit; Storage.WalLimitMb, storage/wal.py).
    wal_limit_bytes: int = 64 * 2**20
    name: str = "sqlite"
    # id(connection) -> the busy timeout (ms) it has now: a bounded call lowers it for its own duration.
    _busy: dict[int, int] = field(default_factory=dict, repr=False)

    def _forget(self, key: int) -> None:
        self._busy.pop(key, None)

    def connect(self, kind: str = "") -> sqlite3.Connection:
        if self.path != ":memory:" and not self.path.startswith("file:"):
            _create_private(Path(self.path))
        conn = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=self.busy_timeout_ms / 1000
        )
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
        self._busy[id(conn)] = int(self.busy_timeout_ms)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA journal_size_limit = {int(self.wal_limit_bytes)}")
        # NORMAL is durable across application crashes in WAL mode; only an OS crash can lose the
        # last commits, which is the usual trade for an embedded queue.
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute("PRAGMA foreign_keys = OFF")
        return conn

    def execute(self, cursor: Any, statement: Statement, params: dict[str, Any]) -> None:
        cursor.execute(statement.sql, {k: params.get(k) for k in statement.param_order})

    def bound(self, conn: Any, seconds: float | None) -> Callable[[], None] | None:
        # Waiting for the writer lock is SQLite's busy handler, which an interrupt does not end: the wait
        # is bounded by the busy timeout, set to the call's bound; a statement that runs too long is
        # interrupted.
        ms = int(self.busy_timeout_ms)
        if seconds is not None:
            ms = max(1, min(ms, int(seconds * 1000)))
        if self._busy.get(id(conn)) != ms:
            conn.execute(f"PRAGMA busy_timeout = {ms}")
            self._busy[id(conn)] = ms
        return conn.interrupt

    def abort_grace(self, default: bool) -> float:
        return 0.5

    def begin(self, conn: Any, write: bool) -> None:
        # IMMEDIATE takes the write lock up front so a reader never has to upgrade (which would
        # fail with SQLITE_BUSY instead of waiting).
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")

    def join_transaction(self, conn: Any) -> None:
        if not isinstance(conn, sqlite3.Connection):
            raise errors.ValidationError(
                f"a SQLite store enqueues on a sqlite3 connection, not {type(conn).__name__}",
                field="connection",
            )
        if conn.in_transaction:
            return
        if conn.isolation_level is None:
            raise errors.ValidationError(
                "the sqlite3 connection is in autocommit mode with no open transaction: "
                "run BEGIN first (or enqueue without connection=)",
                field="connection",
            )
        # sqlite3's legacy mode would open a deferred transaction at the application's next write; open
        # it here instead, IMMEDIATE so the enqueue's reads never have to upgrade to the write lock.
        conn.execute("BEGIN IMMEDIATE")

    def is_transient(self, exc: BaseException) -> bool:
        if isinstance(exc, sqlite3.OperationalError):
            text = str(exc).lower()
            return "locked" in text or "busy" in text or "interrupted" in text
        return False

    def is_db_error(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.Error)

    def is_unique_violation(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.IntegrityError) and "unique" in str(exc).lower()

    def parse_time(self, value: Any) -> datetime | None:
        if value is None or isinstance(value, datetime):
            return value
        return datetime.fromisoformat(str(value)).replace(tzinfo=UTC)


# SQLSTATEs worth a retry: serialization failure, deadlock, lock timeout, statement timeout (or a
# cancel), connection trouble, server shutting down or starting, too many connections.
_PG_TRANSIENT = ("40001", "40P01", "55P03", "57014", "57P01", "57P02", "57P03", "53300", "08")
# TCP keepalives on both ends: a peer that vanished (host down, cable cut, NAT state dropped) is noticed
# within ~1 minute instead of the kernel's default two hours; the server side frees the locks of a dead
# client as soon. tcp_user_timeout ends a connection whose sent data stays unacknowledged that long.
KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT = 30, 10, 3
TCP_USER_TIMEOUT_MS = 60_000
# A client abort comes this long after the server's statement_timeout should have ended the statement.
ABORT_GRACE_S = 2.0
# Connects are serialised so that the socket each one opens can be told apart (see _own_socket).
_connect_lock = threading.Lock()
# URL options that libpq knows by the same name (the rest are psqlODBC's: see PostgresDialect.hot_on_libpq).
_LIBPQ_URL_OPTIONS = frozenset(
    {"sslmode", "sslrootcert", "sslcert", "sslkey", "sslcrl", "sslpassword", "target_session_attrs"}
)
_PG_DISCONNECT_TEXT = (
    "server closed the connection",
    "terminating connection",
    "could not connect",
    "connection",
    "no connection",
    "communication link",
    "could not send data",
)


@dataclass
class PostgresDialect(Dialect):
    url: str
    odbc: str
    name: str = "postgresql"
    snapshot_per_statement = True
    parallel_writers = True
    port: int = 5432
    # Storage.CommandTimeout (server statement_timeout), Storage.LockTimeout (the worker's connections),
    # Storage.ConnectTimeout (login); seconds, 0 for none.
    command_timeout: float = 30.0
    lock_timeout: float = 5.0
    connect_timeout: float = 10.0
    # id(connection) -> the file descriptor of its socket, to abort a call past its bound.
    _sockets: dict[int, int] = field(default_factory=dict, repr=False)
    # The worker's hot statements and the producer's (see `prepare_on_use`), by id(Statement): (prepared
    # statement name, parameter names in $n order, PREPARE text).
    # Per prepared statement: its name, parameter order, PREPARE text and EXECUTE text (made once).
    _prepared: dict[int, tuple[str, tuple[str, ...], str, str]] = field(default_factory=dict, repr=False)
    # id(hot or producer connection) -> names prepared on it; set up whenever connect() makes one.
    _prepared_on: dict[int, set[str]] = field(default_factory=dict, repr=False)
    _prepare_off: bool = False

    def _forget(self, key: int) -> None:
        self._sockets.pop(key, None)
        self._prepared_on.pop(key, None)

    def libpq_params(self, application_name: str = "chokaq-listener") -> dict[str, Any]:
        """The URL's server, database, login and TLS options as libpq keywords (psycopg): for the worker's
        listening connection (engine/wakeup.py) and the hot and producer connections (storage/libpq.py)."""
        parts = urlsplit(self.url)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items() if k in _LIBPQ_URL_OPTIONS}
        return query | {
            "host": parts.hostname or "127.0.0.1",
            "port": parts.port or 5432,
            "dbname": unquote(parts.path.lstrip("/")) or "postgres",
            "user": unquote(parts.username or "postgres"),
            "password": unquote(parts.password or "") or None,
            "connect_timeout": max(1, math.ceil(self.connect_timeout)) if self.connect_timeout > 0 else 10,
            "keepalives": 1,
            "keepalives_idle": KEEPALIVE_IDLE_S,
            "keepalives_interval": KEEPALIVE_INTERVAL_S,
            "keepalives_count": KEEPALIVE_COUNT,
            "tcp_user_timeout": TCP_USER_TIMEOUT_MS,
            "application_name": application_name,
        }

    @property
    def hot_on_libpq(self) -> bool:
        """Whether the hot and producer connections (prepared statements only) are libpq's
        (storage/libpq.py): unless the driver prepares statements itself, or the URL carries an ODBC
        option that libpq has no word for (then every connection stays on pyodbc, as the URL asks)."""
        if self.driver_prepares or not libpq.available():
            return False
        options = set(parse_qs(urlsplit(self.url).query))
        return options <= _LIBPQ_URL_OPTIONS | {"driver"}

    @property
    def driver_prepares(self) -> bool:
        return "useserversideprepare=1" in self.odbc.lower().replace(" ", "")

    def prepare_on_use(self, statements: dict[str, Statement]) -> set[str]:
        """Run these statements (the worker's hot path) on hot connections, as server-side prepared
        statements with one generic plan each: PREPARE once per connection, then `EXECUTE name(...)`.
        Planning was half of their server time (a claim: 0.3 of 0.6 ms; the lane claim's plan takes 3 ms
        to make). A generic plan is made once, from the statistics of that moment, and kept, so each
        hot statement is written to have one right plan whatever those statistics say (an empty table
        included): every read of jobs_hot has exactly one index that answers it in the order it asks
        for, or goes by primary key or ctid, and rule planning (_RULE_PLANNING, set on every hot
        connection) leaves no other way that does not cost a sort or a sequential scan
        (tests/storage/test_fetch_start.py checks the plans made from an empty table). Returns the
        names that will be prepared; none when the driver prepares every statement itself
        (UseServerSidePrepare=1).

        The producer's lean enqueue is prepared the same way on producer connections (PRODUCER): it
        reads no table by statistics (an INSERT of given values; the queue row through its primary key,
        the idle workers' marks of the last minute). Planning (and parsing) it was 0.55 ms of an
        enqueue's 0.75 ms of server time (docs/benchmarks.md)."""
        if self.driver_prepares:
            return set()
        names = set()
        for name, st in statements.items():
            order = tuple(dict.fromkeys(st.param_order))
            parts = st.qmark_sql.split("?")
            if len(parts) != len(st.param_order) + 1:  # a literal '?' somewhere: leave it unprepared
                continue
            marks = [f"${order.index(k) + 1}" for k in st.param_order]
            text = parts[0] + "".join(m + p for m, p in zip(marks, parts[1:], strict=True))
            run = f"EXECUTE chokaq_{name}({', '.join('?' * len(order))})"
            self._prepared[id(st)] = (f"chokaq_{name}", order, f"PREPARE chokaq_{name} AS {text}", run)
            names.add(name)
        return names

    def connect(self, kind: str = "") -> Any:
        if kind in (HOT, PRODUCER) and self.hot_on_libpq:
            return self._connect_libpq(kind)
        pyodbc = _pyodbc()
        login = self._login_seconds()
        # Whole seconds (ODBC's login timeout), at least one; 0 is the driver's default.
        seconds = max(1, math.ceil(login)) if login is not None else 0
        try:
            # Only while no other connect is under way can the new socket be told apart; a connect that
            # cannot wait for its turn goes ahead without (the server-side timeouts still bound it).
            locked = _connect_lock.acquire(timeout=min(login or 1.0, 1.0))
            try:
                before = _socket_fds() if locked else None
                conn = pyodbc.connect(self.odbc, autocommit=True, timeout=seconds)
                fd = self._own_socket(before)
            finally:
                if locked:
                    _connect_lock.release()
        except pyodbc.Error as exc:
            raise errors.TransientStorageError(f"cannot connect to {self.redacted_url()}: {exc}") from exc
        if fd is None:
            self._sockets.pop(id(conn), None)
        else:
            self._sockets[id(conn)] = fd
        self._track_prepared(conn, kind)
        try:
            cur = conn.cursor()
            cur.execute(self._session_settings(kind))
            cur.close()
        except BaseException:
            self.close(conn)  # not left open, nor remembered, when its settings failed
            raise
        return conn

    def _connect_libpq(self, kind: str) -> libpq.Connection:
        params = self.libpq_params(application_name="chokaq")
        login = self._login_seconds()
        if login is not None:
            params["connect_timeout"] = max(1, min(int(params["connect_timeout"]), math.ceil(login)))
        try:
            conn = libpq.Connection(params)
        except libpq.LibpqError as exc:
            raise errors.TransientStorageError(f"cannot connect to {self.redacted_url()}: {exc}") from exc
        self._sockets[id(conn)] = conn.socket
        self._track_prepared(conn, kind)
        try:
            conn.script(self._session_settings(kind))
        except libpq.LibpqError as exc:
            self.close(conn)
            raise errors.TransientStorageError(f"cannot set up {self.redacted_url()}: {exc}") from exc
        return conn

    def _login_seconds(self) -> float | None:
        """How long a connect may take: Storage.ConnectTimeout, or less when the call's deadline is
        nearer; None for no limit."""
        login = self.connect_timeout if self.connect_timeout > 0 else None
        left = deadline.remaining()
        if left is not None:
            login = left if login is None else min(login, left)
        return login

    def _prepares(self, kind: str) -> bool:
        """Whether connections of `kind` run their statements prepared by chokaq, one generic plan each,
        planned by rule (the hot and producer kinds, unless the driver prepares: see prepare_on_use)."""
        return kind in (HOT, PRODUCER) and not self.driver_prepares

    def _track_prepared(self, conn: Any, kind: str) -> None:
        """A hot or producer connection keeps the names prepared on it (see prepare_on_use)."""
        if self._prepares(kind):
            self._prepared_on[id(conn)] = set()
        else:
            self._prepared_on.pop(id(conn), None)

    def _session_settings(self, kind: str) -> str:
        """The session's settings as one simple query of several SETs (a statement each was 9-15 round
        trips per new connection)."""
        settings = ["SET TIME ZONE 'UTC'"]
        settings.append(f"SET statement_timeout = {int(self.command_timeout * 1000)}")
        # A transaction left open by a client that hangs or dies mid-way holds its row locks until this
        # ends it.
        settings.append(
            f"SET idle_in_transaction_session_timeout = {int(max(self.command_timeout, 60) * 1000)}"
        )
        settings.append(f"SET tcp_keepalives_idle = {KEEPALIVE_IDLE_S}")
        settings.append(f"SET tcp_keepalives_interval = {KEEPALIVE_INTERVAL_S}")
        settings.append(f"SET tcp_keepalives_count = {KEEPALIVE_COUNT}")
        # Every statement is planned with its actual parameters: generic plans cannot prune
        # `:x IS NULL OR col = :x` filters (also when the driver prepares, UseServerSidePrepare=1). Hot
        # and producer connections make one generic plan per statement instead (see prepare_on_use).
        if self._prepares(kind):
            settings.append("SET plan_cache_mode = force_generic_plan")
        else:
            settings.append("SET plan_cache_mode = force_custom_plan")
        if self._prepares(kind):
            # The worker's statements read rows only through the fetch indexes in order and the primary
            # key, which are right at any size. Planned by statistics, they went wrong whenever the
            # statistics lagged the table (analyzed while the queue was idle, then a burst of enqueues:
            # the claim bitmap-scanned and sorted the whole backlog, 13 ms per claim at 50,000 jobs
            # instead of 0.6 ms, until autovacuum caught up). So hot connections plan by rule.
            for setting in _RULE_PLANNING:
                settings.append(f"SET {setting} = off")
        if kind == HOT and not self.driver_prepares:
            # The worker's writes never wait long on a row another session holds (an operator's open
            # transaction, a report's SELECT ... FOR UPDATE): they fail fast and are retried.
            settings.append(f"SET lock_timeout = {int(self.lock_timeout * 1000)}")
        # Every chokaq statement is short; JIT compiles any plan whose estimate crosses jit_above_cost, and
        # the LIMIT-ed lateral scans of fetch estimate high: 100 ms of compilation for a 2 ms claim.
        settings.append("SET jit = off")
        settings.append("SET application_name = 'chokaq'")
        return "; ".join(settings)

    def _own_socket(self, before: dict[int, str] | None) -> int | None:
        """(connect lock held) The socket the connect just opened: the one new socket whose peer is the
        server's port. None when it cannot be told (no /proc, or more than one candidate)."""
        after = _socket_fds()
        if before is None or after is None:
            return None
        found = []
        for fd, link in after.items():
            if before.get(fd) == link or not link.startswith("socket:"):
                continue
            try:
                with socket.socket(fileno=os.dup(fd)) as sock:
                    peer = sock.getpeername()
            except OSError:
                continue
            if (isinstance(peer, tuple) and peer[1] == self.port) or (
                isinstance(peer, str) and peer.endswith(f".s.PGSQL.{self.port}")
            ):
                found.append(fd)
        return found[0] if len(found) == 1 else None

    def bound(self, conn: Any, seconds: float | None) -> Callable[[], None] | None:
        fd = self._sockets.get(id(conn))
        return None if fd is None else functools.partial(_shutdown_socket, fd)

    def abort_grace(self, default: bool) -> float:
        return ABORT_GRACE_S if default else 0.0

    def execute(self, cursor: Any, statement: Statement, params: dict[str, Any]) -> None:
        prepared = self._prepared.get(id(statement))
        conn = cursor.connection
        done = self._prepared_on.get(id(conn))
        if prepared is None or done is None or self._prepare_off or not conn.autocommit:
            self._execute_plain(cursor, statement, prepared, params)
            return
        name, order, prepare, run = prepared
        values = [params.get(k) for k in order]
        on_libpq = isinstance(conn, libpq.Connection)
        for _ in range(2):
            if name not in done:
                try:
                    if on_libpq:
                        conn.script(prepare)
                    else:
                        cursor.execute(prepare)
                except Exception as exc:
                    if not self.is_db_error(exc) or self.sqlstate(exc) != "42P05":
                        raise  # 42P05, already there: our bookkeeping was behind
                done.add(name)
            try:
                if on_libpq:
                    cursor.load(conn.execute_prepared(name, values))
                else:
                    cursor.execute(run, values)
                return
            except Exception as exc:
                if not self.is_db_error(exc) or self.sqlstate(exc) != "26000":
                    raise
                done.discard(name)  # the session lost it (DISCARD ALL, a pooler's reset): prepare again
        # Gone again right after PREPARE: a pooler between us and the server (transaction pooling) hands
        # each statement another session. Plain statements from now on.
        self._prepare_off = True
        log.warning("prepared statements do not survive on %s; running without them", self.redacted_url())
        self._execute_plain(cursor, statement, prepared, params)

    def _execute_plain(
        self,
        cursor: Any,
        statement: Statement,
        prepared: tuple[str, tuple[str, ...], str, str] | None,
        params: dict[str, Any],
    ) -> None:
        """A statement not run as a prepared one: on pyodbc as it is; on a libpq connection (which runs
        only prepared names, see Database._run) by its $n text, behind a pooler that keeps none."""
        if not isinstance(cursor, libpq.Cursor):
            cursor.execute(statement.qmark_sql, [params.get(k) for k in statement.param_order])
            return
        if prepared is None:
            raise errors.StorageError("a statement that is not prepared was sent on a libpq connection")
        _name, order, prepare, _run = prepared
        cursor.load(
            cursor.connection.execute_params(prepare.split(" AS ", 1)[1], [params.get(k) for k in order])
        )

    def begin(self, conn: Any, write: bool) -> None:
        conn.autocommit = False

    def join_transaction(self, conn: Any) -> None:
        pyodbc = _pyodbc()
        if not isinstance(conn, pyodbc.Connection):
            raise errors.ValidationError(
                f"a PostgreSQL store enqueues on a pyodbc connection, not {type(conn).__name__}",
                field="connection",
            )
        if conn.autocommit:
            raise errors.ValidationError(
                "the pyodbc connection is in autocommit mode: open it with autocommit=False "
                "(or enqueue without connection=)",
                field="connection",
            )

    def commit(self, conn: Any) -> None:
        if not conn.autocommit:
            conn.commit()
            conn.autocommit = True

    def rollback(self, conn: Any) -> None:
        if not conn.autocommit:
            conn.rollback()
            conn.autocommit = True

    @staticmethod
    def sqlstate(exc: BaseException) -> str:
        args = getattr(exc, "args", ())
        return str(args[0]) if args else ""

    def is_transient(self, exc: BaseException) -> bool:
        if isinstance(exc, errors.TransientStorageError):
            return True
        state = self.sqlstate(exc)
        return state.startswith(_PG_TRANSIENT) or self.is_disconnect(exc)

    def is_disconnect(self, exc: BaseException) -> bool:
        state = self.sqlstate(exc)
        if state.startswith("08") or state in ("57P01", "57P02", "57P03"):
            return True
        text = str(exc).lower()
        return state in ("HY000", "HY010", "") and any(t in text for t in _PG_DISCONNECT_TEXT)

    def is_db_error(self, exc: BaseException) -> bool:
        return isinstance(exc, libpq.LibpqError | _pyodbc().Error)

    def is_unique_violation(self, exc: BaseException) -> bool:
        return self.sqlstate(exc) == "23505"

    def parse_time(self, value: Any) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        zone = value.tzinfo
        if zone is UTC:  # what a packed reply's "+00:00" parses to: a claim reads three per job
            return value
        return value.replace(tzinfo=UTC) if zone is None else value.astimezone(UTC)


_pyodbc_lock = threading.Lock()


def _pyodbc() -> Any:
    # Imported on first use so that SQLite users need no system ODBC library.
    with _pyodbc_lock:
        try:
            import pyodbc
        except ImportError as exc:  # pragma: no cover - depends on the machine
            raise errors.StorageError(
                "PostgreSQL needs pyodbc and the psqlODBC driver "
                "(Debian: apt-get install unixodbc odbc-postgresql)"
            ) from exc
        pyodbc.pooling = False
        return pyodbc


def _socket_fds() -> dict[int, str] | None:
    """This process's open file descriptors and what they point at (Linux /proc); None elsewhere."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return None
    out = {}
    for name in names:
        with contextlib.suppress(OSError):
            out[int(name)] = os.readlink(f"/proc/self/fd/{name}")
    return out


def _shutdown_socket(fd: int) -> None:
    """End a connection's socket under the driver's feet: its blocked receive returns at once and the
    driver reports the connection lost. The driver still owns (and later closes) the descriptor."""
    with socket.socket(fileno=os.dup(fd)) as sock:
        sock.shutdown(socket.SHUT_RDWR)


def _create_private(path: Path) -> None:
    """Create the database file readable by its owner only (0600) if it does not exist yet. SQLite gives
    the -wal and -shm files it creates later the main file's permissions, so they are private too."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):  # another connection created it first, with the same mode
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


def _odbc_escape(value: str) -> str:
    return "{" + value.replace("}", "}}") + "}" if any(c in value for c in ";{}") else value


def from_url(
    url: str,
    *,
    busy_timeout_ms: int = 30000,
    command_timeout: float = 30.0,
    lock_timeout: float = 5.0,
    connect_timeout: float = 10.0,
    wal_limit_bytes: int = 64 * 2**20,
) -> Dialect:
    """Build a dialect from a database URL (docs/configuration.md). The timeouts are Storage.*'s; on
    SQLite the command timeout is also the busy timeout."""
    if url.startswith("sqlite:"):
        path = url.split("?", 1)[0]
        path = path[10:] if path.startswith("sqlite:///") else path.removeprefix("sqlite:").removeprefix("//")
        if not path:
            raise errors.ConfigError(f"no file in SQLite URL {url!r}", field="Storage.Url")
        busy = int(command_timeout * 1000) if command_timeout > 0 else busy_timeout_ms
        return SqliteDialect(
            url=url, path=unquote(path), busy_timeout_ms=busy, wal_limit_bytes=wal_limit_bytes
        )
    if url.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(url)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        driver = query.pop("driver", "PostgreSQL Unicode")
        attrs = {
            "DRIVER": "{" + driver + "}",
            "SERVER": parts.hostname or "127.0.0.1",
            "PORT": str(parts.port or 5432),
            "DATABASE": unquote(parts.path.lstrip("/")) or "postgres",
            "UID": unquote(parts.username or "postgres"),
            "PWD": unquote(parts.password or ""),
            # Booleans as real booleans, not '1'/'0' strings (psqlODBC's default).
            "BoolsAsChar": "0",
            # Parameters are inlined by the driver and each statement is one simple query: a server-side
            # prepare cost a Parse round trip and a DEALLOCATE per execution (every statement runs on a
            # fresh cursor), about 0.15 ms of server and 0.25 ms of client CPU each. Every parameter is
            # CAST in the SQL, so no type inference is lost.
            "UseServerSidePrepare": "0",
            # libpq's own options: see KEEPALIVE_* above.
            "pqopt": (
                f"{{keepalives=1 keepalives_idle={KEEPALIVE_IDLE_S} "
                f"keepalives_interval={KEEPALIVE_INTERVAL_S} keepalives_count={KEEPALIVE_COUNT} "
                f"tcp_user_timeout={TCP_USER_TIMEOUT_MS}}}"
            ),
        }
        attrs.update(query)
        odbc = ";".join(
            f"{k}={_odbc_escape(v) if k not in ('DRIVER', 'pqopt') else v}" for k, v in attrs.items()
        )
        return PostgresDialect(
            url=url,
            odbc=odbc + ";",
            port=parts.port or 5432,
            command_timeout=command_timeout,
            lock_timeout=lock_timeout,
            connect_timeout=connect_timeout,
        )
    raise errors.ConfigError(
        f"unsupported database URL {url!r}: use sqlite:///path or postgresql://user:pw@host:port/db",
        field="Storage.Url",
    )
