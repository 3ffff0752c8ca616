"""The database every storage part runs on: pool, dialect, named queries, transactions, retries,
deadlines and value conversion."""

from __future__ import annotations

import contextlib
import enum
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

from chokaq_ops import errors
from chokaq_ops.storage import deadline, dialects, queries
from chokaq_ops.storage.pool import Pool

log = logging.getLogger("chokaq.storage")
T = TypeVar("T")

# Bounds of the pause between maintenance batches on SQLite (Database.let_writers_in), in seconds.
MIN_WRITER_GAP = 0.002
MAX_WRITER_GAP = 0.05


class Tx:
    """One open transaction; `run` executes a named query inside it."""

    def __init__(self, db: Database, conn: Any) -> None:
        self._db = db
        self._conn = conn
        self.rowcount = -1

    def run(self, name: str, /, **params: Any) -> list[dict[str, Any]]:
        rows, self.rowcount = self._db._execute(self._conn, self._db._query(name), params)
        return rows

    def script(self, text: str) -> None:
        """Run a parameterless SQL file (schema, migrations) statement by statement."""
        cursor = self._conn.cursor()
        try:
            for statement in queries.split_script(text):
                cursor.execute(statement)
        finally:
            cursor.close()


class Database:
    """One database URL: every storage part (storage/store.py) runs its named queries through this."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 16,
        cleanup_batch_size: int = 1000,
        bulk_streams: int = 2,
        max_transient_retries: int = 3,
        transient_retry_base_delay: float = 0.2,
        max_payload_bytes: int = 1_000_000,
        command_timeout: float = 30.0,
        lock_timeout: float = 5.0,
        connect_timeout: float = 10.0,
        wal_limit_bytes: int = 64 * 2**20,
        prepared: Sequence[str] = (),
        producer_prepared: Sequence[str] = (),
    ) -> None:
        """`prepared`: named queries the dialect may run as prepared statements (hot paths whose plans do
        not depend on their parameters; see PostgresDialect.prepare_on_use); names the dialect does not
        define are left out. `producer_prepared`: the producer's, prepared on connections of their own
        whose generic plans need no statistics."""
        self.dialect = dialects.from_url(
            url,
            command_timeout=command_timeout,
            lock_timeout=lock_timeout,
            connect_timeout=connect_timeout,
            wal_limit_bytes=wal_limit_bytes,
        )
        # Every call's bound (docs/configuration.md, Storage.CommandTimeout); None: unbounded.
        self.command_timeout: float | None = command_timeout if command_timeout > 0 else None
        self.queries = queries.load_store(self.dialect.name)
        # Single-statement queries the dialect runs on connections of their own kind (the worker's hot
        # ones, the producer's): named query -> that kind ("" for every other query).
        self._kinds: dict[str, str] = {}
        self.prepare(dialects.PRODUCER, producer_prepared)
        self.prepare(dialects.HOT, prepared)
        self.pool = Pool(self.dialect.connect, pool_size, self.dialect.close)
        self.cleanup_batch_size = cleanup_batch_size
        # A bulk DLQ operation's chunks in flight at once (storage/bulk_streams.py); one where the
        # database runs one writer at a time, and never more than the pool has connections (each chunk
        # holds one while it runs).
        self.bulk_streams = min(bulk_streams, pool_size) if self.dialect.parallel_writers else 1
        self.max_transient_retries = max_transient_retries
        self.transient_retry_base_delay = transient_retry_base_delay
        self.max_payload_bytes = max_payload_bytes
        self.retries_done = 0  # transient retries taken; tests and metrics read it
        self._retry_lock = threading.Lock()
        self._local = _Retries()  # retries taken by the calling thread (see thread_retries)

    def prepare(self, kind: str, names: Sequence[str]) -> None:
        """Run these single-statement named queries on connections of `kind` (dialects.HOT or PRODUCER),
        prepared where the dialect prepares (PostgresDialect.prepare_on_use); elsewhere they run as usual.
        The benches prepare their bare baselines this way, as the producer's statements are."""
        prepare = getattr(self.dialect, "prepare_on_use", None)
        if not prepare:
            return
        single = {
            n: q.statements[0]
            for n in names
            if (q := self.queries.get(n)) is not None and len(q.statements) == 1
        }
        self._kinds |= dict.fromkeys(prepare(single), kind)

    @property
    def url(self) -> str:
        return self.dialect.url

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ running queries

    def _query(self, name: str) -> queries.Query:
        try:
            return self.queries[name]
        except KeyError:
            raise errors.StorageError(f"no query named {name!r} for {self.dialect.name}") from None

    def run(self, name: str, /, *, write: bool = True, **params: Any) -> list[dict[str, Any]]:
        """Run one named query in its own transaction, retrying transient failures."""
        return self._run(name, write, None, params)

    def run_once(self, name: str, /, *, write: bool = True, **params: Any) -> list[dict[str, Any]]:
        """`run` without the retries: on a transient failure (TransientStorageError: it may have
        committed) the caller chooses what to run instead."""
        return self._run(name, write, 0, params)

    def _run(
        self, name: str, write: bool, retries: int | None, params: dict[str, Any]
    ) -> list[dict[str, Any]]:
        query = self._query(name)
        if len(query.statements) == 1:
            # A single statement is atomic on its own; autocommit saves the commit round trip.
            kind = self._kinds.get(name, "")
            return self._retrying(lambda conn: self._execute(conn, query, params)[0], kind, retries)
        return self.transaction(lambda tx: tx.run(name, **params), write=write, retries=retries)

    def transaction(self, fn: Callable[[Tx], T], *, write: bool = True, retries: int | None = None) -> T:
        """Run `fn(tx)` in one transaction; on a transient error roll back and run it again."""

        def attempt(conn: Any) -> T:
            self.dialect.begin(conn, write)
            try:
                result = fn(Tx(self, conn))
                self.dialect.commit(conn)
                return result
            except BaseException:
                with contextlib.suppress(Exception):
                    self.dialect.rollback(conn)
                raise

        return self._retrying(attempt, retries=retries)

    def _retrying(self, fn: Callable[[Any], T], kind: str = "", retries: int | None = None) -> T:
        limit = self.max_transient_retries if retries is None else retries
        attempt = 0
        while True:
            try:
                return self._bounded(fn, kind)
            except deadline.DeadlineExceeded as exc:
                if isinstance(exc, deadline.CallAborted):
                    self.pool.discard_idle()  # they went quiet with it: a paused server, a stalled link
                if attempt >= limit:
                    raise
                self._back_off(attempt, exc)
            except errors.ChokaqError as exc:
                if not isinstance(exc, errors.TransientStorageError) or attempt >= limit:
                    raise
                self._back_off(attempt, exc)
            except Exception as exc:
                if not self.dialect.is_db_error(exc):
                    raise
                if not self.dialect.is_transient(exc):
                    raise self._translate(exc) from exc
                if self.dialect.is_disconnect(exc):
                    self.pool.discard_idle()
                if attempt >= limit:
                    raise errors.TransientStorageError(f"{self.dialect.name}: {exc}") from exc
                self._back_off(attempt, exc)
            attempt += 1

    def _bounded(self, fn: Callable[[Any], T], kind: str) -> T:
        """One attempt on one pooled connection, aborted if it outlives its bound (storage/deadline.py).
        Runs for every statement: acquire/release and a plain call, not context managers."""
        pool = self.pool
        if getattr(_unbounded, "on", False):
            bound = None
            conn = pool.acquire(kind)
        else:
            bound = deadline.bound_for(self.command_timeout)
            conn = pool.acquire(kind, timeout=bound)
        try:
            abort = self.dialect.bound(conn, bound)
            if bound is None or abort is None:
                result = fn(conn)
            else:
                grace = self.dialect.abort_grace(bound == self.command_timeout)
                result = deadline.watched(fn, conn, bound + grace, abort, self.dialect.name)
        except BaseException:
            pool.release(conn, kind, failed=True)
            raise
        pool.release(conn, kind)
        return result

    @contextmanager
    def snapshot(self, start: str, **params: Any) -> Iterator[Tx]:
        """A read-only transaction on a connection of its own (outside the pool, so a pool of one cannot
        deadlock) whose every read sees the database as of `start`, the named query run first: a
        repeatable-read snapshot on PostgreSQL, a WAL read transaction on SQLite. Writers go on
        meanwhile (on SQLite the WAL cannot be checkpointed past it until it ends)."""
        conn = self.dialect.connect()
        try:
            self.dialect.begin(conn, False)
            tx = Tx(self, conn)
            tx.run(start, **params)
            yield tx
        except Exception as exc:
            if not self.dialect.is_db_error(exc):
                raise
            if self.dialect.is_transient(exc):
                raise errors.TransientStorageError(f"{self.dialect.name}: {exc}") from exc
            raise self._translate(exc) from exc
        finally:
            with contextlib.suppress(Exception):
                self.dialect.rollback(conn)
            self.dialect.close(conn)

    def run_batches(
        self,
        name: str,
        /,
        *,
        count: Callable[[list[dict[str, Any]]], int] = len,
        cursor: Callable[[list[dict[str, Any]]], dict[str, Any]] | None = None,
        each: Callable[[Tx, list[dict[str, Any]]], None] | None = None,
        **params: Any,
    ) -> Iterator[list[dict[str, Any]]]:
        """Run the maintenance query `name`, which acts on at most `:batch` rows, again and again, each
        batch in its own transaction of at most CleanupBatchSize rows, until one acts on fewer (as
        `count(rows)` tells). `cursor(rows)` gives the parameters that tell the next batch where this one
        ended. Yields each batch's rows once it is committed; a transient failure retries only the
        failing batch, so committed ones are never repeated. `each(tx, rows)` runs inside each batch's
        transaction after its query (an audit row that must commit with the moves)."""
        batch = self.cleanup_batch_size

        def one(tx: Tx) -> list[dict[str, Any]]:
            rows = tx.run(name, batch=batch, **params)
            if each is not None:
                each(tx, rows)
            return rows

        while True:
            started = time.monotonic()
            rows = self.run(name, batch=batch, **params) if each is None else self.transaction(one)
            yield rows
            if count(rows) < batch:
                return
            if cursor is not None:
                params |= cursor(rows)
            self.let_writers_in(time.monotonic() - started)

    def let_writers_in(self, held_s: float) -> None:
        """Pause between maintenance batches on SQLite, whose one writer lock a batch holds throughout.

        A waiting writer (a worker's heartbeat) sleeps in SQLite's busy handler and retries after 1, 2,
        5 ... up to 100 ms; a loop that takes the lock again at once would find it free only between two
        statements and starve that writer. Leaving the lock free for as long as the batch held it (within
        MIN/MAX_WRITER_GAP) gives a waiter an even chance at each retry and costs the sweep at most half
        its speed. PostgreSQL locks rows, not the database: no pause."""
        if self.dialect.name == "sqlite":
            time.sleep(min(max(held_s, MIN_WRITER_GAP), MAX_WRITER_GAP))

    def thread_retries(self) -> int:
        """Transient retries taken so far by the calling thread: a call during which this changed may have
        committed an attempt whose reply was lost."""
        return self._local.retries

    def _back_off(self, attempt: int, exc: BaseException) -> None:
        delay = self.transient_retry_base_delay * (2**attempt)
        delay += random.uniform(0, self.transient_retry_base_delay / 2)
        left = deadline.remaining()
        if left is not None and left <= delay:  # the caller's time limit ends before another attempt could
            if isinstance(exc, errors.TransientStorageError):
                raise exc
            raise deadline.DeadlineExceeded(f"{self.dialect.name}: {exc}") from exc
        with self._retry_lock:
            self.retries_done += 1
        self._local.retries += 1
        log.warning("transient database error (attempt %d, retrying in %.2fs): %s", attempt + 1, delay, exc)
        time.sleep(delay)

    def _translate(self, exc: Exception) -> errors.ChokaqError:
        if self.dialect.is_unique_violation(exc):
            # The driver's text names tables, constraints and values: it goes to the log, not to callers.
            log.info("unique violation: %s", exc)
            return errors.Conflict("the change conflicts with an existing row (a duplicate key)")
        return errors.StorageError(f"{self.dialect.name}: {exc}")

    def _execute(
        self, conn: Any, query: queries.Query, params: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], int]:
        bound = {k: self._param(v) for k, v in params.items()}
        cursor = conn.cursor()
        try:
            rows: list[dict[str, Any]] = []
            rowcount = -1
            for statement in query.statements:
                self.dialect.execute(cursor, statement, bound)
                rowcount = cursor.rowcount
                if cursor.description is not None:
                    rows = self.dialect.rows(cursor)
            return rows, rowcount
        finally:
            cursor.close()

    def _param(self, value: Any) -> Any:
        kind = type(value)
        if value is None or kind is str or kind is int or kind is float:  # most parameters: as they are
            return value
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, enum.Enum):
            return value.value
        if isinstance(value, datetime):
            return self.format_time(value)
        if isinstance(value, list | tuple | dict):
            return _encode_json(value)
        return value

    def format_time(self, value: datetime) -> str:
        if value.tzinfo is None:
            raise errors.ValidationError("times must carry a time zone (UTC)")
        value = value.astimezone(UTC)
        if self.dialect.name == "sqlite":
            return value.strftime("%Y-%m-%d %H:%M:%S.") + f"{value.microsecond // 1000:03d}"
        return value.isoformat()

    def now(self) -> datetime:
        """The database clock, which every liveness time is measured against."""
        return self.run("db_now", write=False)[0]["now_at"]

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A raw pooled connection (migrations and bulk loaders), unbounded on the client side."""
        with self.pool.connection() as conn:
            yield conn

    def run_outside_transaction(self, name: str, /) -> None:
        """Run a single-statement named query in autocommit with no bound at all, neither this client's
        nor the server's statement timeout (PostgreSQL's VACUUM and REINDEX CONCURRENTLY refuse a
        transaction block and may outlast Storage.CommandTimeout; engine/upkeep.py). The connection's own
        timeout is put back before it returns to the pool."""
        with Database.unbounded(), self.pool.connection() as conn:
            tx = Tx(self, conn)
            before = tx.run("session_statement_timeout")[0]["value"]
            tx.run("set_session_statement_timeout", value="0")
            try:
                tx.run(name)
            finally:
                tx.run("set_session_statement_timeout", value=str(before))

    @staticmethod
    @contextmanager
    def unbounded() -> Iterator[None]:
        """Calls this thread makes inside the block have no client-side bound (migrations: an index build
        over millions of rows may take minutes). The server's statement timeout still applies: turn it off
        in the transaction itself (`SET LOCAL statement_timeout = 0`) where needed."""
        before = getattr(_unbounded, "on", False)
        _unbounded.on = True
        try:
            yield
        finally:
            _unbounded.on = before


_unbounded = threading.local()


class _Retries(threading.local):
    # A class default: a thread's first look finds 0 without getattr's AttributeError (read twice a claim).
    retries = 0


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    raise TypeError(f"cannot serialise {type(value).__name__}")


# One encoder for every JSON parameter: json.dumps with options builds a new JSONEncoder per call, which
# took half of the 3 us a claim's lane list cost to encode.
_encode_json = json.JSONEncoder(separators=(",", ":"), default=_json_default).encode
