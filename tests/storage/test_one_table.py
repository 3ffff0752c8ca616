"""One table per id under every race: explicit ids re-sent by several producers while workers drain
them never end in two tables; an id already in a move's target table never wedges the move (the newer
copy wins, the older one is kept in the audit log and announced); `get_job` reads the three tables in one
snapshot."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from storage_factories import (
    OPS,
    assert_one_table,
    audit,
    counters,
    dead,
    enqueue,
    events,
    is_pg,
    locations,
    processing,
    scalar,
    sql,
)

from chokaq_ops.models import FailureReason, NewJob
from chokaq_ops.storage import Dead, Store

# ------------------------------------------------------------------------------------ producers vs drain


def _drain(store: Store, name: str, stop: threading.Event, failures: list[BaseException]) -> None:
    """A worker loop of real statements: claim-and-start 50, finish them (1 in 10 to the DLQ)."""
    try:
        _drain_until(store, name, stop)
    except BaseException as exc:  # noqa: BLE001 - the test reports it
        failures.append(exc)


def _drain_until(store: Store, name: str, stop: threading.Event) -> None:
    while True:
        rows = store.fetch(name, 50, start=50)
        if not rows:
            if stop.is_set():
                return
            time.sleep(0.002)
            continue
        ids = [r["id"] for r in rows]
        dead_ids = [i for i in ids if i.endswith("7")]
        ok = [(i, 1.0) for i in ids if i not in dead_ids]
        assert len(store.archive_succeeded(name, ok)) == len(ok)
        assert len(store.move_to_dlq(name, [Dead(i, FailureReason.Fatal, "no") for i in dead_ids])) == len(
            dead_ids
        )


def test_producers_resending_explicit_ids_during_a_drain_never_put_an_id_in_two_tables(db_url):
    """Four producers send the same 2,000 explicit ids over and over (each in its own shuffled order) while
    two workers claim and finish them. Before enqueue re-checked its inserts after the fact, a move that
    committed during an enqueue statement was invisible to its NOT EXISTS checks on PostgreSQL, and dozens
    of ids ended in hot and in the archive (or DLQ) at once."""
    n_ids, rounds, batch = 2000, 6, 100
    ids = [f"re{i:05d}" for i in range(n_ids)]
    store = Store(db_url, pool_size=12, transient_retry_base_delay=0.02)
    stop = threading.Event()
    results: dict[str, int] = {"new": 0, "conflict": 0, "duplicate": 0}
    lock = threading.Lock()
    errors: list[BaseException] = []

    def produce(seed: int) -> None:
        rnd = random.Random(seed)
        try:
            for _ in range(rounds):
                order = ids[:]
                rnd.shuffle(order)
                for start in range(0, n_ids, batch):
                    res = store.enqueue([NewJob(type="t", id=i) for i in order[start : start + batch]])
                    with lock:
                        for r in res:
                            results[r.status] += 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    workers = [threading.Thread(target=_drain, args=(store, f"w{k}", stop, errors)) for k in range(2)]
    producers = [threading.Thread(target=produce, args=(k,)) for k in range(4)]
    try:
        for t in workers + producers:
            t.start()
        for t in producers:
            t.join(60)
        stop.set()
        for t in workers:
            t.join(60)
        assert not errors, errors[:3]
        where = locations(store)
        doubled = {i: t for i, t in where.items() if len(t) > 1}
        assert not doubled, f"{len(doubled)} ids in two tables, e.g. {list(doubled.items())[:5]}"
        assert_one_table(store, ids)
        assert results["new"] == n_ids  # each id created exactly once; every re-send was a conflict
        assert results["conflict"] == n_ids * (4 * rounds - 1)
        assert scalar(store, "SELECT count(*) FROM jobs_hot") == 0
        assert counters(store)["enqueued"] == n_ids
    finally:
        stop.set()
        store.close()
