"""Claim-and-start keeps the line between fetched and processing: a job is processing only once an
execution slot was free for it, so a dead worker leaves as zombies only jobs whose user code started.
Lost replies of claims and of finishing writes are recovered without false zombies or false conflicts."""

from __future__ import annotations

import json
import time

import pytest

from chokaq_ops.engine.handlers import Registry
from chokaq_ops.engine.hosting import Host
from chokaq_ops.models import FailureReason, NewJob
from chokaq_ops.settings import Settings
from chokaq_ops.storage import Store
from chokaq_ops.storage.worker_ops import Dead, Retry
from crash.procs import executions, run_rescue, starts, wait_for, write_config
from crash.support import assert_one_table_each, counts, enqueue, processing
from crash.test_faults_lost_reply import lose_next_reply, lose_reply_of, lost_reply  # noqa: F401 - fixtures


def test_a_claim_whose_reply_was_lost_is_recovered_not_left_to_become_zombies(store, lose_next_reply):  # noqa: F811
    ids = enqueue(store, 6)
    assert store.fetch("w", 0) == []  # a worker's first claim finds its lanes first (PostgreSQL)
    lose_next_reply()
    rows = store.fetch("w", 3, start=2)  # attempt 1 commits and its reply is lost; attempt 2 claims again
    assert len(rows) == 3 and store.claims_uncertain("w")
    lost = store.recover_claims("w", [r["id"] for r in rows])
    assert len(lost) == 3 and not store.claims_uncertain("w")
    assert sorted(r["id"] for r in rows + lost) == ids
    # The lost claim had started two jobs that never ran: they are fetched again, attempts untouched.
    assert {(r["status"], r["attempt_count"]) for r in lost} == {("fetched", 0)}
    marked = store.mark_processing("w", [r["id"] for r in lost])
    assert {m["attempt_count"] for m in marked.values()} == {1}


def _settings(url: str) -> Settings:
    return Settings().with_overrides(
        {
            "storage.url": url,
            "worker.polling_interval": 0.05,
            "execution.heartbeat_interval_min": 0.1,
            "execution.heartbeat_interval_max": 0.15,
        }
    )


def _drain(store: Store, ids: list[str], registry: Registry) -> Host:
    host = Host(_settings(store.url), store, registry=registry, run_rescue=False, run_retention=False)
    host.start()
    try:
        wait_for(lambda: counts(store)["archive"] == len(ids), 20, "every job archived")
    finally:
        host.shutdown(grace=5)
    return host


def test_a_worker_runs_the_jobs_of_a_claim_it_gave_up_on(store, db_url):
    """The claim commits, the reply is lost and the store gives up (no retries left): the worker's next
    turn finds the claim's rows under its id and runs each once; none is left for the sweep."""
    ran: list[tuple[str, int]] = []
    registry = Registry()
    registry.job("t")(lambda payload, ctx: ran.append((ctx.job_id, ctx.attempt)))
    ids = enqueue(store, 5)
    with Store(db_url, pool_size=4, max_transient_retries=0) as impatient:
        original = impatient.dialect.rows
        armed = {"on": True}

        def rows(cursor):
            got = original(cursor)
            if armed["on"] and got and "started_at" in got[0] and "status" in got[0]:  # a claim's rows
                armed["on"] = False
                raise lost_reply(impatient)
            return got

        impatient.dialect.rows = rows
        host = _drain(impatient, ids, registry)
        assert not armed["on"]  # the fault did happen
    assert sorted(ran) == [(i, 1) for i in ids]  # each job ran once, as its first attempt
    assert host.worker.counts["conflicts"] == 0 and host.worker.counts["fetch_errors"] == 1
    assert counts(store)["dlq"] == 0 and counts(store)["hot"] == 0


def test_a_finish_whose_reply_was_lost_counts_as_applied(store, lose_next_reply):  # noqa: F811
    ok, dead, retry = (processing(store, "w", 1, prefix=p) for p in ("ok", "dead", "retry"))
    lose_next_reply()
    assert store.archive_succeeded("w", [(ok[0], 1.0)]) == ok  # retried: found archived by this worker
    lose_next_reply()
    assert store.move_to_dlq("w", [Dead(dead[0], FailureReason.Fatal, "boom")]) == dead
    lose_next_reply()
    assert store.reschedule("w", [Retry(retry[0], 60.0, "again")]) == retry
    assert counts(store)["archive"] == 1 and counts(store)["dlq"] == 1
    assert store.get_job(retry[0])["status"] == "pending"
    # Without a lost reply a finish found done is a conflict as before: nothing reports it applied.
    assert store.archive_succeeded("w", [(ok[0], 1.0)]) == []
    assert store.move_to_dlq("w2", [Dead(retry[0], FailureReason.Fatal, "x")]) == []


def test_a_worker_counts_a_finish_whose_reply_was_lost_as_succeeded(store, db_url):
    registry = Registry()
    registry.job("t")(lambda payload, ctx: None)
    ids = enqueue(store, 4)
    with Store(db_url, pool_size=4) as lossy:
        original = lossy.dialect.rows
        armed = {"on": True}

        def rows(cursor):
            got = original(cursor)
            if armed["on"] and got and set(got[0]) - {"twin"} == {"id", "queue"}:  # archive_succeeded's rows
                armed["on"] = False
                raise lost_reply(lossy)
            return got

        lossy.dialect.rows = rows
        host = _drain(lossy, ids, registry)
        assert not armed["on"]
    assert host.worker.counts["succeeded"] == 4 and host.worker.counts["conflicts"] == 0
    registry_ = host.metrics.registry
    conflicts = {"transition": "archive_succeeded"}
    assert registry_.get_sample_value("chokaq_jobs_state_transition_conflicts_total", conflicts) is None
    succeeded = registry_.get_sample_value("chokaq_jobs_succeeded_total", {"queue": "default", "type": "t"})
    assert succeeded == 4


@pytest.mark.slow
def test_sigkill_with_more_fast_jobs_than_slots_leaves_only_started_jobs_processing(
    store, db_url, tmp_path, spawn
):
    """Fast jobs, four slots, hundreds waiting. Every slot is then held in user code and the worker is
    killed: a worker that marked jobs processing ahead of free slots leaves some that never ran, which
    the sweep would dead-letter as zombies. Here every zombie ran, and every job that never ran is back
    in pending with its attempts untouched."""
    config = write_config(tmp_path / "chokaq.toml")
    # Far more jobs than run before the hold is set: with 400, a test process descheduled between its
    # polls once saw all but three of them start first (CI, 2026-12-05), and fewer than four were held.
    ids = [f"f{i:04d}" for i in range(1500)]
    store.enqueue([NewJob(type="crash.fastgate", id=i, payload="{}") for i in ids])
    w1 = spawn(db_url, config, "w1", concurrency=4)
    wait_for(lambda: len(starts(tmp_path)) >= 80, 30, "fast jobs under way", interval=0.01)
    (tmp_path / "hold").touch()

    def held() -> set[str]:
        return {j for event, j, _, _ in executions(tmp_path) if event == "hold"}

    # 30 s like the other waits: 10 s ran out once in a full CI run.
    wait_for(lambda: len(held()) == 4, 30, "every slot held in user code")
    time.sleep(0.3)  # a worker that starts jobs ahead of free slots would do it now
    w1.kill()
    hot = [store.get_job(i) for i in ids if store.get_job(i)["location"] == "hot"]
    last = max(j["heartbeat_at"] or j["updated_at"] for j in hot if j["status"] != "pending")
    wait_for(lambda: (store.now() - last).total_seconds() > 2.3, 10, "the zombie and fetched timeouts")
    run_rescue(db_url, config, tmp_path)

    ran = starts(tmp_path)
    where = assert_one_table_each(store, ids)
    zombies = []
    for job_id in ids:
        job = store.get_job(job_id)
        if where[job_id] == ["dlq"]:
            assert job["failure_reason"] == "Zombie" and ran[job_id] == 1, job
            zombies.append(job_id)
        elif where[job_id] == ["archive"]:
            assert ran[job_id] == 1 and job["attempt_count"] == 1
        else:
            assert ran[job_id] == 0, job  # never reached user code...
            assert (job["status"], job["attempt_count"], job["worker_id"]) == ("pending", 0, None)
    assert held() <= set(zombies)
    print(f"\n{sum(ran.values())} ran, {len(zombies)} zombies (all started), {json.dumps(counts(store))}")
