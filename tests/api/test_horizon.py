"""What holds back vacuum, made visible and stoppable (docs/endurance.md): readiness names the session
that holds the oldest snapshot (a warning, never a failure), the metrics carry its age and the queue
tables' dead versions, and an admin alone can end that session, confirmed and audited."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from chokaq_ops.storage.dialects import from_url
from tests.api.conftest import ApiClient
from tests.support.dbprobe import sql


class Holder:
    def __init__(self, conn: Any, pid: int) -> None:
        self.conn, self.pid = conn, pid


@pytest.fixture
def holder(store) -> Iterator[Holder]:
    """An analyst's session: a repeatable-read transaction left open after one read of the archive."""
    assert store.dialect.name == "postgresql", "a server-side snapshot holder exists on PostgreSQL only"
    conn = from_url(store.url).connect()
    conn.autocommit = False
    cur = conn.cursor()
    cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    cur.execute("SET LOCAL idle_in_transaction_session_timeout = 0")
    cur.execute("SET LOCAL application_name = 'triage-notebook'")
    cur.execute("SELECT count(*) FROM jobs_archive")
    cur.fetchall()
    cur.execute("SELECT pg_backend_pid()")
    pid = int(cur.fetchone()[0])
    try:
        yield Holder(conn, pid)
    finally:
        try:
            conn.rollback()
            conn.close()
        except Exception:
            pass  # ended by the test


@pytest.fixture
def quick(store, settings, tokens, bound_app) -> ApiClient:
    """The API with a horizon warning after half a second."""
    app = bound_app(settings.with_overrides({"health.horizon_degraded": 0.5}), store=store)
    return ApiClient(app, tokens)


@pytest.mark.postgres_only
def test_readiness_names_the_session_holding_the_oldest_snapshot_and_stays_ready(quick, holder):
    time.sleep(0.7)
    r = quick.get("/health/ready", role="reader")
    assert r.status_code == 200 and r.json["status"] == "degraded"
    check = r.json["checks"]["horizon"]
    assert check["status"] == "degraded"
    assert f"pid {holder.pid}" in check["detail"] and "triage-notebook" in check["detail"]
    held = check["data"]["oldest_snapshot"]
    assert held["pid"] == holder.pid and held["application"] == "triage-notebook"
    assert held["state"] == "idle in transaction" and held["transaction_age_seconds"] >= 0.5
    assert "SELECT pg_backend_pid()" in held["query"]  # the last statement (psqlODBC wraps it in a savepoint)
    assert check["data"]["replication_slots"] == [] and check["data"]["prepared_transactions"] == []
    # A probe without a token sees only the status: still 200, the queue keeps working.
    assert quick.get("/health/ready", role=None).json == {"status": "degraded"}


def test_metrics_carry_the_horizon_and_the_tables_dead_versions(quick, store):
    families = {f.name: f for f in text_string_to_metric_families(quick.get("/metrics", role="reader").text)}
    assert "chokaq_db_oldest_snapshot_seconds" in families
    if store.dialect.name == "postgresql":
        tables = {s.labels["table"] for s in families["chokaq_db_table_dead_tuples"].samples}
        assert {"jobs_hot", "queue_counts", "stats_summary"} <= tables
        assert "chokaq_sqlite_wal_bytes" not in families
    else:
        assert families["chokaq_sqlite_wal_bytes"].samples[0].value >= 0


@pytest.mark.postgres_only
def test_only_an_admin_ends_the_holding_session_confirmed_and_audited(quick, store, holder):
    body = {"pid": holder.pid, "confirm": holder.pid, "reason": "blocking vacuum"}
    for role in ("reader", "operator"):
        assert quick.post("/horizon/cancel", role=role, json=body).status_code == 403
    r = quick.post("/horizon/cancel", json={"pid": holder.pid, "confirm": holder.pid + 1})
    assert r.status_code == 422 and "confirm" in r.json["errors"]["json"]
    assert quick.post("/horizon/cancel", json={"pid": 1, "confirm": 1}).status_code == 404
    assert sql(store, "SELECT count(*) FROM audit_log WHERE action LIKE '%_session'")[0][0] == 0
    r = quick.post("/horizon/cancel", json=body)
    assert r.status_code == 200, r.json
    # Idle in its transaction, the session has no statement to cancel: it is ended.
    assert r.json == {"pid": holder.pid, "signals": ["cancel", "terminate"], "released": True}
    rows = sql(store, "SELECT actor, action, details FROM audit_log WHERE action LIKE '%session' ORDER BY id")
    assert [(a, b) for a, b, _ in rows] == [("admin", "cancel_session"), ("admin", "terminate_session")]
    assert '"triage-notebook"' in rows[0][2] and '"blocking vacuum"' in rows[0][2]
    assert quick.get("/horizon", role="reader").json["oldest_snapshot"] is None
    with pytest.raises(Exception):  # noqa: B017 (the driver's error for a closed connection varies)
        holder.conn.cursor().execute("SELECT 1")


@pytest.mark.sqlite_only
def test_sqlite_reports_its_write_ahead_log_and_has_no_session_to_end(quick, store):
    r = quick.get("/horizon", role="reader")
    assert r.status_code == 200 and r.json["oldest_snapshot"] is None
    assert set(r.json["wal"]) == {"size_bytes", "limit_bytes", "pinned_seconds"}
    assert r.json["wal"]["limit_bytes"] == 64 * 2**20
    assert quick.post("/horizon/cancel", json={"pid": 42, "confirm": 42}).status_code == 404
