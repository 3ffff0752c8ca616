"""The audit log and event reads, and API tokens (create / verify / revoke)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from storage_factories import OPS, dead, enqueue, events, scalar, sql

from chokaq_ops import errors
from chokaq_ops.models import Actor, FailureReason
from chokaq_ops.storage import Store


def test_list_audit_filters_by_each_field_and_pages_newest_first(store):
    jobs = enqueue(store, 3)
    store.edit_pending(jobs[0], actor=Actor("ann"), priority=1)
    store.edit_pending(jobs[1], actor=Actor("bob", plan_id="p1"), priority=2)
    store.cancel_many(jobs, actor=Actor("bob", plan_id="p1"))
    old = [r[0] for r in sql(store, "SELECT id FROM audit_log WHERE actor = 'ann'")]
    age_audit(store, old, 7200)

    everything = store.list_audit()
    assert everything.total == 5 and [r["id"] for r in everything.items] == sorted(
        (r["id"] for r in everything.items), reverse=True
    )
    assert store.list_audit(actor="ann").total == 1
    assert store.list_audit(action="cancel").total == 3
    assert [r["action"] for r in store.list_audit(job_id=jobs[1]).items] == ["cancel", "edit_pending"]
    # A plan id on an audit row names one of the server's own plans: a direct call's is dropped.
    assert store.list_audit(plan_id="p1").total == 0
    assert store.list_audit(since=store.now() - timedelta(hours=1)).total == 4
    page = store.list_audit(page=2, page_size=2)
    assert (page.total, len(page.items), page.page) == (5, 2, 2)
    assert store.list_audit(page=4, page_size=2).items == []
    with pytest.raises(errors.ValidationError):
        store.list_audit(page_size=0)


def age_audit(store: Store, ids: list[int], seconds: float) -> None:
    if store.dialect.name == "postgresql":
        expr = "now() - make_interval(secs => CAST(? AS double precision))"
    else:
        expr = "strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || CAST(? AS text) || ' seconds')"
    for i in ids:
        sql(store, f"UPDATE audit_log SET at = {expr} WHERE id = ?", seconds, i)


def wait_events(store: Store, after: int, n: int, timeout: float = 10.0) -> list[dict]:
    """events_after until n events show. On PostgreSQL it holds back events while an older writing
    transaction of the same database is still in flight."""
    deadline = time.monotonic() + timeout
    while True:
        got = store.events_after(after, 1000)
        if len(got) >= n or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def test_events_after_returns_events_in_id_order_after_the_cursor(store):
    start = store.last_event_id()
    written = [store.add_event("test", f"m{i}", {"i": i}) for i in range(5)]
    dead(store, 2)
    got = wait_events(store, start, 7)
    assert [e["id"] for e in got] == sorted(e["id"] for e in got) and len(got) == 7
    assert [e["id"] for e in got[:5]] == written and [e["message"] for e in got[:5]] == [
        f"m{i}" for i in range(5)
    ]
    assert [e["kind"] for e in got[5:]] == ["dlq", "dlq"]
    assert [e["id"] for e in store.events_after(written[1], 2)] == written[2:4]
    assert store.events_after(got[-1]["id"], 10) == []
    assert store.last_event_id() == got[-1]["id"]


def test_tokens_create_verify_list_revoke(store):
    token = store.create_token("ci", "operator", actor=OPS)
    assert token.startswith("chq_") and len(token) > 40
    assert store.verify_token(token) == {"name": "ci", "role": "operator"}
    # Only a hash is stored.
    assert scalar(store, "SELECT count(*) FROM api_tokens WHERE token_hash = ?", token) == 0
    assert store.verify_token(token + "x") is None and store.verify_token("") is None
    assert store.verify_token("x" * 500) is None
    [row] = store.list_tokens()
    assert (row["name"], row["role"], row["created_by"], row["revoked_at"]) == ("ci", "operator", "ops", None)
    assert row["last_used_at"] is not None
    with pytest.raises(errors.Conflict) as exc:
        store.create_token("ci", "admin", actor=OPS)
    assert exc.value.field == "name"
    with pytest.raises(errors.ValidationError) as exc:
        store.create_token("other", "root", actor=OPS)
    assert exc.value.field == "role"

    assert store.revoke_token("ci", actor=OPS) is True
    assert store.verify_token(token) is None
    assert store.revoke_token("ci", actor=OPS) is False
    assert store.list_tokens()[0]["revoked_at"] is not None
    actions = [r["action"] for r in store.list_audit().items]
    assert actions == ["token_revoke", "token_create"]


def test_leases_have_one_holder_until_expiry(store):
    assert store.try_lease("sweep", "a", 60) is True
    assert store.try_lease("sweep", "b", 60) is False
    assert store.try_lease("sweep", "a", 60) is True  # renewal
    store.release_lease("sweep", "b")  # not the holder: nothing happens
    assert store.try_lease("sweep", "b", 60) is False
    store.release_lease("sweep", "a")
    assert store.try_lease("sweep", "b", 0.2) is True
    time.sleep(0.3)
    assert store.try_lease("sweep", "a", 60) is True  # b's lease expired on the database clock


def test_verifying_a_token_writes_last_used_at_at_most_once_a_minute(store):
    token = store.create_token("reader-1", "reader", actor=Actor("cli"))
    assert store.verify_token(token) == {"name": "reader-1", "role": "reader"}
    first = scalar(store, "SELECT last_used_at FROM api_tokens WHERE name = 'reader-1'")
    assert first is not None
    time.sleep(0.05)
    assert store.verify_token(token) == {"name": "reader-1", "role": "reader"}
    # Fresh within the minute: the second check was a pure read.
    assert scalar(store, "SELECT last_used_at FROM api_tokens WHERE name = 'reader-1'") == first


def test_dlq_event_messages_name_the_failure_reason(store):
    [job] = dead(store, 1, reason=FailureReason.Timeout)
    [event] = events(store, "dlq")
    assert event["message"].endswith("dead: Timeout") and job in event["message"]


def test_postgres_an_event_writer_in_flight_holds_back_the_events_after_it(pg_url):
    """The live stream never skips an event: one whose writer has not committed yet holds back every later
    one (ids are taken in one order and committed in another)."""
    with Store(pg_url) as store:
        start = store.last_event_id()
        slow = store.dialect.connect()
        slow.autocommit = False
        slow.cursor().execute("INSERT INTO events (kind, message) VALUES ('test', 'slow writer')")
        try:
            later = store.add_event("test", "quick writer")
            time.sleep(0.2)
            assert store.events_after(start, 10) == []  # 'quick writer' waits for the slow one
        finally:
            slow.commit()
            slow.close()
        got = wait_events(store, start, 2)
        assert [e["message"] for e in got] == ["slow writer", "quick writer"] and got[1]["id"] == later


def test_postgres_a_long_transaction_in_another_database_does_not_hold_the_stream_back(pg_url, pg_server):
    other_url = pg_server.create()
    try:
        with Store(pg_url) as store, Store(other_url) as other:
            elsewhere = other.dialect.connect()
            elsewhere.autocommit = False
            elsewhere.cursor().execute("INSERT INTO events (kind, message) VALUES ('test', 'other db')")
            try:
                start = store.last_event_id()
                store.add_event("test", "here")
                assert [e["message"] for e in store.events_after(start, 10)] == ["here"]
            finally:
                elsewhere.rollback()
                elsewhere.close()
    finally:
        pg_server.drop(other_url)
