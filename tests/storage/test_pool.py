"""The connection pool: kinds of connections share the pool's size, open or in use."""

from __future__ import annotations

import threading
import time

import pytest

from chokaq_ops.models import NewJob
from chokaq_ops.storage.deadline import DeadlineExceeded
from chokaq_ops.storage.pool import Pool


class Conn:
    def __init__(self, kind: str, opened: list[Conn]) -> None:
        self.kind, self.closed, self._opened = kind, False, opened
        opened.append(self)

    def close(self) -> None:
        self.closed = True

    @staticmethod
    def open_in(opened: list[Conn]) -> int:
        return sum(not c.closed for c in opened)


def test_kinds_share_the_pool_size_of_open_connections():
    """A process that enqueues (producer connections), works (hot ones) and reads (plain ones) holds at
    most PoolSize connections, not PoolSize of each kind: an idle one of another kind gives way."""
    opened: list[Conn] = []
    pool = Pool(lambda kind="": Conn(kind, opened), 2)
    with pool.connection() as a, pool.connection("hot") as b:
        assert (a.kind, b.kind) == ("", "hot")
    with pool.connection("producer") as c:
        assert c.kind == "producer" and Conn.open_in(opened) == 2
    with pool.connection("producer") as again:
        assert again is c  # its own kind's idle connection is reused
    for kind in ("", "hot", "producer", "hot", ""):
        with pool.connection(kind) as conn:
            assert conn.kind == kind and not conn.closed
            assert Conn.open_in(opened) <= 2


def test_a_failed_connect_or_a_failed_call_frees_its_place():
    opened: list[Conn] = []
    failing = {"on": True}

    def factory(kind: str = "") -> Conn:
        if failing["on"]:
            raise OSError("cannot connect")
        return Conn(kind, opened)

    pool = Pool(factory, 1)
    for _ in range(3):
        with pytest.raises(OSError), pool.connection():
            pass
    failing["on"] = False
    with pytest.raises(RuntimeError), pool.connection() as conn:
        raise RuntimeError("the call failed")
    assert conn.closed  # never reused
    with pool.connection("hot") as hot:
        assert not hot.closed and Conn.open_in(opened) == 1


def test_a_caller_waits_for_a_place_and_gets_it_when_one_is_released():
    """With every place in use a caller waits (up to its timeout) and takes the place a release frees;
    past its timeout it gets DeadlineExceeded, and the pool still hands out its places afterwards."""
    opened: list[Conn] = []
    pool = Pool(lambda kind="": Conn(kind, opened), 1)
    held = pool.acquire()
    with pytest.raises(DeadlineExceeded):
        pool.acquire(timeout=0.05)
    got: list[Conn] = []
    waiter = threading.Thread(target=lambda: got.append(pool.acquire(timeout=5.0)))
    waiter.start()
    time.sleep(0.1)
    assert not got  # still waiting: the only place is held
    pool.release(held)
    waiter.join(5.0)
    assert got == [held]  # the released connection, reused
    pool.release(got[0])
    with pytest.raises(RuntimeError):
        pool.release(got[0])  # more releases than acquires is a bug, never a bigger pool
    with pool.connection() as again:
        assert again is held and Conn.open_in(opened) == 1


def test_a_release_too_many_changes_nothing():
    """The refused release neither frees a place nor leaves the connection idle twice (two callers
    would then share one connection)."""
    opened: list[Conn] = []
    pool = Pool(lambda kind="": Conn(kind, opened), 2)
    conn = pool.acquire()
    pool.release(conn)
    with pytest.raises(RuntimeError):
        pool.release(conn)
    first, second = pool.acquire(), pool.acquire()
    assert first is not second
    with pytest.raises(DeadlineExceeded):
        pool.acquire(timeout=0.01)


def test_a_store_forgets_what_it_kept_about_each_connection_it_closed(store):
    """The dialect keeps a little per connection by id (PostgreSQL: its socket, the statements prepared on
    it; SQLite: its busy timeout). Connections renewed again and again (a pool discards its idle ones
    after every disconnect) must not leave an entry each behind: a worker that runs for months would
    gather them without end."""
    dialect = store.db.dialect
    kept = (dialect._sockets, dialect._prepared_on) if dialect.name == "postgresql" else (dialect._busy,)

    def entries() -> int:
        return max(len(m) for m in kept)

    for n in range(12):
        store.enqueue([NewJob(type="t", payload={"n": n})])  # the producer's kind of connection
        store.fetch("w-churn", 1, start=1)  # the worker's
        store.stats()  # the ordinary kind
        with store.db.snapshot("db_now"):  # a connection of its own, outside the pool
            pass
        store.db.pool.discard_idle()
    assert entries() == 0
    store.stats()
    assert entries() == 1  # the one connection open now
