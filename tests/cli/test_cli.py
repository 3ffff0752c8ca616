"""`chokaq dlq|archive|queues` end to end: argv in, database changed, output and exit code out."""

from __future__ import annotations

import os
import subprocess
import time
from datetime import timedelta

import pytest

from chokaq_ops.cli import main
from chokaq_ops.client import DbClient
from chokaq_ops.models import FailureReason, HotFilter
from chokaq_ops.storage import Store
from chokaq_ops.storage.migrate import migrate
from tests.support.cli import chokaq, final, lines, record, rows
from tests.support.seeds import seed_archive, seed_dlq, table_counts
from tests.support.served import CHOKAQ


def test_dlq_ls_show_summary(capsys, store, db_url) -> None:
    zombies = seed_dlq(store, 3, queue="media", type="media.resize.v1", reason=FailureReason.Zombie)
    seed_dlq(store, 2, queue="billing")
    code, out, _ = chokaq(capsys, db_url, "dlq", "ls", "--reason", "Zombie", "--format", "json")
    assert code == 0
    listed = rows(out)
    assert {j["id"] for j in listed} == set(zombies)
    assert {j["failure_reason"] for j in listed} == {"Zombie"} and listed[0]["location"] == "dlq"
    code, out, err = chokaq(capsys, db_url, "dlq", "ls", "--queue", "billing")
    assert code == 0 and out.splitlines()[0].split()[:3] == ["ID", "QUEUE", "TYPE"]
    assert (
        len(out.splitlines()) == 3
        and "TimeoutError: order" in out
        and err == "-- 1-2 of 2 dead jobs (page 1 of 1)\n"
    )

    code, out, _ = chokaq(capsys, db_url, "dlq", "show", zombies[0])
    assert code == 0 and "heartbeat_age_seconds" in out and "TimeoutError: order" in out
    code, out, _ = chokaq(capsys, db_url, "dlq", "show", zombies[0], "--format", "json")
    shown = record(out)
    assert shown["id"] == zombies[0] and shown["failure_reason"] == "Zombie" and shown["runtime_seconds"] >= 0

    code, out, _ = chokaq(capsys, db_url, "dlq", "summary", "--format", "json")
    summary = record(out)
    assert summary["total"] == 5 and {e["value"] for e in summary["by_reason"]} == {
        "Zombie",
        "MaxRetriesExceeded",
    }
    assert [e["count"] for e in summary["top_errors"]] == [3, 2]  # error groups per reason
    assert {e["template"] for e in summary["top_errors"]} == {"order <n> timed out"}
    code, out, _ = chokaq(capsys, db_url, "dlq", "summary")
    assert code == 0 and "top error groups" in out


def last_line(out: str) -> dict:
    """The final object of a bulk run's JSON lines (the first line is the plan)."""
    got = lines(out)
    assert got[0]["event"] == "plan"
    return got[-1]


def test_dlq_resurrect_dry_run_then_for_real_as_an_audited_plan(capsys, store, db_url, monkeypatch) -> None:
    monkeypatch.delenv("CHOKAQ_ACTOR", raising=False)
    zombies = seed_dlq(store, 4, queue="media", reason=FailureReason.Zombie)
    seed_dlq(store, 2, queue="billing")
    code, out, _ = chokaq(
        capsys, db_url, "dlq", "resurrect", "--reason", "zombie", "--dry-run", "--format", "json"
    )
    preview = lines(out)[0]  # a dry run is the same stream: the plan line, dry_run true, then the final
    assert code == 0 and preview["dry_run"] is True and preview["plan_id"] is None
    assert preview["matched"] == 4 and preview["by_reason"] == {"Zombie": 4}
    assert table_counts(store)["dlq"] == 6
    code, out, _ = chokaq(capsys, db_url, "dlq", "resurrect", "--reason", "Zombie", "--dry-run")
    assert "would resurrect 4 dead job(s)" in out

    code, out, _ = chokaq(capsys, db_url, "dlq", "resurrect", "--reason", "Zombie", "--format", "json")
    result = last_line(out)
    assert code == 0 and (result["resurrected"], result["batches"], result["skipped"]) == (4, 1, 0)
    assert {store.get_job(i)["location"] for i in zombies} == {"hot"}
    audit = [
        a for a in store.list_audit(plan_id=result["plan_id"]).items if not a["action"].startswith("plan_")
    ]
    assert len(audit) == 4 and {a["actor"] for a in audit} == {
        f"cli:{os.environ.get('USER') or __import__('getpass').getuser()}"
    }


def test_dlq_resurrect_ids_from_stdin_with_a_fixed_payload(store, db_url) -> None:
    ids = seed_dlq(store, 3, reason=FailureReason.Fatal, payload=lambda i: '{"order": 1,}')
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "CHOKAQ_ACTOR": "night-shift"}
    done = subprocess.run(
        [
            CHOKAQ,
            "dlq",
            "resurrect",
            "--db",
            db_url,
            "--ids",
            "-",
            "--payload",
            '{"order": 1}',
            "--priority",
            "5",
            "--format",
            "json",
        ],
        input="\n".join(ids[:2]) + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert last_line(done.stdout)["resurrected"] == 2
    assert "\r" not in done.stderr, "no progress bar when stderr is not a terminal"
    for job_id in ids[:2]:
        job = store.get_job(job_id)
        assert (job["location"], job["payload"], job["priority"], job["last_modified_by"]) == (
            "hot",
            '{"order": 1}',
            5,
            "night-shift",
        )
    assert store.get_job(ids[2])["location"] == "dlq"


def test_dlq_purge_and_resume(capsys, store, db_url) -> None:
    ids = seed_dlq(store, 5)
    code, out, _ = chokaq(
        capsys, db_url, "dlq", "purge", "--ids", f"{ids[0]},{ids[1]}", "--actor", "eve", "--format", "json"
    )
    assert code == 0 and last_line(out)["purged"] == 2 and table_counts(store)["dlq"] == 3
    assert store.list_audit(job_id=ids[0]).items[0]["actor"] == "eve"

    client = DbClient(store, actor="eve")
    plan = client.plan_purge(ids[2:], chunk_size=1)
    plan.execute(progress=False, max_chunks=1)  # then the operator's laptop went to sleep
    code, out, _ = chokaq(capsys, db_url, "dlq", "purge", "--resume", plan.id, "--format", "json")
    result = last_line(out)
    assert code == 0 and (result["purged"], result["purged_this_run"]) == (3, 2)
    assert (result["batches"], result["batches_this_run"], table_counts(store)["dlq"]) == (3, 2, 0)
    code, _, err = chokaq(capsys, db_url, "dlq", "resurrect", "--resume", plan.id)
    assert code == 2 and "purge plan" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["dlq", "resurrect"],  # no selection
        ["dlq", "resurrect", "--ids", "a", "--queue", "q"],
        ["dlq", "purge", "--reason", "Exploded"],
        ["dlq", "ls", "--failed-from", "yesterday-ish"],
        ["dlq", "ls", "--limit", "5000"],
        ["dlq", "resurrect", "--queue", "q", "--payload", "{}"],
        ["dlq", "resurrect", "--ids", "a", "--payload", "{not json"],
        ["archive", "purge"],
        ["archive", "purge", "--older-than", "soon"],
        ["archive", "purge", "--older-than", "9" * 40],
        ["queues", "set", "default", "--zombie-timeout", "1s"],
        ["queues", "set", "default", "--max-workers", "0"],
    ],
)
def test_bad_input_exits_2_with_a_message(capsys, tmp_path, argv) -> None:
    # Argument checks come before any dialect-specific work, so one database is enough here.
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with Store(url, pool_size=1) as store:
        migrate(store)
        seed_dlq(store, 1)
        before = table_counts(store)
        with pytest.raises(SystemExit) as exited:
            code = main([*argv, "--db", url])
            raise SystemExit(code)
        assert exited.value.code == 2
        assert "error" in capsys.readouterr().err
        assert table_counts(store) == before


def test_missing_job_exits_2_not_found(capsys, store, db_url) -> None:
    code, _, err = chokaq(capsys, db_url, "dlq", "show", "no-such-job")
    assert code == 2 and "no-such-job" in err
    code, out, _ = chokaq(capsys, db_url, "dlq", "show", "no-such-job", "--format", "json")
    assert code == 2 and final(out)["reason"] == "not_found" and "no-such-job" in final(out)["message"]


def test_archive_purge(capsys, store, db_url) -> None:
    seed_archive(store, 7)
    code, out, _ = chokaq(capsys, db_url, "archive", "purge", "--older-than", "30d", "--format", "json")
    assert record(out)["purged"] == 0
    time.sleep(0.01)  # the rows finished strictly before the cutoff (SQLite keeps milliseconds)
    cutoff = store.now().isoformat()
    code, out, _ = chokaq(
        capsys, db_url, "archive", "purge", "--older-than", cutoff, "--dry-run", "--format", "json"
    )
    assert code == 0 and record(out)["would_purge"] == 7 and table_counts(store)["archive"] == 7
    later = (store.now() + timedelta(hours=1)).isoformat()
    code, _, err = chokaq(capsys, db_url, "archive", "purge", "--older-than", later)
    assert code == 2 and "future" in err and table_counts(store)["archive"] == 7
    code, out, _ = chokaq(capsys, db_url, "archive", "purge", "--older-than", cutoff, "--format", "json")
    assert code == 0 and record(out)["purged"] == 7 and table_counts(store)["archive"] == 0


def test_queues_ls_pause_resume_set(capsys, store, db_url) -> None:
    seed_dlq(store, 1, queue="media")
    code, out, _ = chokaq(capsys, db_url, "queues", "pause", "media", "--actor", "ops", "--format", "json")
    assert code == 0 and rows(out)[0]["paused"] is True
    code, out, _ = chokaq(capsys, db_url, "queues", "ls", "--format", "json")
    assert {q["name"]: q["paused"] for q in rows(out)}["media"] is True
    chokaq(capsys, db_url, "queues", "resume", "media")
    code, out, _ = chokaq(
        capsys,
        db_url,
        "queues",
        "set",
        "media",
        "--max-workers",
        "4",
        "--zombie-timeout",
        "10m",
        "--format",
        "json",
    )
    row = rows(out)[0]
    assert (row["paused"], row["max_workers"], row["zombie_timeout_seconds"]) == (False, 4, 600)
    code, out, _ = chokaq(
        capsys, db_url, "queues", "set", "media", "--max-workers", "none", "--format", "json"
    )
    assert rows(out)[0]["max_workers"] is None and rows(out)[0]["zombie_timeout_seconds"] == 600
    code, out, _ = chokaq(capsys, db_url, "queues", "ls")
    assert code == 0 and out.startswith("NAME")
    actions = [a["action"] for a in store.list_audit(action="set_queue").items]
    assert len(actions) == 4


def test_circuits_open_ls_close_and_a_bad_command(tmp_path, capsys):
    """`chokaq circuits open|ls|close`: forced open and closed again, audited under --actor."""
    from chokaq_ops.storage import Store
    from chokaq_ops.storage.migrate import migrate

    url = f"sqlite:///{tmp_path / 'c.db'}"
    with Store(url) as s:
        migrate(s)
    assert main(["circuits", "open", "pay.v1", "--db", url, "--actor", "alice", "--format", "json"]) == 0
    capsys.readouterr()
    assert main(["circuits", "ls", "--db", url, "--format", "json"]) == 0
    [row] = rows(capsys.readouterr().out)
    assert (row["type"], row["state"], row["forced"]) == ("pay.v1", "open", True)
    assert main(["circuits", "close", "pay.v1", "--db", url, "--actor", "alice", "--format", "json"]) == 0
    [row] = rows(capsys.readouterr().out)
    assert (row["state"], row["forced"]) == ("closed", False)
    with Store(url) as s:
        assert [a["actor"] for a in s.list_audit(action="set_circuit").items] == ["alice", "alice"]
    code = main(["circuits", "half", "pay.v1", "--db", url])
    assert code == 2


def test_workers_ls_and_set(tmp_path, capsys):
    """`chokaq workers ls|set`: a registered worker listed; its concurrency target set, audited."""
    from chokaq_ops.storage import Store
    from chokaq_ops.storage.migrate import migrate

    url = f"sqlite:///{tmp_path / 'w.db'}"
    with Store(url) as s:
        migrate(s)
        s.worker_register("w1", host="box", pid=42, queues=["mail"], concurrency=8, running=3, prefetched=0)
    assert main(["workers", "ls", "--db", url, "--format", "json"]) == 0
    [row] = rows(capsys.readouterr().out)
    assert (row["worker_id"], row["host"], row["concurrency"], row["alive"]) == ("w1", "box", 8, True)
    args = ["workers", "set", "w1", "--concurrency", "2", "--db", url, "--actor", "bob", "--format", "json"]
    assert main(args) == 0
    [row] = rows(capsys.readouterr().out)
    assert row["desired_concurrency"] == 2
    with Store(url) as s:
        assert [a["actor"] for a in s.list_audit(action="set_worker").items] == ["bob"]
    for bad in (["--concurrency", "0"], ["--concurrency", "x"]):
        code = main(["workers", "set", "w1", *bad, "--db", url])
        assert code == 2
    assert main(["workers", "set", "nobody", "--concurrency", "3", "--db", url, "--actor", "bob"]) != 0


def test_dlq_resurrect_spread_jitters_due_times(capsys, store, db_url) -> None:
    """`chokaq dlq resurrect --spread 60s`: the plan's jobs are due over the next minute, not all at once."""
    seed_dlq(store, 200, queue="spread", reason=FailureReason.Zombie)
    start = store.now()
    code, out, _ = chokaq(
        capsys, db_url, "dlq", "resurrect", "--queue", "spread", "--spread", "60s", "--format", "json"
    )
    assert code == 0 and final(out)["resurrected"] == 200  # JSON lines; summary last
    due = [
        (j["due_at"] - start).total_seconds()
        for j in store.list_hot(HotFilter(queue="spread"), page_size=500).items
    ]
    assert len(due) == 200 and max(due) > 45 and min(due) >= 0 and max(due) <= 61
    code = main(["dlq", "resurrect", "--queue", "spread", "--spread", "soon", "--db", db_url])
    assert code == 2
