"""GET /dlq paging on the trigger-kept dlq_counts: exact totals and deep pages that seek to their hour.

Every fast page must equal the same page computed the slow way (count(*) and OFFSET over the index), for
each filter the counts cover and both directions, while dead jobs spread over many hours; and the counts
must stay exact through every way a job enters or leaves the DLQ.
"""

from __future__ import annotations

import itertools
import time

import pytest

from chokaq_ops.models import Actor, DlqFilter, FailureReason
from chokaq_ops.storage import read_ops
from tests.api.conftest import WORKER, enqueue, pagination, to_dlq

SPREAD_SQL = {
    # Move each dead job back by 0-29 hours (deterministic per id), through the UPDATE trigger.
    "postgresql": "UPDATE jobs_dlq SET failed_at = failed_at - (abs(hashtext(id)) % 30) * interval '1 hour'",
    "sqlite": "UPDATE jobs_dlq SET failed_at = strftime('%Y-%m-%d %H:%M:%f', failed_at, "
    "'-' || ((unicode(substr(id, -1)) + unicode(substr(id, -2, 1))) % 30) || ' hours')",
}
SLOW = {"created_to": "2999-01-01T00:00:00Z"}  # a filter the counts do not cover: count(*) and OFFSET


def spread(store, dialect):
    with store.connection() as conn:
        cur = conn.cursor()
        cur.execute(SPREAD_SQL[dialect])
        cur.close()
        conn.commit()


def assert_counts_exact(store):
    for queue, reason in itertools.product(
        (None, "mail", "sms"), (None, FailureReason.Zombie, FailureReason.Fatal)
    ):
        flt = DlqFilter(queue=queue, reason=reason)
        slow = int(store.run("count_dlq", write=False, **store.dlq_filter_params(flt))[0]["n"])
        assert store.count_dlq(flt) == slow, (queue, reason)


@pytest.fixture
def deep_from_start(monkeypatch):
    monkeypatch.setattr(read_ops, "DEEP_PAGE_OFFSET", 0)  # seek on every page but the first


def test_fast_pages_equal_slow_pages(client, store, dialect, deep_from_start):
    to_dlq(store, 60, queue="mail", reason=FailureReason.Zombie)
    to_dlq(store, 40, queue="mail", reason=FailureReason.Fatal)
    to_dlq(store, 50, queue="sms", reason=FailureReason.Zombie)
    spread(store, dialect)
    assert_counts_exact(store)
    for flt, order in itertools.product(
        ({}, {"queue": "mail"}, {"reason": "Zombie"}, {"queue": "mail", "reason": "Zombie"}), ("desc", "asc")
    ):
        base = {**flt, "order": order, "page_size": 7}
        first = client.get("/dlq", role="reader", query_string=base)
        slow_first = client.get("/dlq", role="reader", query_string={**base, **SLOW})
        assert pagination(first) == pagination(slow_first), (flt, order)
        for page in range(1, pagination(first)["total_pages"] + 2):
            fast = [
                j["id"] for j in client.get("/dlq", role="reader", query_string={**base, "page": page}).json
            ]
            slow = [
                j["id"]
                for j in client.get("/dlq", role="reader", query_string={**base, **SLOW, "page": page}).json
            ]
            assert fast == slow, (flt, order, page)


def test_counts_stay_exact_through_every_dlq_move(client, store, dialect):
    dead = to_dlq(store, 6, queue="mail", reason=FailureReason.Fatal)
    to_dlq(store, 4, queue="sms", reason=FailureReason.Zombie)
    spread(store, dialect)
    client.patch(f"/dlq/{dead[0]}", role="operator", json={"payload": {"fixed": True}})  # UPDATE, same count
    assert_counts_exact(store)
    client.post(f"/dlq/{dead[0]}/resurrect", role="operator")
    client.post("/dlq/resurrect", role="operator", json={"ids": dead[1:3]})
    client.post(
        "/dlq/purge", role="admin", json={"filter": {"queue": "sms", "reason": "Zombie"}, "max_jobs": 3}
    )
    assert_counts_exact(store)
    waiting = enqueue(store, 2, queue="mail")
    client.post("/jobs/cancel", role="operator", json={"ids": waiting})  # into the DLQ as Cancelled
    zombie = enqueue(store, 1, queue="sms")[0]
    store.fetch(WORKER, 1, queues=["sms"])
    store.mark_processing(WORKER, [zombie])
    time.sleep(0.02)
    store.archive_zombies(0.001)
    assert store.get_job(zombie)["location"] == "dlq"
    assert_counts_exact(store)
    assert store.count_dlq(DlqFilter(reason=FailureReason.Cancelled)) == 2
    store.purge_dlq(actor=Actor("test"), flt=DlqFilter(queue="mail"))
    store.purge_dlq(actor=Actor("test"), flt=DlqFilter(queue="sms"))
    assert store.count_dlq() == 0
    assert store.run("dlq_count_fast", write=False, queue=None, reason=None)[0]["n"] == 0
