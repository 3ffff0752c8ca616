"""The rescue sweep against a real Store on SQLite and PostgreSQL: the two phases, per-queue timeouts, the
lease, the event / log / metrics of a sweep, failure handling. Times are aged on the database clock."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from crash.support import age, assert_one_table_each, counts, events, fetched, processing, sql

from chokaq_ops import errors
from chokaq_ops.engine.metrics import Metrics
from chokaq_ops.engine.rescue import ZOMBIE_FINGERPRINT, DbWatch, RescueError, Rescuer, sweep_now
from chokaq_ops.models import Actor
from chokaq_ops.settings import Settings
from tests.support.dbprobe import ago_expr

HB = {"execution.heartbeat_interval_min": 0.2, "execution.heartbeat_interval_max": 0.3}


def make_settings(fetched_s: float = 600, zombie_s: float = 600, **more: object) -> Settings:
    return Settings().with_overrides(
        {
            **HB,
            "recovery.fetched_job_timeout": fetched_s,
            "recovery.processing_zombie_timeout": zombie_s,
            "recovery.scan_interval": 60,
            **more,
        }
    )


def metric(m: Metrics, name: str) -> float:
    return m.registry.get_sample_value(name) or 0.0


def rescue_events(store) -> list[dict]:
    return events(store, "rescue")


# ------------------------------------------------------------------------------------ phases


def test_short_processing_timeout_never_reclaims_fetched_jobs(store):
    waiting = fetched(store, "w1", 3, prefix="f")
    running = processing(store, "w1", 2, prefix="p")
    age(store, "jobs_hot", waiting + running, 30, "updated_at", "heartbeat_at")
    report = Rescuer(store, make_settings(fetched_s=600, zombie_s=10)).run()
    assert report.recovered == 0 and sorted(report.archived_ids) == sorted(running)
    for job_id in waiting:  # a prefetched job waiting for a slot is healthy, however long it waits
        job = store.get_job(job_id)
        assert (job["location"], job["status"], job["worker_id"]) == ("hot", "fetched", "w1")


def test_short_fetched_timeout_never_touches_processing_jobs(store):
    waiting = fetched(store, "w1", 3, prefix="f")
    running = processing(store, "w1", 2, prefix="p")
    age(store, "jobs_hot", waiting + running, 30, "updated_at", "heartbeat_at")
    report = Rescuer(store, make_settings(fetched_s=10, zombie_s=600)).run()
    assert report.archived == 0 and sorted(report.recovered_ids) == sorted(waiting)
    for job_id in running:
        assert store.get_job(job_id)["status"] == "processing"


def test_recovered_job_is_pending_with_attempts_unchanged_and_another_worker_takes_it(store):
    [job_id] = fetched(store, "dead-worker", 1)
    age(store, "jobs_hot", [job_id], 30, "updated_at")
    before = counts(store)
    assert Rescuer(store, make_settings(fetched_s=10)).run().recovered_ids == [job_id]
    job = store.get_job(job_id)
    assert (job["status"], job["worker_id"], job["attempt_count"]) == ("pending", None, 0)
    assert counts(store) == before  # a recovery is not a failure nor a retry
    assert [r["id"] for r in store.fetch("w2", 10)] == [job_id]
    assert store.mark_processing("w2", [job_id])[job_id]["attempt_count"] == 1
    assert store.archive_succeeded("w2", [(job_id, 1.0)]) == [job_id]


def test_fresh_rows_are_left_alone(store):
    fetched(store, "w1", 2, prefix="f")
    processing(store, "w1", 2, prefix="p")
    report = Rescuer(store, make_settings(fetched_s=10, zombie_s=10)).run()
    assert (report.recovered, report.archived) == (0, 0)


def test_zombie_goes_to_dlq_with_heartbeat_worker_and_runtime(store):
    [job_id] = processing(store, "host-a:123", 1)
    age(store, "jobs_hot", [job_id], 100, "started_at")
    age(store, "jobs_hot", [job_id], 40, "heartbeat_at", "updated_at")  # ran 60 s, then went silent
    hot_before = store.get_job(job_id)
    before = counts(store)
    report = Rescuer(store, make_settings(zombie_s=30)).run()
    assert report.archived_ids == [job_id]
    dead = store.get_job(job_id)
    assert dead["location"] == "dlq" and dead["failure_reason"] == "Zombie"
    assert dead["worker_id"] == "host-a:123" and dead["attempt_count"] == 1
    assert dead["heartbeat_at"] == hot_before["heartbeat_at"]  # the evidence is kept in a column too
    assert dead["fingerprint"] == ZOMBIE_FINGERPRINT
    err = dead["error_details"]
    assert err.startswith("Zombie detected: heartbeat expired")
    assert hot_before["heartbeat_at"].strftime("%Y-%m-%dT%H:%M:%S") in err
    assert "worker host-a:123" in err and "runtime 60" in err
    assert dead["duration_ms"] == pytest.approx(60_000, abs=1000)
    after = counts(store)
    assert after["failed_total"] == before["failed_total"] + 1
    assert after["archive"] == 0 and after["hot"] == 0
    assert_one_table_each(store, [job_id])


def test_a_late_success_after_rescue_writes_no_archive_row(store):
    [job_id] = processing(store, "w1", 1)
    age(store, "jobs_hot", [job_id], 40, "heartbeat_at", "updated_at")
    Rescuer(store, make_settings(zombie_s=30)).run()
    assert store.archive_succeeded("w1", [(job_id, 5.0)]) == []  # fenced: the worker lost the job
    assert store.heartbeat("w1", [job_id]) == set()
    assert counts(store)["archive"] == 0 and store.get_job(job_id)["location"] == "dlq"


# ------------------------------------------------------------------------------------ per-queue timeouts


def test_per_queue_timeouts_from_the_queue_row_and_from_configuration(store):
    store.set_queue("sms", actor=Actor("t"), zombie_timeout_seconds=20)
    settings = make_settings(zombie_s=600, **{"queues.reports.zombie_timeout_seconds": 50})
    sms = processing(store, "w", 2, queue="sms", prefix="s")
    reports = processing(store, "w", 2, queue="reports", prefix="r")
    other = processing(store, "w", 2, queue="default", prefix="d")
    age(store, "jobs_hot", [sms[0], reports[0], other[0]], 30, "heartbeat_at", "updated_at")
    age(store, "jobs_hot", [sms[1], reports[1], other[1]], 70, "heartbeat_at", "updated_at")
    report = Rescuer(store, settings).run()
    # sms: row says 20 s (both dead); reports: config says 50 s (only the 70 s one); default: 600 s.
    assert sorted(report.archived_ids) == sorted([*sms, reports[1]])


def test_the_queue_row_wins_over_configuration(store):
    store.set_queue("sms", actor=Actor("t"), zombie_timeout_seconds=100)
    settings = make_settings(zombie_s=600, **{"queues.sms.zombie_timeout_seconds": 10})
    ids = processing(store, "w", 1, queue="sms")
    age(store, "jobs_hot", ids, 50, "heartbeat_at", "updated_at")
    rescuer = Rescuer(store, settings)
    assert rescuer.run().archived == 0
    store.set_queue("sms", actor=Actor("t"), zombie_timeout_seconds=None)  # cleared: config applies
    assert rescuer.run().archived_ids == ids


def test_a_processing_row_without_heartbeat_is_judged_by_its_last_update(store):
    ids = processing(store, "w", 2)
    sql(store, "UPDATE jobs_hot SET heartbeat_at = NULL")
    age(store, "jobs_hot", ids[:1], 40, "updated_at")
    report = Rescuer(store, make_settings(zombie_s=30)).run()
    assert report.archived_ids == ids[:1]
    assert "last heartbeat never" in store.get_job(ids[0])["error_details"]


# ------------------------------------------------------------------------------------ lease


def test_lease_lets_one_rescuer_sweep_per_interval(store):
    settings = make_settings(zombie_s=30, **{"recovery.scan_interval": 1})
    a, b = Rescuer(store, settings, holder="a"), Rescuer(store, settings, holder="b")
    assert a.run() is not None
    assert b.run() is None  # a holds it for 0.9 s
    assert a.run() is not None  # the holder renews
    age_lease(store, 5)  # the interval passed
    assert b.run() is not None
    assert a.run() is None
    assert a.sweeps == 2 and b.sweeps == 1


def age_lease(store, seconds: float) -> None:
    sql(store, f"UPDATE leases SET expires_at = {ago_expr(store)}", seconds)


def test_without_the_lease_both_rescuers_sweep_harmlessly(store):
    settings = make_settings(zombie_s=30, **{"recovery.lease": False})
    ids = processing(store, "w", 5)
    age(store, "jobs_hot", ids, 40, "heartbeat_at", "updated_at")
    a, b = Rescuer(store, settings, holder="a"), Rescuer(store, settings, holder="b")
    first, second = a.run(), b.run()
    assert sorted(first.archived_ids) == sorted(ids) and second.archived == 0
    assert counts(store)["failed_total"] == 5 and counts(store)["dlq"] == 5
    assert sql(store, "SELECT count(*) FROM leases")[0][0] == 0


def test_forced_run_ignores_the_lease(store):
    settings = make_settings(zombie_s=30)
    assert store.try_lease("rescue", "someone-else", 60)
    assert Rescuer(store, settings).run() is None
    assert Rescuer(store, settings).run(force=True) is not None
    assert sweep_now(store, settings).archived == 0


# ------------------------------------------------------------------------------------ event, log, metrics


def test_a_sweep_that_changed_something_logs_writes_one_event_and_counts(store, caplog):
    settings = make_settings(fetched_s=10, zombie_s=30)
    waiting = fetched(store, "w1", 2, prefix="f")
    running = processing(store, "w2", 3, prefix="p")
    age(store, "jobs_hot", waiting + running, 40, "updated_at", "heartbeat_at")
    metrics = Metrics()
    with caplog.at_level(logging.WARNING, logger="chokaq.rescue"):
        Rescuer(store, settings, metrics).run()
    lines = [r for r in caplog.records if r.name == "chokaq.rescue"]
    assert [(r.levelno, r.getMessage()) for r in lines] == [
        (logging.WARNING, "ZombieRescue: recovered 2 abandoned, archived 3 zombies")
    ]
    [event] = rescue_events(store)
    assert event["message"] == "ZombieRescue: recovered 2 abandoned, archived 3 zombies"
    data = event["data"]
    assert (data["recovered"], data["archived"]) == (2, 3)
    assert sorted(data["recovered_ids"]) == sorted(waiting) and sorted(data["archived_ids"]) == sorted(
        running
    )
    assert {z["worker_id"] for z in data["zombies"]} == {"w2"}
    assert metric(metrics, "chokaq_rescue_recovered_total") == 2
    assert metric(metrics, "chokaq_rescue_zombies_total") == 3


def test_a_sweep_that_changed_nothing_is_silent(store, caplog):
    processing(store, "w", 2)
    metrics = Metrics()
    with caplog.at_level(logging.DEBUG, logger="chokaq.rescue"):
        report = Rescuer(store, make_settings(fetched_s=10, zombie_s=30), metrics).run()
    assert (report.recovered, report.archived) == (0, 0)
    assert [r for r in caplog.records if r.levelno >= logging.INFO] == []
    assert rescue_events(store) == []
    assert metric(metrics, "chokaq_rescue_recovered_total") == 0
    assert metric(metrics, "chokaq_rescue_zombies_total") == 0


# ------------------------------------------------------------------------------------ failures


def test_a_failing_sweep_is_logged_counted_and_the_next_one_runs(store, caplog):
    settings = make_settings(zombie_s=30)
    ids = processing(store, "w", 2)
    age(store, "jobs_hot", ids, 40, "heartbeat_at", "updated_at")
    metrics = Metrics()
    rescuer = Rescuer(store, settings, metrics)
    sql(store, "ALTER TABLE jobs_dlq RENAME TO jobs_dlq_away")  # a real database failure in phase 2
    try:
        with caplog.at_level(logging.ERROR, logger="chokaq.rescue"):
            assert rescuer.run() is None  # no exception reaches the scheduler
    finally:
        sql(store, "ALTER TABLE jobs_dlq_away RENAME TO jobs_dlq")
    assert any("ZombieRescue sweep failed" in r.getMessage() for r in caplog.records)
    assert metric(metrics, "chokaq_rescue_failures_total") == 1
    assert "archive_zombies" in rescuer.last_error
    assert {store.get_job(i)["status"] for i in ids} == {"processing"}  # the failed move changed nothing
    report = rescuer.run()  # the schedule goes on
    assert sorted(report.archived_ids) == sorted(ids) and rescuer.last_error is None


def test_one_failing_phase_does_not_stop_the_other(store):
    settings = make_settings(fetched_s=10, zombie_s=30)
    waiting = fetched(store, "w", 2)
    age(store, "jobs_hot", waiting, 40, "updated_at")
    sql(store, "ALTER TABLE jobs_dlq RENAME TO jobs_dlq_away")
    try:
        with pytest.raises(RescueError, match="archive_zombies"):
            sweep_now(store, settings)  # the forced sweep (API, CLI) reports the failure
    finally:
        sql(store, "ALTER TABLE jobs_dlq_away RENAME TO jobs_dlq")
    assert {store.get_job(i)["status"] for i in waiting} == {"pending"}
    [event] = rescue_events(store)  # what phase 1 did is committed and announced
    assert event["message"] == "ZombieRescue: recovered 2 abandoned, archived 0 zombies"


def test_a_lease_failure_is_a_failed_sweep_not_an_exception(store):
    metrics = Metrics()
    rescuer = Rescuer(store, make_settings(), metrics)
    sql(store, "ALTER TABLE leases RENAME TO leases_away")
    try:
        assert rescuer.run() is None
    finally:
        sql(store, "ALTER TABLE leases_away RENAME TO leases")
    assert metric(metrics, "chokaq_rescue_failures_total") == 1
    assert rescuer.run() is not None


# ------------------------------------------------------------------------------------ concurrency


def test_concurrent_sweeps_move_each_zombie_exactly_once(store):
    settings = make_settings(fetched_s=10, zombie_s=30, **{"recovery.lease": False})
    zombies = processing(store, "w", 300, prefix="z")
    waiting = fetched(store, "w", 100, prefix="f")
    age(store, "jobs_hot", zombies + waiting, 40, "heartbeat_at", "updated_at")
    rescuers = [Rescuer(store, settings, holder=f"r{i}") for i in range(4)]
    barrier = threading.Barrier(len(rescuers))

    def sweep(r: Rescuer):
        barrier.wait()
        return r.sweep()

    with ThreadPoolExecutor(len(rescuers)) as pool:
        reports = list(pool.map(sweep, rescuers))
    archived = [i for r in reports for i in r.archived_ids]
    recovered = [i for r in reports for i in r.recovered_ids]
    assert sorted(archived) == sorted(zombies)  # each exactly once, whoever got it
    assert sorted(recovered) == sorted(waiting)
    c = counts(store)
    assert (c["dlq"], c["failed_total"], c["hot"]) == (300, 300, 100)
    assert_one_table_each(store, zombies + waiting)


@pytest.mark.postgres_only
def test_postgres_sweep_skips_rows_another_transaction_holds(pg_url):
    from chokaq_ops.storage import Store
    from chokaq_ops.storage.dialects import from_url

    with Store(pg_url, pool_size=4) as store:
        ids = processing(store, "w", 3)
        age(store, "jobs_hot", ids, 40, "heartbeat_at", "updated_at")
        locker = from_url(pg_url).connect()
        try:
            locker.autocommit = False
            cur = locker.cursor()
            cur.execute("SELECT id FROM jobs_hot WHERE id = ? FOR UPDATE", ids[0])
            with ThreadPoolExecutor(1) as pool:  # a blocked sweep would hang here, not fail
                report = pool.submit(Rescuer(store, make_settings(zombie_s=30)).sweep).result(timeout=20)
            assert sorted(report.archived_ids) == sorted(ids[1:])  # SKIP LOCKED: passed over, not waited on
            locker.commit()
        finally:
            locker.close()
        assert Rescuer(store, make_settings(zombie_s=30)).sweep().archived_ids == ids[:1]
        assert counts(store)["failed_total"] == 3


# ------------------------------------------------------------------------------------ outages


class FakeClock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class Unreachable:
    """Stands for the store while the database cannot be reached."""

    def now(self):
        raise errors.TransientStorageError("could not connect to server")


def _probe_at(watch: DbWatch, clock: FakeClock, *times: float) -> None:
    for t in times:
        clock.t = t
        assert watch.probe()


def test_the_zombie_phase_waits_after_an_outage_until_workers_could_heartbeat(store):
    """Heartbeats 0.2-0.3 s: after an outage the sweeper needs 0.6 s (2 x the maximum) of unbroken sight
    of the database before it judges heartbeat ages; phase 1 is never held."""
    settings = make_settings(fetched_s=10, zombie_s=10)
    clock = FakeClock(1000.0)
    watch = DbWatch(store, clock=clock)
    rescuer = Rescuer(store, settings, watch=watch)
    running = processing(store, "w1", 2, prefix="z")
    waiting = fetched(store, "w1", 1, prefix="f")
    age(store, "jobs_hot", running + waiting, 30, "updated_at", "heartbeat_at")

    report = rescuer.run()  # never saw the database yet: a fresh sweeper waits too
    assert (report.recovered, report.archived, rescuer.held) == (1, 0, 1)
    _probe_at(watch, clock, 1000.0, 1000.2, 1000.4)
    assert rescuer.run().archived == 0 and rescuer.held == 2

    watch.store = Unreachable()  # an outage breaks the stretch
    clock.t = 1000.6
    assert not watch.probe()
    watch.store = store
    _probe_at(watch, clock, 1000.8, 1001.0, 1001.2)
    assert rescuer.run().archived == 0 and watch.breaks == 1
    _probe_at(watch, clock, 1001.4)
    assert sorted(rescuer.run().archived_ids) == sorted(running)


def test_a_stall_between_probes_breaks_the_stretch(store):
    clock = FakeClock(0.0)
    watch = DbWatch(store, clock=clock)
    _probe_at(watch, clock, 0.0, 1.0, 2.0)
    assert watch.seen_for() == 0.0 + 2.0
    clock.t = 6.0  # this process stood still (SIGSTOP, a frozen VM): no probe for 4 s
    assert watch.seen_for() == 0.0
    _probe_at(watch, clock, 6.0)
    assert watch.seen_for() == 0.0 and watch.breaks == 1
    _probe_at(watch, clock, 7.0)
    assert watch.seen_for() == 1.0


def test_a_zombie_decision_the_server_runs_late_moves_nothing(store):
    """A server paused right after the sweep decided runs the statement when it resumes, when the
    workers it kept from heartbeating look dead: the statement carries its decision time and expires."""
    running = processing(store, "w1", 2, prefix="z")
    age(store, "jobs_hot", running, 30, "updated_at", "heartbeat_at")
    assert store.archive_zombies(10, within=-1.0) == []  # run a second past its decision's expiry
    assert counts(store)["hot"] == 2
    moved = store.archive_zombies(10, within=60.0)
    assert sorted(r["id"] for r in moved) == sorted(running)
