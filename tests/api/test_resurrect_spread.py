"""Resurrect without a stampede: a bulk resurrect's due times are spread over a window (`spread`) or as
long as a `rate` needs, so still-failing jobs do not all come back in the same second."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from chokaq_ops.models import Actor
from tests.storage.storage_factories import dead_bulk
from tests.support.dbprobe import sql


def due_seconds(store, start: datetime) -> Counter[int]:
    """Resurrected jobs per whole second of due time after `start`."""
    rows = [store.get_job(i) for (i,) in sql(store, "SELECT id FROM jobs_hot")]
    return Counter(int((r["due_at"] - start).total_seconds()) for r in rows)


def test_bulk_resurrect_of_2000_with_a_60s_spread_has_no_crowded_second(client, store):
    dead_bulk(store, 2000, prefix="s", queue="flaky")
    start = store.now()
    r = client.post("/dlq/resurrect", role="operator", json={"filter": {"queue": "flaky"}, "spread": 60})
    assert r.status_code == 200 and r.json["resurrected"] == 2000
    per_second = due_seconds(store, start)
    assert sum(per_second.values()) == 2000
    assert max(per_second.values()) <= 2000 / 20, per_second.most_common(3)
    assert min(per_second) >= 0 and max(per_second) <= 60
    assert len(per_second) >= 55  # the window is used, not a few seconds of it


def test_rate_widens_the_window_and_no_spread_means_due_now(client, store):
    ids = dead_bulk(store, 300, prefix="r", queue="paced")
    start = store.now()
    r = client.post("/dlq/resurrect", role="operator", json={"ids": ids[:200], "rate": 10})
    assert r.status_code == 200 and r.json["resurrected"] == 200
    per_second = due_seconds(store, start)
    assert max(per_second) >= 15 and max(per_second) <= 20  # 200 jobs at 10/s: a 20 s window
    store.resurrect_many(actor=Actor("ops"), ids=ids[200:])
    assert all(
        (store.get_job(i)["due_at"] - start).total_seconds() < 5 for i in ids[200:]
    )  # default: due at once


def test_bad_spread_or_rate_is_refused_and_moves_nothing(client, store):
    ids = dead_bulk(store, 3, prefix="b", queue="bad")
    for extra in ({"spread": -1}, {"spread": "soon"}, {"rate": 0}, {"rate": -2}, {"spread": 10**9}):
        r = client.post("/dlq/resurrect", role="operator", json={"ids": ids, **extra})
        assert r.status_code == 422 and set(extra) <= set(r.json["errors"]["json"]), (extra, r.json)
    assert store.stats()["dlq"] == 3


def test_a_resurrect_plan_spreads_each_chunk(client, store):
    ids = dead_bulk(store, 500, prefix="p", queue="planned")
    plan = client.post("/plans", role="operator", json={"action": "resurrect", "ids": ids}).json
    start = store.now()
    r = client.post(f"/plans/{plan['id']}/execute", role="operator", json={"spread": 30})
    assert r.status_code == 200 and r.json["state"] == "done"
    per_second = due_seconds(store, start)
    assert max(per_second.values()) <= 500 / 10 and max(per_second) >= 25
