"""`chokaq rescue`: one forced sweep with the configured timeouts; counts as a table or JSON."""

from __future__ import annotations

from crash.support import age, fetched, processing

from chokaq_ops.cli import main
from chokaq_ops.storage import Store
from tests.support.cli import final, record


def test_rescue_prints_counts_as_json(db_url, tmp_path, capsys, monkeypatch):
    config = tmp_path / "chokaq.toml"
    config.write_text(
        "[Execution]\nHeartbeatIntervalMin = 0.2\nHeartbeatIntervalMax = 0.3\n"
        '[Recovery]\nFetchedJobTimeout = "5s"\nProcessingZombieTimeout = "10s"\n'
    )
    with Store(db_url, pool_size=2) as store:
        waiting = fetched(store, "w", 2, prefix="f")
        running = processing(store, "w", 3, prefix="p")
        age(store, "jobs_hot", waiting + running, 20, "updated_at", "heartbeat_at")
        assert store.try_lease("rescue", "a-busy-worker", 600)  # the forced sweep ignores the lease
    assert main(["rescue", "--db", db_url, "--config", str(config), "--format", "json"]) == 0
    assert record(capsys.readouterr().out) == {"recovered": 2, "archived": 3}
    assert main(["rescue", "--db", db_url, "--config", str(config)]) == 0
    assert capsys.readouterr().out.split() == ["RECOVERED", "ARCHIVED", "0", "0"]
    with Store(db_url, pool_size=2) as store:
        assert {store.get_job(i)["location"] for i in running} == {"dlq"}


def test_rescue_uses_environment_timeouts_and_lists_ids(db_url, capsys, monkeypatch):
    monkeypatch.setenv("CHOKAQ_RECOVERY__FETCHED_JOB_TIMEOUT", "5s")
    with Store(db_url, pool_size=2) as store:
        waiting = fetched(store, "w", 1)
        age(store, "jobs_hot", waiting, 20, "updated_at")
    assert main(["rescue", "--db", db_url, "--ids"]) == 0
    assert f"recovered {waiting[0]}" in capsys.readouterr().out


def test_rescue_on_a_database_without_its_schema_exits_5(tmp_path, capsys):
    (tmp_path / "empty.db").touch()  # a database without the schema (a missing file is exit 2)
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    assert main(["rescue", "--db", url, "--format", "json"]) == 5
    out, err = capsys.readouterr()
    assert "chokaq migrate" in err
    assert (final(out)["event"], final(out)["reason"], final(out)["exit_code"]) == (
        "error",
        "schema_outdated",
        5,
    )
