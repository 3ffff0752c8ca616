"""`chokaq doctor`: what holds back vacuum, from the command line (docs/endurance.md)."""

from __future__ import annotations

from chokaq_ops.storage.dialects import from_url
from tests.support.cli import chokaq, record


def test_doctor_names_the_holder_or_the_log(capsys, db_url, store):
    holder = None
    if store.dialect.name == "postgresql":
        holder = from_url(db_url).connect()
        holder.autocommit = False
        cur = holder.cursor()
        cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cur.execute("SET LOCAL application_name = 'bi-report'")
        cur.execute("SELECT count(*) FROM jobs_archive")
        cur.fetchall()
    try:
        code, out, err = chokaq(capsys, db_url, "doctor", "--format", "json")
        assert code == 0, err
        report = record(out)
        code, text, _ = chokaq(capsys, db_url, "doctor")
        assert code == 0
    finally:
        if holder is not None:
            holder.rollback()
            holder.close()
    if store.dialect.name == "postgresql":
        assert report["oldest_snapshot"]["application"] == "bi-report"
        assert {t["table"] for t in report["tables"]} >= {"jobs_hot", "queue_counts"}
        assert "application bi-report" in text and "jobs_hot" in text
        assert report["wal"] is None
    else:
        assert report["oldest_snapshot"] is None and report["tables"] == []
        assert report["wal"]["limit_bytes"] == 64 * 2**20
        assert "write-ahead log" in text


def test_doctor_refuses_a_database_that_does_not_exist(capsys, tmp_path):
    code, _, err = chokaq(capsys, f"sqlite:///{tmp_path / 'missing.db'}", "doctor")
    assert code == 2 and "missing.db" in err
