"""A SIGKILLed worker's prefetched jobs come back within Health.WorkerHeartbeatTimeout of its last registry
beat (shortened to 2 s here), not after Recovery.FetchedJobTimeout (10 minutes here); its running jobs show
as "worker gone" but reach the DLQ only by the zombie rule. Real `chokaq worker` processes, both
databases."""

from __future__ import annotations

import time

import pytest

from chokaq_api import create_app
from chokaq_ops.models import Actor
from chokaq_ops.settings import Settings
from crash.procs import FAST, starts, wait_for, write_config
from crash.test_crash_kill import hot, two_running_four_prefetched
from tests.api.conftest import ApiClient

pytestmark = pytest.mark.slow


def test_sigkill_returns_prefetched_jobs_in_seconds_with_attempts_unchanged(store, db_url, tmp_path, spawn):
    config = write_config(
        tmp_path / "chokaq.toml",
        Worker={**FAST["Worker"], "Prefetch": 10, "FetchBatchSize": 10},
        Recovery={**FAST["Recovery"], "FetchedJobTimeout": "10m", "ProcessingZombieTimeout": "10m"},
        Health={"WorkerHeartbeatTimeout": "2s"},
    )
    _, w1 = two_running_four_prefetched(store, db_url, config, tmp_path, spawn)
    running = sorted(r["id"] for r in hot(store, "processing"))
    waiting = sorted(r["id"] for r in hot(store, "fetched"))
    assert all(store.get_job(i)["attempt_count"] == 0 for i in waiting)
    w1.kill()
    killed = time.monotonic()

    (tmp_path / "release").touch()  # crash.block returns at once from now on
    spawn(db_url, config, "w2", concurrency=2)  # its sweep runs every 0.5 s
    wait_for(
        lambda: all(store.get_job(i)["location"] == "archive" for i in waiting),
        20,
        "the prefetched jobs run on w2",
    )
    took = time.monotonic() - killed
    assert took < 15, took  # 2 s of silence, a sweep, a claim: seconds, not FetchedJobTimeout's 10 minutes
    for i in waiting:
        job = store.get_job(i)
        assert (job["worker_id"], job["attempt_count"]) == ("w2", 1)  # ran once, on w2: no attempt lost
        assert starts(tmp_path)[i] == 1

    # The dead worker's running jobs stay processing (the zombie rule decides), shown as "worker gone".
    settings = Settings().with_overrides({"storage.url": db_url, "health.worker_heartbeat_timeout": 2})
    client = ApiClient(
        create_app(settings, store=store), {"reader": store.create_token("r", "reader", actor=Actor("t"))}
    )
    for i in running:
        r = client.get(f"/jobs/{i}", role="reader").json
        assert (r["status"], r["worker_id"], r["worker_gone"]) == ("processing", "w1", True)
    listed = {j["id"]: j["worker_gone"] for j in client.get("/jobs", role="reader").json}
    assert all(listed[i] for i in running)
    assert [w["alive"] for w in client.get("/workers", role="reader").json if w["worker_id"] == "w1"] == [
        False
    ]
    assert [w["alive"] for w in client.get("/workers", role="reader").json if w["worker_id"] == "w2"] == [
        True
    ]
