"""Claim-and-start (`Store.fetch(..., start=k)`) and the unseen-claim recovery, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from storage_factories import OPS

from chokaq_ops.models import NewJob
from chokaq_ops.storage.dialects import from_url


def _enqueue(store, priorities: list[int], queue: str = "q") -> list[str]:
    jobs = [NewJob(type="t", id=f"p{i:02d}", queue=queue, priority=p) for i, p in enumerate(priorities)]
    return [r.id for r in store.enqueue(jobs)]


def test_the_first_k_claimed_in_claim_order_start_and_the_rest_are_fetched(store):
    _enqueue(store, [1, 9, 5, 5, 7, 3])
    rows = store.fetch("w", 5, start=2)
    assert [(r["id"], r["status"]) for r in rows] == [
        ("p01", "processing"),  # priority 9
        ("p04", "processing"),  # priority 7
        ("p02", "fetched"),  # 5, due first
        ("p03", "fetched"),
        ("p05", "fetched"),  # 3
    ]
    now = store.now()
    for r in rows:
        job = store.get_job(r["id"])
        assert job["status"] == r["status"] and job["worker_id"] == "w"
        started = r["status"] == "processing"
        assert job["attempt_count"] == r["attempt_count"] == (1 if started else 0)
        if started:
            assert job["started_at"] == job["heartbeat_at"] == r["started_at"]  # the database clock
            assert abs((now - r["started_at"]).total_seconds()) < 5
        else:
            assert job["started_at"] is None and r["started_at"] is None
    # Started rows are the worker's to finish; fetched ones still need their own start.
    started = [r["id"] for r in rows if r["status"] == "processing"]
    assert set(store.heartbeat("w", started)) == set(started)
    assert set(store.mark_processing("w", ["p02", "p03", "p05"])) == {"p02", "p03", "p05"}
    assert store.mark_processing("w", started) == {}  # a started row is not started twice
    assert store.get_job("p00")["status"] == "pending"


def test_start_defaults_to_none_and_is_clipped_to_the_claim(store):
    _enqueue(store, [5, 5, 5])
    assert {r["status"] for r in store.fetch("w", 1)} == {"fetched"}
    assert [r["status"] for r in store.fetch("w", 5, start=9)] == ["processing", "processing"]
    assert store.fetch("w", 5, start=3) == []


def test_claim_and_start_skips_paused_queues_and_keeps_caps(store):
    _enqueue(store, [9, 9], queue="held")
    ids = _enqueue_named(store, "capped", 4)
    store.set_queue("held", actor=OPS, paused=True)
    store.set_queue("capped", actor=OPS, max_workers=2)
    rows = store.fetch("w", 10, start=10, exact_caps=True)
    assert sorted(r["id"] for r in rows) == ids[:2] and {r["status"] for r in rows} == {"processing"}
    assert store.fetch("w2", 10, start=10) == []  # the cap counts processing rows too
    assert {store.get_job(i)["status"] for i in ("p00", "p01")} == {"pending"}


def _enqueue_named(store, queue: str, n: int) -> list[str]:
    jobs = [NewJob(type="t", id=f"{queue}{i}", queue=queue) for i in range(n)]
    return sorted(r.id for r in store.enqueue(jobs))


def test_release_unstarted_hands_back_a_claims_started_jobs_untouched(store):
    _enqueue(store, [5, 5])
    rows = store.fetch("w", 2, start=2)
    ids = [r["id"] for r in rows]
    assert store.release_unstarted("other", ids) == []  # fenced by the worker id
    assert sorted(store.release_unstarted("w", ids)) == sorted(ids)
    for i in ids:
        job = store.get_job(i)
        assert (job["status"], job["worker_id"], job["attempt_count"]) == ("pending", None, 0)


# Text a claim must hand back exactly as stored, through every claim statement and whatever encoding its
# reply takes on the way (a reply as one JSON text was tried, docs/benchmarks.md 2026-12-02): quotes,
# backslashes, control characters, non-ASCII and text that is not JSON at all.
ODD_TEXTS = [
    '{"a": "\\u00e9 \\"q\\" \\\\ \\n"}',
    '  { "spaced" :  1.50 , "dup": 1, "dup": 2 }  ',
    "not json \x01\x1f \t\r\n \\ \" ' é ☃ 𝄞 \u2028",
    "",
    "null",
]


def test_every_claim_hands_back_text_exactly_as_stored(store):
    jobs = [
        NewJob(
            type="t",
            id=f"x{i}",
            queue="odd",
            payload=text,
            tags=f"t{i},é \\",
            idempotency_key=f'k"{i}',
            created_by="ü \x02",
            scheduled_at=None,
        )
        for i, text in enumerate(ODD_TEXTS)
    ]
    store.enqueue(jobs)
    by_id = {j.id: j for j in jobs}
    head = store.fetch("w", 2, start=1)  # the head claim (no queue filter)
    named = store.fetch("w", 2, ["odd"], start=1)  # the full claim
    lost = store.fetch("w", 10, start=10)
    recovered = store.recover_claims("w", [r.id for r in head + named])
    assert sorted(r.id for r in recovered) == sorted(r.id for r in lost) and len(lost) == 1
    for r in head + named + recovered:
        job = by_id[r.id]
        assert (r.payload, r.tags, r.idempotency_key, r.created_by) == (
            job.payload,
            job.tags,
            job.idempotency_key,
            job.created_by,
        )
        assert r.created_at is not None and r.created_at.utcoffset() is not None


def test_recover_claims_returns_the_rows_a_worker_holds_unknowingly(store):
    """What a lost claim reply leaves: rows under the worker's id that it never saw. Started ones go
    back to fetched with their attempt taken back; the ones the worker knows are left alone."""
    _enqueue(store, [5, 5, 5, 5, 5, 5, 5])
    seen = store.fetch("w", 2, start=1)  # the worker knows these
    unseen = store.fetch("w", 3, start=2)  # ... and lost the reply of this one
    other = store.fetch("x", 5, start=1)  # another worker's
    assert len(other) == 2 and not store.claims_uncertain("w")
    got = store.recover_claims("w", [r["id"] for r in seen])
    assert [r["id"] for r in got] == [r["id"] for r in unseen]
    assert {r["status"] for r in got} == {"fetched"} and {r["attempt_count"] for r in got} == {0}
    for r in got:
        job = store.get_job(r["id"])
        assert (job["status"], job["worker_id"], job["attempt_count"]) == ("fetched", "w", 0)
    assert [store.get_job(r["id"])["status"] for r in seen] == ["processing", "fetched"]
    assert store.recover_claims("w", [r["id"] for r in seen + got]) == []
    assert [store.get_job(r["id"])["status"] for r in other] == ["processing", "fetched"]


def _use_every_hot_statement(store) -> None:
    from chokaq_ops.storage.worker_ops import Dead, Retry

    # A capped queue: a worker's first claim (fetch_open) names it, and the next keep caps (`fetch`).
    store.set_queue("capped", actor=OPS, max_workers=1)
    store.fetch("w", 8, start=2)
    store.fetch("w", 8, start=2)
    store.worker.lanes.forget("w")
    store.mark_processing("w", ["x"])
    store.heartbeat("w", ["x"])
    store.release("w", ["x"])
    store.archive_succeeded("w", [("x", 1.0)])
    store.move_to_dlq("w", [Dead("x", 0, "e")])
    store.reschedule("w", [Retry("x", 0, "e")])


def _claim_params() -> dict:
    """The claim's parameters for a worker that knows one lane and has claimed before."""
    import json

    lanes = [{"q": "default", "p": 10, "d": "2000-01-01 00:00:00+00", "i": "", "x": False}]
    return {
        "limit": 8, "start": 2, "worker_id": "w", "queues": None, "lanes": json.dumps(lanes),
        "window": 16, "xmax": "1000", "xip": '["990", "995"]', "stuck": '[{"id": "big0-1", "t": "(0,2)"}]',
    }  # fmt: skip


def _prepared_on_hot_connection(store) -> set[str]:
    from chokaq_ops.storage.dialects import HOT

    with store.pool.connection(HOT) as conn:
        cur = conn.cursor()
        cur.execute("SELECT name FROM pg_prepared_statements")
        return {r[0] for r in cur.fetchall()}


def _unbounded_scans(plan: str) -> list[str]:
    """Scans of jobs_hot in an EXPLAIN with no condition on their index or ctids: walks of whole indexes."""
    lines = plan.splitlines()
    out = []
    for i, line in enumerate(lines):
        if " on jobs_hot" not in line or "Scan" not in line:
            continue
        depth = len(line) - len(line.lstrip())
        details = []
        for below in lines[i + 1 :]:
            if len(below) - len(below.lstrip()) <= depth or below.lstrip().startswith("->"):
                break
            details.append(below)
        if not any(d.strip().startswith(("Index Cond:", "TID Cond:")) for d in details):
            out.append(line)
    return out


def _fill(store, n: int, prefix: str = "big") -> None:
    for start in range(0, n, 2000):
        store.enqueue([NewJob(type="t", id=f"{prefix}{start}-{i}") for i in range(min(2000, n - start))])


def _analyze(store) -> None:
    with store.connection() as conn:
        conn.cursor().execute("ANALYZE jobs_hot")


@pytest.mark.parametrize("made_from", ["an_empty_table", "a_big_table", "a_vacuum_behind_a_held_snapshot"])
def test_hot_statements_generic_plans_reach_rows_only_through_their_indexes(pg_url, made_from):
    """A hot connection makes one generic plan per statement on first use and keeps it, whatever the
    statistics said then. Made from an empty jobs_hot (a fresh install, a quiet queue) as from a big
    one, every plan reaches rows only through the primary key, ctids, or the one index that answers its
    read in order: plans that stay right when the table fills or empties. (A claim whose plan was made
    while the table looked empty once walked whole indexes: 10-500 ms per claim.) A VACUUM behind a held
    snapshot (the upkeep's or autovacuum's) counts few live rows in many pages, so a walk of a whole
    index looks like one page, and every statement is planned again after it: the claim then joined its
    picked ids to a walk of the whole primary key and read its candidates through a walk of another
    index, and stalled the queue for minutes (docs/endurance.md, "Plans")."""
    import json
    import re

    from chokaq_ops.storage import Store
    from chokaq_ops.storage.dialects import HOT

    with Store(pg_url, pool_size=1) as store:
        with store.connection() as conn:  # the statistics stay those of the moment below
            conn.cursor().execute("ALTER TABLE jobs_hot SET (autovacuum_enabled = false)")
        if made_from == "a_big_table":
            _fill(store, 12_000)
        if made_from == "a_vacuum_behind_a_held_snapshot":
            holder = from_url(pg_url).connect()
            holder.autocommit = False
            holder.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            holder.execute("SELECT count(*) FROM jobs_archive").fetchall()
            _fill(store, 6000, prefix="gone")
            with store.connection() as conn:
                conn.cursor().execute("DELETE FROM jobs_hot")
                conn.cursor().execute("VACUUM jobs_hot")  # counts no live row, keeps every page
            _use_every_hot_statement(store)  # planned now; kept as the table grows
            holder.rollback()
            holder.close()
        else:
            _analyze(store)
        if made_from != "a_big_table":
            _fill(store, 12_000)
        _use_every_hot_statement(store)
        prepared = _prepared_on_hot_connection(store)
        assert {"chokaq_fetch", "chokaq_fetch_open", "chokaq_mark_processing", "chokaq_heartbeat"} <= prepared
        ids = json.dumps([f"big0-{i}" for i in range(8)])
        done = json.dumps([{"id": f"big0-{i}", "duration_ms": 1.0} for i in range(8)])
        claim = _claim_params()
        statements = []
        for name in ("fetch", "fetch_open"):
            order = store.db.dialect._prepared[id(store.queries[name].statements[0])][1]
            statements.append(
                (
                    f"EXPLAIN EXECUTE chokaq_{name}({', '.join('?' * len(order))})",
                    tuple(claim[k] for k in order),
                )
            )
        statements += [
            ("EXPLAIN EXECUTE chokaq_mark_processing(?, ?)", (ids, "w")),
            ("EXPLAIN EXECUTE chokaq_heartbeat(?, ?)", (ids, "w")),
            ("EXPLAIN EXECUTE chokaq_release(?, ?, ?)", (ids, "w", False)),
            ("EXPLAIN EXECUTE chokaq_archive_succeeded(?, ?)", (done, "w")),
        ]
        with store.pool.connection(HOT) as conn:
            cur = conn.cursor()
            for text, params in statements:
                cur.execute(text, params)
                plan = "\n".join(r[0] for r in cur.fetchall())
                scans = [ln for ln in plan.splitlines() if re.search(r"Scan.* on jobs_hot\b", ln)]
                assert scans, f"{text}:\n{plan}"
                through = (
                    r"Index (Only )?Scan using (pk_jobs_hot|ix_jobs_hot_lane|ix_jobs_hot_ready_xid|"
                    r"ix_jobs_hot_inflight) |Tid Scan on jobs_hot "
                )
                for line in scans:
                    assert re.search(through, line), f"{text} reaches jobs_hot another way:\n{plan}"
                assert not _unbounded_scans(plan), f"{text} walks a whole index:\n{plan}"
                for bad in ("Hash Join", "Merge Join"):
                    assert bad not in plan, f"{text}:\n{plan}"
