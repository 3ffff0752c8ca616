"""The connection pool: kinds of connections share the pool's size, open or in use."""

from __future__ import annotations

import pytest

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
