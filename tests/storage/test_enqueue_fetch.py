"""Enqueue and fetch (docs/storage-contract.md-§4.2, reference §11.1-4, 20-21) on SQLite and PostgreSQL."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta

import pytest
from storage_factories import OPS, age, archived, counters, dead, enqueue, processing, scalar, sql

from chokaq_ops import errors
from chokaq_ops.models import NewJob

# ------------------------------------------------------------------------------------ enqueue


def test_idempotency_key_dedupes_against_hot_only_and_is_reusable_after_archive_and_dlq(store):
    [first] = store.enqueue([NewJob(type="t", idempotency_key="k-arch", queue="qa")])
    assert first.status == "new" and first.created
    [again] = store.enqueue([NewJob(type="t", idempotency_key="k-arch", queue="qa", payload='{"x":2}')])
    assert (again.status, again.created, again.id) == ("duplicate", False, first.id)
    assert scalar(store, "SELECT count(*) FROM jobs_hot") == 1

    # Still a duplicate while fetched and while processing: the key belongs to the active job.
    store.fetch("w", 1, ["qa"])
    assert store.enqueue([NewJob(type="t", idempotency_key="k-arch")])[0].id == first.id
    store.mark_processing("w", [first.id])
    assert store.enqueue([NewJob(type="t", idempotency_key="k-arch")])[0].status == "duplicate"

    store.archive_succeeded("w", [(first.id, 1.0)])
    [after_archive] = store.enqueue([NewJob(type="t", idempotency_key="k-arch", queue="qa")])
    assert after_archive.status == "new" and after_archive.id != first.id

    [dead_id] = dead(store, 1, prefix="d", queue="qd", idempotency_key="k-dead")
    [after_dlq] = store.enqueue([NewJob(type="t", idempotency_key="k-dead", queue="qd")])
    assert after_dlq.status == "new" and after_dlq.id != dead_id
    assert counters(store)["enqueued"] == 4


def test_duplicate_key_within_one_batch_inserts_once(store):
    res = store.enqueue(
        [
            NewJob(type="t", id="a1", idempotency_key="same"),
            NewJob(type="t", id="a2", idempotency_key="same"),
            NewJob(type="t", id="a3", idempotency_key="other"),
            NewJob(type="t", id="a4"),
        ]
    )
    assert [(r.id, r.status) for r in res] == [
        ("a1", "new"),
        ("a1", "duplicate"),
        ("a3", "new"),
        ("a4", "new"),
    ]
    assert [r[0] for r in sql(store, "SELECT id FROM jobs_hot ORDER BY id")] == ["a1", "a3", "a4"]
    assert counters(store)["enqueued"] == 3


def test_ids_used_by_archive_or_dlq_or_hot_report_conflict_and_insert_nothing(store):
    [arch] = archived(store, 1, prefix="arch")
    [dlq] = dead(store, 1, prefix="dlq")
    [hot] = enqueue(store, 1, prefix="hot")
    before = counters(store)
    res = store.enqueue(
        [
            NewJob(type="x", id=arch),
            NewJob(type="x", id=dlq),
            NewJob(type="x", id=hot),
            NewJob(type="x", id="fresh"),
        ]
    )
    assert [(r.id, r.status, r.created) for r in res] == [
        (arch, "conflict", False),
        (dlq, "conflict", False),
        (hot, "conflict", False),
        ("fresh", "new", True),
    ]
    assert scalar(store, "SELECT count(*) FROM jobs_hot WHERE type = 'x'") == 1
    assert counters(store)["enqueued"] == before["enqueued"] + 1
    assert store.get_job(arch)["location"] == "archive" and store.get_job(dlq)["location"] == "dlq"


def test_enqueue_creates_queue_and_stats_rows_once(store):
    for _ in range(3):
        store.enqueue([NewJob(type="t", queue="brand-new"), NewJob(type="t", queue="brand-new")])
    assert scalar(store, "SELECT count(*) FROM queues WHERE name = 'brand-new'") == 1
    assert counters(store, "brand-new")["enqueued"] == 6
    q = store.queue_stats("brand-new")[0]
    assert (q["paused"], q["active"], q["max_workers"], q["pending"]) == (False, True, None, 6)


def test_single_enqueues_create_an_unseen_queue_row_and_count_each_job(store):
    """The lean one-job statement (prepared on PostgreSQL) keeps the queue row and the counter."""
    ids = [store.enqueue([NewJob(type="t", queue="lean-new")])[0].id for _ in range(3)]
    assert scalar(store, "SELECT count(*) FROM queues WHERE name = 'lean-new'") == 1
    assert counters(store, "lean-new")["enqueued"] == 3
    store.enqueue([NewJob(type="t", queue="lean-other")])
    assert scalar(store, "SELECT count(*) FROM queues WHERE name = 'lean-other'") == 1
    assert counters(store, "lean-other")["enqueued"] == 1
    assert [store.get_job(i)["queue"] for i in ids] == ["lean-new"] * 3


def test_single_enqueues_run_prepared_with_one_generic_plan_on_producer_connections(pg_url):
    """Parsing and planning the one-job statement was most of its server time (0.55 of 0.75 ms): a
    producer connection prepares it on first use and runs its one generic plan from the first call on,
    with rows reached only through primary keys whatever the statistics (made here while every table
    was empty)."""
    from chokaq_ops.storage import Store
    from chokaq_ops.storage.dialects import PRODUCER

    with Store(pg_url, pool_size=1) as store:
        for _ in range(3):
            store.enqueue([NewJob(type="t", queue="prepared")])
        with store.pool.connection(PRODUCER) as conn:
            cur = conn.cursor()
            cur.execute("SELECT name, generic_plans, custom_plans FROM pg_prepared_statements ORDER BY name")
            # The first one creates the queue row; the next two know it exists.
            assert [tuple(r) for r in cur.fetchall()] == [
                ("chokaq_enqueue_one", 1, 0),
                ("chokaq_enqueue_one_known", 2, 0),
            ]
            cur.execute(
                "EXPLAIN EXECUTE chokaq_enqueue_one(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                ("x", "q", "t", None, None, 10, None, None, None, None, None),
            )
            plan = "\n".join(r[0] for r in cur.fetchall())
        assert "Seq Scan on queues" not in plan and "Seq Scan on queue_counts" not in plan, plan
        assert "using pk_queues" in plan, plan
        assert counters(store, "prepared")["enqueued"] == 3


def test_an_audited_single_enqueue_is_one_statement_with_its_audit_row(store, monkeypatch):
    """The API's POST /jobs of a job with a generated id and no key: the job (created by the actor), its
    audit row, its queue row and its counter go in with one statement, where the general path took a
    transaction of four (docs/producers.md)."""
    ran = []
    run = store.db.run
    monkeypatch.setattr(store.db, "run", lambda name, /, **kw: ran.append(name) or run(name, **kw))
    res = store.enqueue_audited(
        NewJob(type="t", queue="api-new", payload={"n": 1}), actor=OPS, max_queues=100
    )
    assert ran == ["enqueue_one_audited"]
    assert (res.status, res.created) == ("new", True)
    job = store.get_job(res.id)
    assert (job["queue"], job["payload"], job["created_by"], job["status"]) == (
        "api-new",
        '{"n":1}',
        OPS.name,
        "pending",
    )
    audit = sql(store, "SELECT actor, action, job_id, count FROM audit_log WHERE job_id = ?", res.id)
    assert [tuple(r) for r in audit] == [(OPS.name, "enqueue", res.id, 1)]
    assert scalar(store, "SELECT count(*) FROM queues WHERE name = 'api-new'") == 1
    assert counters(store, "api-new")["enqueued"] == 1


@pytest.mark.parametrize("kind", ["generated-id", "explicit-id", "idempotency-key"])
def test_an_audited_single_enqueue_refused_by_max_queues_changes_no_row(store, kind):
    """A job for a queue that does not exist yet, once `max_queues` queues exist: a 422 naming the queue,
    and no job, audit row, queue row or counter. A generated id goes in by one statement that applies the
    cap itself; an explicit id or a key by the general path, which checks it first."""
    store.enqueue([NewJob(type="t", queue="only")])
    queues = scalar(store, "SELECT count(*) FROM queues")
    audits = scalar(store, "SELECT count(*) FROM audit_log")
    job = NewJob(
        type="t",
        queue="one-too-many",
        id="mine" if kind == "explicit-id" else None,
        idempotency_key="k" if kind == "idempotency-key" else None,
    )
    with pytest.raises(errors.ValidationError) as refused:
        store.enqueue_audited(job, actor=OPS, max_queues=queues)
    assert refused.value.field == "queue" and "one-too-many" in str(refused.value)
    assert scalar(store, "SELECT count(*) FROM queues") == queues
    assert scalar(store, "SELECT count(*) FROM audit_log") == audits
    assert scalar(store, "SELECT count(*) FROM jobs_hot WHERE queue = 'one-too-many'") == 0
    assert counters(store, "one-too-many")["enqueued"] == 0
    # An existing queue is still admitted at the cap.
    assert store.enqueue_audited(replace(job, queue="only"), actor=OPS, max_queues=queues).created


def test_single_enqueues_skip_the_queues_table_for_a_queue_seen_a_moment_ago(store, monkeypatch):
    """A producer that has just committed a queue's row takes it to exist for KNOWN_QUEUE_S; a row
    deleted by hand meanwhile comes back with the first enqueue after that."""
    from chokaq_ops.storage import producer

    ran = []
    once = store.db.run_once
    monkeypatch.setattr(store.db, "run_once", lambda name, /, **kw: (ran.append(name), once(name, **kw))[1])
    for queue in ("seen", "seen", "seen", "unseen"):
        store.enqueue([NewJob(type="t", queue=queue)])
    assert ran == ["enqueue_one", "enqueue_one_known", "enqueue_one_known", "enqueue_one"]
    assert counters(store, "seen")["enqueued"] == 3
    sql(store, "DELETE FROM queues WHERE name = 'seen'")
    store.enqueue([NewJob(type="t", queue="seen")])
    assert scalar(store, "SELECT count(*) FROM queues WHERE name = 'seen'") == 0  # taken to exist still
    monkeypatch.setattr(producer, "KNOWN_QUEUE_S", 0.0)
    store.producer._known_queues.clear()
    store.enqueue([NewJob(type="t", queue="seen")])
    assert scalar(store, "SELECT count(*) FROM queues WHERE name = 'seen'") == 1
    assert counters(store, "seen")["enqueued"] == 5


def test_single_enqueues_of_concurrent_threads_share_one_statement_each_with_its_own_job(store, monkeypatch):
    """Threads that enqueue one job each while another's enqueue is in flight go out together in one
    statement and one transaction (storage/combining.py); each caller gets the id of its own job."""
    import threading

    from chokaq_ops.storage import producer

    monkeypatch.setattr(producer, "SINGLES_LEADERS", 1)
    store.producer = producer.Producer(store.db)
    ran: list[tuple[str, int]] = []
    first_in, go_on = threading.Event(), threading.Event()
    run = store.db.run_once

    def spy(name, /, **kw):
        ran.append((name, len(kw.get("items", [None]))))
        if len(ran) == 1:  # hold the first enqueue in flight while the others arrive
            first_in.set()
            assert go_on.wait(10)
        return run(name, **kw)

    monkeypatch.setattr(store.db, "run_once", spy)
    got: dict[int, str] = {}

    def enqueue(n: int) -> None:
        got[n] = store.enqueue([NewJob(type="t", queue="together", payload={"n": n})])[0].id

    threads = [threading.Thread(target=enqueue, args=(0,))]
    threads[0].start()
    assert first_in.wait(10)
    threads += [threading.Thread(target=enqueue, args=(n,)) for n in range(1, 7)]
    for t in threads[1:]:
        t.start()
    deadline = time.monotonic() + 10
    while store.producer._singles.waiting() < 6:
        assert time.monotonic() < deadline
        time.sleep(0.002)
    go_on.set()
    for t in threads:
        t.join(10)
    # The first enqueue committed the queue's row: the group skips the queues table.
    assert ran == [("enqueue_one", 1), ("enqueue_fresh_known", 6)]
    assert len(set(got.values())) == 7
    for n, job_id in got.items():
        assert store.get_job(job_id)["payload"] == f'{{"n":{n}}}'
    assert counters(store, "together")["enqueued"] == 7
    assert scalar(store, "SELECT count(*) FROM queues WHERE name = 'together'") == 1
    if store.dialect.name == "postgresql":  # one transaction: one transaction start time
        assert len({store.get_job(got[n])["created_at"] for n in range(1, 7)}) == 1


def test_sixteen_threads_of_single_enqueues_each_get_their_own_job_once(store):
    """Real concurrency, no holding: whatever groups form, every call's id is its own job, stored once
    with its payload, and the counters count each job once."""
    import threading

    per_thread, threads_n = 60, 16
    got: dict[tuple[int, int], str] = {}
    errors_seen: list[BaseException] = []

    def produce(t: int) -> None:
        try:
            for i in range(per_thread):
                [res] = store.enqueue([NewJob(type="t", queue=f"many-{t % 3}", payload={"t": t, "i": i})])
                assert res.created and res.status == "new"
                got[(t, i)] = res.id
        except BaseException as exc:  # reported below, with the thread's own traceback
            errors_seen.append(exc)

    threads = [threading.Thread(target=produce, args=(t,)) for t in range(threads_n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert not errors_seen, errors_seen[0]
    total = per_thread * threads_n
    assert len(got) == total and len(set(got.values())) == total
    rows = store.db.run("table_counts")
    assert rows[0]["hot"] == total
    for (t, i), job_id in list(got.items())[::37]:
        assert store.get_job(job_id)["payload"] == f'{{"t":{t},"i":{i}}}'
    assert sum(counters(store, f"many-{q}")["enqueued"] for q in range(3)) == total


def test_a_group_of_single_enqueues_stores_every_field_as_single_enqueues_do(store):
    """The multi-row statement of a group (enqueue_fresh) and the one-job statement store the same row
    for the same job: payload as given (JSON, other text, none), tags, priority, created_by, delay and
    scheduled time, queue and counters."""
    from datetime import UTC, datetime

    at = datetime(2031, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)
    jobs = [
        NewJob(type="a", queue="fields-1", payload={"x": [1, "é"]}, tags="t1,t2", priority=3),
        NewJob(type="b", queue="fields-2", payload='not json \\ "q" ☃', created_by="me"),
        NewJob(type="c", queue="fields-1", payload=None, delay_seconds=3600),
        NewJob(type="d", queue="fields-2", scheduled_at=at, priority=0),
    ]
    producer = store.producer
    grouped, _ = producer._enqueue_items(jobs)
    single, _ = producer._enqueue_items(jobs)
    group_ids = [r.id for r in producer._enqueue_singles(grouped)]
    single_ids = [producer._enqueue_singles([item])[0].id for item in single]
    keys = ("queue", "type", "payload", "tags", "priority", "created_by", "status", "attempt_count")
    for g, s1 in zip(group_ids, single_ids, strict=True):
        a, b = store.get_job(g), store.get_job(s1)
        assert {k: a[k] for k in keys} == {k: b[k] for k in keys}
        for k in ("scheduled_at", "due_at"):
            if a[k] is None:
                assert b[k] is None, k
            else:  # delays count from each statement's own now
                assert abs((a[k] - b[k]).total_seconds()) < 60, (k, a[k], b[k])
    assert store.get_job(group_ids[3])["scheduled_at"] == at
    assert store.get_job(group_ids[1])["payload"] == 'not json \\ "q" ☃'
    assert store.get_job(group_ids[2])["payload"] is None
    assert counters(store, "fields-1")["enqueued"] == 4 == counters(store, "fields-2")["enqueued"]


def test_enqueue_fields_defaults_and_generated_ids(store):
    res = store.enqueue([NewJob(type="t"), NewJob(type="t")])
    a, b = (store.get_job(r.id) for r in res)
    assert a["id"] != b["id"] and len(a["id"]) <= 50
    assert (a["status"], a["priority"], a["attempt_count"], a["queue"], a["worker_id"]) == (
        "pending",
        10,
        0,
        "default",
        None,
    )
    [r] = store.enqueue(
        [
            NewJob(
                type="t", payload="not json", tags="a,b", created_by="me", priority=7, idempotency_key="  k  "
            )
        ]
    )
    job = store.get_job(r.id)
    # Producers may store invalid JSON (the worker fails it as Fatal); keys are trimmed.
    assert (job["payload"], job["tags"], job["created_by"], job["priority"], job["idempotency_key"]) == (
        "not json",
        "a,b",
        "me",
        7,
        "k",
    )


# ------------------------------------------------------------------------------------ fetch


def test_fetch_orders_by_priority_then_due_time_and_claims_for_one_worker(store):
    now = store.now()
    store.enqueue(
        [
            NewJob(type="t", id="low-old", priority=1, scheduled_at=now - timedelta(seconds=50)),
            NewJob(type="t", id="hi-late", priority=20, scheduled_at=now - timedelta(seconds=5)),
            NewJob(type="t", id="hi-early", priority=20, scheduled_at=now - timedelta(seconds=10)),
            NewJob(type="t", id="mid-old", priority=10, scheduled_at=now - timedelta(seconds=40)),
            NewJob(type="t", id="mid-new", priority=10, scheduled_at=now - timedelta(seconds=30)),
        ]
    )
    # One at a time: the order is the database's, not a sort of the returned batch.
    order = [store.fetch(f"w{i}", 1)[0]["id"] for i in range(5)]
    assert order == ["hi-early", "hi-late", "mid-old", "mid-new", "low-old"]
    assert store.fetch("w9", 10) == []
    rows = sql(store, "SELECT id, status, worker_id, attempt_count FROM jobs_hot ORDER BY id")
    owners = {r[0]: r[2] for r in rows}
    assert owners == {"hi-early": "w0", "hi-late": "w1", "mid-old": "w2", "mid-new": "w3", "low-old": "w4"}
    assert {(int(r[1]), int(r[3])) for r in rows} == {(1, 0)}  # fetched, attempts untouched


def test_batch_fetch_returns_the_best_jobs_in_order(store):
    now = store.now()
    store.enqueue(
        [NewJob(type="t", id=f"p{p}", priority=p, scheduled_at=now - timedelta(seconds=p)) for p in range(10)]
    )
    got = store.fetch("w", 4)
    assert [r["id"] for r in got] == ["p9", "p8", "p7", "p6"]
    assert {r["id"] for r in store.fetch("w2", 100)} == {f"p{p}" for p in range(6)}


def test_future_jobs_wait_for_the_database_clock(store):
    now = store.now()
    store.enqueue(
        [
            NewJob(type="t", id="later", scheduled_at=now + timedelta(hours=1)),
            NewJob(type="t", id="soon", delay_seconds=0.4),
            NewJob(type="t", id="past", scheduled_at=now - timedelta(seconds=1)),
        ]
    )
    due = {r[0]: r[1] for r in sql(store, "SELECT id, due_at FROM jobs_hot")}
    assert [r["id"] for r in store.fetch("w", 10)] == ["past"]
    time.sleep(0.5)
    assert [r["id"] for r in store.fetch("w", 10)] == ["soon"]
    assert store.fetch("w", 10) == []
    assert store.get_job("later")["status"] == "pending" and due["later"] is not None
    # Due once the database clock passes it: move it into the past on that clock.
    age(store, "jobs_hot", ["later"], 1, "due_at", "scheduled_at")
    assert [r["id"] for r in store.fetch("w", 10)] == ["later"]


def test_paused_and_inactive_queues_are_skipped_and_resume(store):
    for q in ("open", "paused", "off"):
        enqueue(store, 2, queue=q, prefix=f"{q}-")
    store.set_queue("paused", actor=OPS, paused=True)
    store.set_queue("off", actor=OPS, active=False)
    assert {r["queue"] for r in store.fetch("w", 10)} == {"open"}
    assert store.fetch("w", 10, ["paused", "off"]) == []  # a named queue is skipped as well
    store.set_queue("paused", actor=OPS, paused=False)
    assert {r["queue"] for r in store.fetch("w", 10)} == {"paused"}
    store.set_queue("off", actor=OPS, active=True)
    assert {r["queue"] for r in store.fetch("w", 10, ["off"])} == {"off"}


def test_queue_filter_fetches_only_named_queues(store):
    for q in ("a", "b", "c"):
        enqueue(store, 3, queue=q, prefix=f"{q}-")
    got = store.fetch("w", 10, ["a", "c", "missing"])
    assert sorted(r["queue"] for r in got) == ["a"] * 3 + ["c"] * 3
    assert {r["queue"] for r in store.fetch("w", 10, ["b"])} == {"b"}
    assert store.fetch("w", 10) == []


def test_max_workers_caps_fetched_plus_processing_across_workers_and_others_fill_the_batch(store):
    store.set_queue("capped", actor=OPS, max_workers=2)
    now = store.now()
    store.enqueue(
        [
            NewJob(
                type="t", id=f"c{i}", queue="capped", priority=50, scheduled_at=now - timedelta(seconds=9 - i)
            )
            for i in range(6)
        ]
        + [NewJob(type="t", id=f"o{i}", queue="other", priority=1) for i in range(6)]
    )
    first = store.fetch("w1", 4)
    # The capped queue is the most urgent but gives only 2; the other queue fills the batch.
    assert [r["id"] for r in first[:2]] == ["c0", "c1"]
    assert [r["queue"] for r in first[2:]] == ["other", "other"]
    store.mark_processing("w1", ["c0"])  # processing counts against the cap too
    assert all(r["queue"] == "other" for r in store.fetch("w2", 10))
    assert store.fetch("w3", 10, ["capped"]) == []
    store.archive_succeeded("w1", [("c0", 1.0)])  # a finished job frees a slot
    assert [r["id"] for r in store.fetch("w3", 10)] == ["c2"]
    store.release("w1", ["c1"])  # so does a released one
    assert [r["id"] for r in store.fetch("w4", 10, ["capped"])] == ["c1"]
    assert scalar(store, "SELECT count(*) FROM jobs_hot WHERE queue = 'capped' AND status IN (1, 2)") == 2
    # Lifting the cap releases the rest.
    store.set_queue("capped", actor=OPS, max_workers=None)
    assert sorted(r["id"] for r in store.fetch("w5", 10)) == ["c3", "c4", "c5"]


def test_fetch_leaves_processing_and_other_workers_jobs_alone(store):
    mine = processing(store, "w1", 2, prefix="run")
    assert store.fetch("w2", 10) == []
    assert {r[0] for r in sql(store, "SELECT worker_id FROM jobs_hot")} == {"w1"}
    assert store.get_job(mine[0])["status"] == "processing"


@pytest.mark.postgres_only
def test_a_statement_that_counts_alone_fails_rather_than_miscount_inside_a_bigger_transaction(store):
    """The claims and the lean enqueues add their counter row by a plain INSERT keyed by their transaction
    (count_deltas_alone: they always run as a transaction of their own). Run twice for one queue inside
    one transaction, the second fails on the key, and nothing of either is left: no job, no count."""
    from chokaq_ops import ids

    def params() -> dict:
        return {
            "id": ids.new_id(), "queue": "alone", "type": "t", "payload": "{}", "tags": None, "priority": 10,
            "delay_s": None, "scheduled_at": None, "created_by": None, "trace_context": None,
        }  # fmt: skip

    store.enqueue([NewJob(type="t", queue="alone")])  # the queue's row, and one counted job
    before = counters(store, "alone")["enqueued"]

    def twice(tx) -> None:
        tx.run("enqueue_one_known", **params())
        tx.run("enqueue_one_known", **params())

    with pytest.raises(errors.Conflict):
        store.db.transaction(twice)
    assert scalar(store, "SELECT count(*) FROM jobs_hot WHERE queue = 'alone'") == 1
    assert counters(store, "alone")["enqueued"] == before == 1
    store.db.transaction(lambda tx: tx.run("enqueue_one_known", **params()))  # once is fine
    assert counters(store, "alone")["enqueued"] == 2


def test_a_plain_batch_is_built_as_the_general_items_would_be_sent(store):
    """enqueue_many of jobs that give only type, queue, payload and priority writes its statement's
    parameter as text (storage/plain_batch.py): the same objects the general items give after _fresh,
    and the same refusals; a batch with any other field goes the general way."""
    from chokaq_ops.storage import plain_batch
    from chokaq_ops.storage import producer as producer_module

    producer = store.producer
    limit = store.db.max_payload_bytes
    jobs = [
        NewJob(type=" t1 ", queue="q1"),
        NewJob(type="t2", queue="q2", payload={"n": 1, "é": '\u2028"\\'}, priority=3),
        NewJob(type="t3", payload=None),
        NewJob(type="t4", payload="not json"),
        NewJob(type=" t1 ", queue="q1", payload="again"),  # the same names, validated once
    ]
    batch = plain_batch.build(jobs, limit)
    assert batch is not None and len(set(batch.ids)) == 5
    assert batch.counts == {"q1": 2, "q2": 1, "default": 2}  # what the statement adds to the counters
    general = producer_module._fresh(producer._enqueue_items(jobs)[0])
    for item, job_id in zip(general, batch.ids, strict=True):
        item["id"] = job_id
    # The same objects (keys in another order); no ordinal in the statement's JSON: only the checked
    # statement after a lost reply reads one.
    assert batch.items() == general and all("ord" not in i for i in batch.items())
    for other in ({"tags": "a"}, {"delay_seconds": 1.0}, {"created_by": "me"}, {"idempotency_key": "k"}):
        assert plain_batch.build([*jobs, NewJob(type="t", **other)], limit) is None
    refusals = (
        ({"queue": " "}, "queue"),
        ({"type": ""}, "type"),
        ({"priority": 10**9}, "priority"),
        ({"priority": True}, "priority"),  # equal to 1 as a key, refused as a boolean
        ({"queue": 5}, "queue"),  # not a string: not looked up among the batch's validated names
        ({"payload": "é" * 600_000}, "payload"),  # 600,000 characters, 1.2 MB: over the byte limit
        ({"payload": "a\x00b"}, "payload"),
    )
    for bad, field in refusals:
        with pytest.raises(errors.ValidationError) as refused:
            plain_batch.build([jobs[0], NewJob(**{"type": "t", **bad})], limit)
        assert refused.value.field == field
        with pytest.raises(errors.ValidationError) as refused:
            store.enqueue([jobs[0], NewJob(**{"type": "t", **bad})])
        assert refused.value.field == field
    assert scalar(store, "SELECT count(*) FROM jobs_hot") == 0  # the refused batches inserted nothing

    class Name(str):  # a str subclass is not looked up raw; its jobs are still counted, each once
        pass

    odd = plain_batch.build([NewJob(type="t", queue=Name(" q1")), NewJob(type="t", queue=Name("q1 "))], limit)
    assert odd is not None and odd.counts == {"q1": 2}
    results = store.enqueue(jobs)
    assert [r.status for r in results] == ["new"] * 5
    assert [store.get_job(r.id).type for r in results] == ["t1", "t2", "t3", "t4", "t1"]
    assert store.get_job(results[2].id).payload is None
