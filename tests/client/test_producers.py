"""The producer API: `connect(...).enqueue` over the database and over the API alike, `enqueue_many`,
`handler.enqueue`, and transactional enqueue on the application's own connection."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from chokaq_ops import connect, errors
from chokaq_ops.engine.handlers import Registry
from chokaq_ops.storage import Store

SAME = ("type", "queue", "priority", "tags", "payload", "idempotency_key", "status", "location")


def _job(store: Store, job_id: str) -> dict:
    return store.get_job(job_id)


@pytest.mark.parametrize("over", ["db", "http"])
def test_db_and_http_clients_enqueue_the_same_way(over, api, client, store) -> None:
    url, tokens = api
    producer = client if over == "db" else connect(url, tokens["operator"])
    at = datetime.now(UTC) + timedelta(hours=2)
    jid = producer.enqueue(
        "mail.send.v1", {"to": "a@b.c", "n": 1}, queue="mail", priority=3, tags=["vip", "eu"], at=at
    )
    job = _job(store, jid)
    assert (job["type"], job["queue"], job["priority"], job["tags"]) == ("mail.send.v1", "mail", 3, "vip,eu")
    assert job["payload"] == '{"to":"a@b.c","n":1}'
    assert abs((job["scheduled_at"] - at).total_seconds()) < 0.01

    # A string is stored exactly as given, valid JSON or not.
    raw = producer.enqueue("mail.send.v1", '{"to": "x",  }', delay=timedelta(minutes=5))
    delayed = _job(store, raw)
    assert delayed["payload"] == '{"to": "x",  }'
    assert delayed["scheduled_at"] > datetime.now(UTC) + timedelta(minutes=4)

    # An active job holding the key answers with its id, inserting nothing.
    first = producer.enqueue("report.v1", None, idempotency_key="daily-2026-12-01")
    assert producer.enqueue("report.v1", {"other": 1}, idempotency_key="daily-2026-12-01") == first
    assert _job(store, first)["payload"] == "{}"

    assert producer.enqueue("report.v1", id=f"fixed-{over}") == f"fixed-{over}"
    with pytest.raises(errors.Conflict, match=f"fixed-{over}"):
        producer.enqueue("report.v1", id=f"fixed-{over}")
    with pytest.raises(errors.ValidationError) as bad:
        producer.enqueue("report.v1", delay=5, at=at)
    assert bad.value.field == "delay"
    with pytest.raises(errors.ValidationError) as bad:
        producer.enqueue("report.v1", {"x": float("nan")})
    assert bad.value.field == "payload"
    with pytest.raises(errors.ValidationError) as bad:
        producer.enqueue("report.v1", {}, qeueu="mail")
    assert bad.value.field == "qeueu"
    assert len(client.load_hot()) == 4


@pytest.mark.parametrize("over", ["db", "http"])
def test_enqueue_many_returns_ids_in_order(over, api, client, store) -> None:
    url, tokens = api
    producer = client if over == "db" else connect(url, tokens["operator"])
    ids = producer.enqueue_many(
        [
            {"type": "a.v1", "payload": {"i": 0}},
            {"type": "b.v1", "payload": "plain text", "queue": "q2", "idempotency_key": "k"},
            {"type": "b.v1", "payload": {"i": 2}, "idempotency_key": "k"},
        ]
    )
    assert len(ids) == 3 and ids[1] == ids[2] and ids[0] != ids[1]
    assert [_job(store, i)["payload"] for i in ids[:2]] == ['{"i":0}', "plain text"]
    with pytest.raises(errors.ValidationError) as bad:
        producer.enqueue_many([{"type": "a.v1", "palyoad": 1}])
    assert bad.value.field == "palyoad"
    producer.enqueue("a.v1", id="taken")
    # The item whose id is used is named; the others are enqueued.
    with pytest.raises(errors.Conflict, match="taken"):
        producer.enqueue_many([{"type": "a.v1", "id": "taken"}, {"type": "c.v1", "id": "free"}])
    assert _job(store, "free")["type"] == "c.v1"


def test_a_handler_enqueues_its_own_type(client, store) -> None:
    registry = Registry()

    @registry.job("invoice.render.v1")
    def render(payload, ctx):  # pragma: no cover - never run here
        return None

    jid = render.enqueue({"invoice": 7}, using=client, queue="billing", priority=1)
    job = _job(store, jid)
    assert (job["type"], job["queue"], job["priority"], job["payload"]) == (
        "invoice.render.v1",
        "billing",
        1,
        '{"invoice":7}',
    )
    many = render.enqueue_many([{"invoice": 8}, {"invoice": 9}], using=client, queue="billing")
    assert [_job(store, i)["type"] for i in many] == ["invoice.render.v1"] * 2


def _app_connection(store: Store, db_url: str):
    """The application's own connection to the queue's database, with a table of its own."""
    if store.dialect.name == "sqlite":
        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
    else:
        import pyodbc

        conn = pyodbc.connect(store.dialect.odbc, autocommit=False)
    conn.cursor().execute("CREATE TABLE orders (id integer PRIMARY KEY, total integer)")
    conn.commit()
    return conn


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_transactional_enqueue_commits_and_rolls_back_with_the_application(
    outcome, client, store, db_url
) -> None:
    conn = _app_connection(store, db_url)
    try:
        conn.cursor().execute("INSERT INTO orders (id, total) VALUES (1, 250)")
        jid = client.enqueue("order.confirm.v1", {"order": 1}, connection=conn)
        more = client.enqueue_many([{"type": "order.ship.v1", "payload": {"order": 1}}], connection=conn)
        # Not visible to anyone else before the application commits.
        assert client.load_hot().empty
        getattr(conn, outcome)()
        visible = set(client.load_hot()["id"])
        if outcome == "commit":
            assert visible == {jid, *more}
        else:
            assert visible == set()
        count = conn.cursor().execute("SELECT count(*) FROM orders").fetchone()[0]
        assert count == (1 if outcome == "commit" else 0)
    finally:
        conn.close()


def test_transactional_enqueue_refuses_a_connection_that_commits_each_statement(
    client, store, db_url
) -> None:
    if store.dialect.name == "sqlite":
        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
    else:
        import pyodbc

        conn = pyodbc.connect(store.dialect.odbc, autocommit=True)
    try:
        with pytest.raises(errors.ValidationError) as bad:
            client.enqueue("order.confirm.v1", connection=conn)
        assert bad.value.field == "connection"
        with pytest.raises(errors.ValidationError, match="connection"):
            client.enqueue("order.confirm.v1", connection=object())
        assert client.load_hot().empty
    finally:
        conn.close()


def test_a_transactional_enqueue_is_refused_over_the_api(api) -> None:
    url, tokens = api
    with pytest.raises(errors.ValidationError) as bad:
        connect(url, tokens["operator"]).enqueue("x.v1", connection=object())
    assert bad.value.field == "connection"
