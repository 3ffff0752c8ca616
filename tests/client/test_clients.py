"""connect() and the two clients: one scenario, run through DbClient and through HttpClient, gives the same
answers (the proof that notebooks and scripts do not care which one they hold)."""

from __future__ import annotations

import time

import pandas as pd
import pytest

from chokaq_ops import connect, errors
from chokaq_ops.client import DbClient, HttpClient
from chokaq_ops.models import FailureReason
from chokaq_ops.records import DeadJob
from tests.support.seeds import seed_archive, seed_dlq, seed_hot


def test_one_scenario_through_either_client(any_client, store) -> None:
    c = any_client
    dead = seed_dlq(
        store, 5, queue="billing", payload=lambda i: f'{{"order": {i},}}', reason=FailureReason.Fatal
    )
    seed_dlq(store, 3, queue="media", type="media.resize.v1", reason=FailureReason.Zombie)
    pending = seed_hot(store, 3)
    seed_archive(store, 2)

    job = c.get_job(dead[0])
    assert isinstance(job, DeadJob)  # the same record over the database and over the API
    assert job["location"] == "dlq" and job["failure_reason"] == "Fatal"
    assert job["failed_at"].tzinfo is not None
    preview = c.preview(reason="Zombie")
    assert (preview["matched"], preview["by_queue"]) == (3, {"media": 3})
    assert c.preview(dead[:2])["matched"] == 2
    summary = c.summary()
    assert summary["total"] == 8 and {e["value"] for e in summary["by_reason"]} == {"Fatal", "Zombie"}

    edited = c.edit(dead[0], payload={"order": 0})
    assert isinstance(edited, DeadJob) and edited.payload == '{"order":0}'
    with pytest.raises(errors.ValidationError):
        c.edit(dead[1], priority=3)  # a dead job's priority is set when it comes back
    assert c.edit(pending[0], priority=7)["priority"] == 7

    assert c.resurrect([dead[0]]) == {"resurrected": 1, "batches": 1}
    assert c.resurrect(reason="Zombie", max_jobs=2)["resurrected"] == 2
    assert c.purge([dead[1]]) == {"purged": 1, "batches": 1}
    result = c.cancel(pending)
    assert sorted(result["cancelled"]) == sorted(pending) and result["skipped"] == []
    time.sleep(0.01)  # the archive rows finished strictly before the cutoff (SQLite keeps milliseconds)
    with pytest.raises(errors.ValidationError):
        c.purge_archive(pd.Timestamp.now(tz="UTC") + pd.Timedelta(hours=1))  # a cutoff in the future
    cutoff = store.now()
    purged = c.purge_archive(cutoff)
    assert (purged["purged"], purged["batches"], purged["cutoff"]) == (2, 1, cutoff)

    assert c.pause("media")["paused"] is True
    assert c.resume("media")["paused"] is False
    assert c.set_queue("media", max_workers=3, zombie_timeout_seconds=600)["max_workers"] == 3
    assert c.set_queue("media", max_workers=None)["max_workers"] is None
    queues = c.queues()
    assert {"name", "paused", "pending", "max_lag_seconds"} <= set(queues.columns)
    assert queues.set_index("name").loc["media", "zombie_timeout_seconds"] == 600
    assert c.queue("media")["name"] == "media"
    stats = c.stats()
    assert (stats["dlq"], stats["hot"], stats["archive"]) == (1 + 3 + 3, 3, 0)

    audit = c.audit()
    assert list(audit.columns) == ["id", "at", "actor", "action", "job_id", "plan_id", "count", "details"]
    assert set(audit["actor"]) <= {"admin-token", "setup"}  # setup: the API test's token creation
    assert {
        "edit_dlq",
        "edit_pending",
        "resurrect",
        "purge_dlq",
        "cancel",
        "purge_archive",
        "set_queue",
    } <= set(audit["action"])
    assert str(audit["at"].dtype) == "datetime64[us, UTC]" or isinstance(
        audit["at"].dtype, pd.DatetimeTZDtype
    )
    assert len(c.audit(job_id=dead[0])) == 2 and len(c.audit(action="cancel")) == 3
    assert len(c.audit(limit=2)) == 2


def test_connect_resolves_its_target(store, db_url, monkeypatch, tmp_path) -> None:
    for name in ("CHOKAQ_API_URL", "CHOKAQ_API_TOKEN", "CHOKAQ_DB", "CHOKAQ_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no chokaq.toml here
    assert isinstance(connect(store), DbClient)
    with connect(db_url, actor="x") as client:
        assert isinstance(client, DbClient) and client.actor == "x"
    monkeypatch.setenv("CHOKAQ_DB", db_url)
    with connect() as client:
        assert isinstance(client, DbClient) and client.store.url == db_url
    monkeypatch.setenv("CHOKAQ_API_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("CHOKAQ_API_TOKEN", "chq_x")
    remote = connect()
    assert isinstance(remote, HttpClient) and remote.base_url == "http://127.0.0.1:9/api/v1"
    monkeypatch.delenv("CHOKAQ_API_TOKEN")
    with pytest.raises(errors.ValidationError) as bad:
        connect("https://chokaq.example")
    assert bad.value.field == "token"
    with pytest.raises(errors.ValidationError):
        connect(42)
