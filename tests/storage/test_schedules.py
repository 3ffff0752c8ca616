"""Recurring schedules in storage (chokaq_ops/storage/schedule_ops.py), on SQLite and PostgreSQL: definitions
audited in their transaction, bad input refused naming the field with no row written, code declarations,
and firing: one job per tick with its ledger row, even when the tick's job left the hot table and a
second attempt comes along."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from storage_factories import OPS, scalar, sql

from chokaq_ops import cron, errors
from chokaq_ops.models import Actor, FailureReason
from chokaq_ops.records import ScheduleRecord, ScheduleRun
from chokaq_ops.schedules import Schedule, TickPlan, plan_ticks
from chokaq_ops.storage import Dead, Store

EVERY_SECOND = {"name": "beat", "type": "beat.v1", "cron": "* * * * * *", "queue": "sched"}


def audit_rows(store: Store) -> list[tuple[str, str, dict]]:
    rows = sql(store, "SELECT actor, action, details FROM audit_log ORDER BY id")
    return [(a, b, json.loads(d) if d else None) for a, b, d in rows]


def ledger(store: Store, name: str = "beat") -> list[tuple]:
    return sql(
        store,
        "SELECT tick_at, kind, late, job_id FROM schedule_runs WHERE schedule = ? ORDER BY tick_at",
        name,
    )


def plan_now(store: Store, name: str = "beat", grace_s: float = 60.0) -> tuple[dict, TickPlan]:
    """The due row of `name` and its plan on the database clock, as the engine's check makes it."""
    sql(store, "UPDATE schedules SET next_run_at = " + _ago(store) + " WHERE name = ?", 3, name)
    row = next(r for r in store.due_schedules() if r["name"] == name)
    expression = cron.parse(row["cron"], row["tz"])
    return row, plan_ticks(
        expression,
        row["next_run_at"],
        row["now_at"],
        misfire=row["misfire"],
        catch_up_max=row["catch_up_max"],
        grace_s=grace_s,
    )


def _ago(store: Store) -> str:
    """A whole second `?` seconds before the database's now (ticks of every second are whole seconds)."""
    if store.dialect.name == "postgresql":
        return "date_trunc('second', now() - make_interval(secs => CAST(? AS double precision)))"
    return "strftime('%Y-%m-%d %H:%M:%S.000', 'now', '-' || CAST(? AS text) || ' seconds')"


def test_a_new_schedule_starts_at_its_next_tick_and_its_creation_is_audited(store):
    made = store.create_schedule({**EVERY_SECOND, "payload": {"n": 1}, "tz": "Europe/Berlin"}, actor=OPS)
    assert isinstance(made, ScheduleRecord)
    assert (made.name, made.type, made.cron, made.tz, made.payload) == (
        "beat", "beat.v1", "* * * * * *", "Europe/Berlin", '{"n":1}'
    )  # fmt: skip
    assert made.source == "api" and not made.paused and made.created_by == "ops"
    assert made.next_run_at is not None and made.next_run_at.microsecond == 0
    assert timedelta(0) <= made.next_run_at - made.created_at < timedelta(seconds=1.01)
    assert made.last_outcome is None and made.runs_total == 0
    (actor, action, details), *_ = audit_rows(store)
    assert (actor, action, details["schedule"], details["cron"]) == (
        "ops",
        "schedule_create",
        "beat",
        "* * * * * *",
    )
    page = store.list_schedules()
    assert page.total == 1 and page.items == [made]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"cron": "* * *"}, "cron"),
        ({"tz": "Europe/Nowhere"}, "tz"),
        ({"name": "a b"}, "name"),
        ({"payload": "{oops"}, "payload"),
        ({"misfire": "never"}, "misfire"),
        ({"queue": ""}, "queue"),
        ({"owner": "x"}, "owner"),
    ],
)
def test_a_bad_definition_is_refused_naming_its_field_and_writes_nothing(store, change, field):
    with pytest.raises(errors.ValidationError) as raised:
        store.create_schedule({**EVERY_SECOND, **change}, actor=OPS)
    assert raised.value.field == field
    assert scalar(store, "SELECT count(*) FROM schedules") == 0
    assert audit_rows(store) == []


def test_a_taken_name_is_a_conflict_and_unknown_names_are_not_found(store):
    store.create_schedule(EVERY_SECOND, actor=OPS)
    with pytest.raises(errors.Conflict):
        store.create_schedule({**EVERY_SECOND, "cron": "@daily"}, actor=OPS)
    assert store.get_schedule("beat").cron == "* * * * * *"
    for call in (
        lambda: store.get_schedule("nope"),
        lambda: store.pause_schedule("nope", actor=OPS),
        lambda: store.update_schedule("nope", {"priority": 1}, actor=OPS),
        lambda: store.delete_schedule("nope", actor=OPS),
        lambda: store.trigger_schedule("nope", actor=OPS),
        lambda: store.schedule_runs("nope"),
    ):
        with pytest.raises(errors.JobNotFound):
            call()
    assert len(audit_rows(store)) == 1


def test_changes_are_audited_with_before_and_after_and_a_new_cron_restarts_the_ticks(store):
    store.create_schedule(EVERY_SECOND, actor=OPS)
    changed = store.update_schedule(
        "beat", {"cron": "0 3 * * *", "tz": "Europe/Berlin", "priority": 5}, actor=Actor("ann")
    )
    assert (changed.cron, changed.tz, changed.priority, changed.updated_by) == (
        "0 3 * * *",
        "Europe/Berlin",
        5,
        "ann",
    )
    berlin = changed.next_run_at.astimezone(cron.zone("Europe/Berlin"))
    assert (berlin.hour, berlin.minute) == (3, 0)
    actor, action, details = audit_rows(store)[-1]
    assert (actor, action) == ("ann", "schedule_update")
    assert details["before"] == {"cron": "* * * * * *", "tz": "UTC", "priority": 10}
    assert details["after"] == {"cron": "0 3 * * *", "tz": "Europe/Berlin", "priority": 5}
    # A change that changes nothing writes nothing.
    store.update_schedule("beat", {"priority": 5}, actor=OPS)
    assert len(audit_rows(store)) == 2
    with pytest.raises(errors.ValidationError) as raised:
        store.update_schedule("beat", {"paused": True}, actor=OPS)
    assert raised.value.field == "paused"
    with pytest.raises(errors.ValidationError) as raised:
        store.update_schedule("beat", {"tz": "Atlantis/Capital"}, actor=OPS)
    assert raised.value.field == "tz" and store.get_schedule("beat").tz == "Europe/Berlin"


def test_pause_clears_the_next_run_and_resume_skips_the_ticks_of_the_pause(store):
    store.create_schedule(EVERY_SECOND, actor=OPS)
    paused = store.pause_schedule("beat", actor=OPS)
    assert paused.paused and paused.next_run_at is None
    assert store.pause_schedule("beat", actor=OPS).paused  # again: no change, no second audit row
    assert store.due_schedules() == []
    resumed = store.resume_schedule("beat", actor=OPS)
    now = store.now()
    assert not resumed.paused and now - timedelta(seconds=1) <= resumed.next_run_at <= now + timedelta(
        seconds=1
    )
    assert [a for _, a, _ in audit_rows(store)] == ["schedule_create", "schedule_pause", "schedule_resume"]


def test_fire_enqueues_one_job_per_tick_with_its_ledger_row_and_a_racer_gets_none(store):
    store.create_schedule({**EVERY_SECOND, "payload": {"k": 1}, "tags": "ops"}, actor=OPS)
    row, plan = plan_now(store)
    assert len(plan.fire) >= 3
    fired = store.fire_schedule("beat", expected=row["next_run_at"], plan=plan, fired_by="p1")
    assert [f.tick_at for f in fired] == list(plan.fire)
    # A second process that read the same due row: next_run_at moved, it advances and enqueues nothing.
    assert store.fire_schedule("beat", expected=row["next_run_at"], plan=plan, fired_by="p2") is None
    rows = ledger(store)
    assert [r[3] for r in rows] == [f.job_id for f in fired] and {r[1] for r in rows} == {"cron"}
    job = store.get_job(fired[0].job_id)
    assert job.type == "beat.v1" and job.queue == "sched" and job.payload == '{"k":1}'
    assert job.tags == "ops,schedule:beat" and job.created_by == "schedule:beat"
    assert job.idempotency_key == f"schedule:beat@{fired[0].tick_at.isoformat().replace('+00:00', 'Z')}"
    assert job.scheduled_at == fired[0].tick_at
    done = store.get_schedule("beat")
    assert done.last_job_id == fired[-1].job_id and done.last_tick_at == fired[-1].tick_at
    assert done.runs_total == len(fired) and done.last_outcome == "pending"
    assert done.next_run_at == plan.next_run_at
    assert scalar(store, "SELECT count(*) FROM jobs_hot") == len(fired)


def _finish(store: Store, succeed: list[str], fail: tuple[str, ...] = ()) -> None:
    """Claim every pending job of the schedules' queue; archive `succeed`, dead-letter `fail`, the rest
    stay processing."""
    got = [r["id"] for r in store.fetch("w-sched", 1000, ["sched"])]
    assert set(succeed) | set(fail) <= set(got)
    store.mark_processing("w-sched", got)
    store.archive_succeeded("w-sched", [(j, 1.0) for j in succeed])
    store.move_to_dlq("w-sched", [Dead(j, FailureReason.Fatal, "ValueError: no", None, 1.0) for j in fail])


def test_a_tick_whose_job_left_the_hot_table_never_runs_again(store):
    """The idempotency key dedupes against hot jobs only: after the tick's job was archived, only the
    ledger stops a second attempt at the same tick (next_run_at moved back: a clock set back, a restore)."""
    store.create_schedule(EVERY_SECOND, actor=OPS)
    row, plan = plan_now(store)
    first = store.fire_schedule("beat", expected=row["next_run_at"], plan=plan, fired_by="p1")
    _finish(store, [f.job_id for f in first])
    assert scalar(store, "SELECT count(*) FROM jobs_archive") == len(first)
    # Move next_run_at back to the first tick and fire the same ticks again.
    sql(store, "UPDATE schedules SET next_run_at = ? WHERE name = 'beat'", store.format_time(plan.fire[0]))
    again = store.fire_schedule("beat", expected=plan.fire[0], plan=plan, fired_by="p2")
    assert again == []  # advanced, but every tick was in the ledger
    assert scalar(store, "SELECT count(*) FROM jobs_hot") == 0
    assert len(ledger(store)) == len(first)
    # Without the ledger rows the same ticks would run again: the key alone does not hold.
    sql(store, "DELETE FROM schedule_runs")
    sql(store, "UPDATE schedules SET next_run_at = ? WHERE name = 'beat'", store.format_time(plan.fire[0]))
    assert len(store.fire_schedule("beat", expected=plan.fire[0], plan=plan, fired_by="p3")) == len(first)


def test_runs_show_each_jobs_outcome_and_the_schedule_its_last(store):
    store.create_schedule(EVERY_SECOND, actor=OPS)
    row, plan = plan_now(store)
    fired = store.fire_schedule("beat", expected=row["next_run_at"], plan=plan, fired_by="p1")
    _finish(store, [fired[0].job_id], (fired[-1].job_id,))
    runs = store.schedule_runs("beat", page_size=100)
    assert runs.total == len(fired) and all(isinstance(r, ScheduleRun) for r in runs.items)
    by_job = {r.job_id: r for r in runs.items}
    assert by_job[fired[0].job_id].outcome == "succeeded"
    assert (by_job[fired[-1].job_id].outcome, by_job[fired[-1].job_id].failure_reason) == ("dead", "Fatal")
    assert {by_job[f.job_id].outcome for f in fired[1:-1]} == {"processing"}
    assert runs.items[0].tick_at == fired[-1].tick_at  # newest first
    last = store.get_schedule("beat")
    assert (last.last_outcome, last.last_failure_reason) == ("dead", "Fatal")
    sql(store, "DELETE FROM jobs_dlq")
    assert store.get_schedule("beat").last_outcome == "gone"


def test_trigger_runs_the_job_now_even_when_paused_and_is_audited_with_it(store):
    store.create_schedule({**EVERY_SECOND, "paused": True}, actor=OPS)
    run = store.trigger_schedule("beat", actor=Actor("ann"))
    assert run.kind == "manual" and run.job_id and run.fired_by == "ann"
    job = store.get_job(run.job_id)
    assert job.status == "pending" and job.idempotency_key is None and job.created_by == "ann"
    actor, action, details = audit_rows(store)[-1]
    assert (actor, action, details) == ("ann", "schedule_trigger", {"schedule": "beat"})
    assert scalar(store, "SELECT job_id FROM audit_log WHERE action = 'schedule_trigger'") == run.job_id
    after = store.get_schedule("beat")
    assert after.paused and after.last_job_id == run.job_id and after.last_tick_at is None
    assert [(r[1], r[3]) for r in ledger(store)] == [("manual", run.job_id)]


def test_delete_removes_the_schedule_and_its_ledger_and_is_audited(store):
    store.create_schedule(EVERY_SECOND, actor=OPS)
    store.trigger_schedule("beat", actor=OPS)
    store.delete_schedule("beat", actor=Actor("ann"))
    assert scalar(store, "SELECT count(*) FROM schedules") == 0
    assert scalar(store, "SELECT count(*) FROM schedule_runs") == 0
    actor, action, details = audit_rows(store)[-1]
    assert (actor, action, details["schedule"], details["cron"]) == (
        "ann",
        "schedule_delete",
        "beat",
        "* * * * * *",
    )


def test_code_declarations_are_written_once_updated_when_changed_and_owned_by_the_code(store):
    code = Actor("code:host-1")
    nightly = Schedule("0 3 * * *", name="nightly", tz="Europe/Berlin").bound("report.v1")
    assert store.sync_schedules([nightly], actor=code) == {
        "created": ["nightly"],
        "updated": [],
        "unchanged": [],
    }
    assert store.sync_schedules([nightly], actor=code)["unchanged"] == ["nightly"]
    made = store.get_schedule("nightly")
    assert made.source == "code" and made.type == "report.v1"
    store.pause_schedule("nightly", actor=OPS)  # operators pause code schedules; the pause survives restarts
    changed = Schedule("0 4 * * *", name="nightly", tz="Europe/Berlin").bound("report.v1")
    assert store.sync_schedules([changed], actor=code)["updated"] == ["nightly"]
    after = store.get_schedule("nightly")
    assert after.cron == "0 4 * * *" and after.paused
    with pytest.raises(errors.InvalidState):
        store.update_schedule("nightly", {"priority": 1}, actor=OPS)
    actions = [(a, b) for a, b, _ in audit_rows(store)]
    assert actions == [
        ("code:host-1", "schedule_create"),
        ("ops", "schedule_pause"),
        ("code:host-1", "schedule_update"),
    ]
    # A name first made over the API is taken over by its declaration.
    store.create_schedule({**EVERY_SECOND, "name": "taken"}, actor=OPS)
    declared = Schedule("@hourly", name="taken").bound("beat.v1")
    assert store.sync_schedules([declared], actor=code)["updated"] == ["taken"]
    assert (store.get_schedule("taken").source, store.get_schedule("taken").cron) == ("code", "@hourly")


def test_retention_prunes_old_ledger_rows_only(store):
    store.create_schedule(EVERY_SECOND, actor=OPS)
    for _ in range(3):
        store.trigger_schedule("beat", actor=OPS)
    sql(
        store,
        "UPDATE schedule_runs SET fired_at = " + _ago(store) + " WHERE job_id <> ?",
        8 * 86400,
        store.get_schedule("beat").last_job_id,
    )
    done = store.prune(
        buckets_older_than_s=86400, events_older_than_s=86400, schedule_runs_older_than_s=7 * 86400
    )
    assert done["schedule_runs"] == 2 and len(ledger(store)) == 1


def test_the_schedule_record_declares_the_tables_columns(store):
    store.create_schedule(EVERY_SECOND, actor=OPS)
    columns = {r[0] for r in _columns(store, "schedules")}
    record = store.get_schedule("beat")
    assert set(record) == columns | {"last_outcome", "last_failure_reason"}
    store.trigger_schedule("beat", actor=OPS)
    assert set(store.schedule_runs("beat").items[0]) == {r[0] for r in _columns(store, "schedule_runs")} | {
        "outcome", "failure_reason"
    }  # fmt: skip


def _columns(store: Store, table: str) -> list[tuple]:
    if store.dialect.name == "postgresql":
        return sql(store, "SELECT column_name FROM information_schema.columns WHERE table_name = ?", table)
    return [(r[1],) for r in sql(store, f"PRAGMA table_info({table})")]


@pytest.mark.postgres_only
def test_processes_racing_for_the_same_ticks_enqueue_each_once(pg_url):
    """Eight stores (eight connection pools, like eight processes) fire the same due schedule at once,
    twenty rounds: every tick gets exactly one ledger row and one job."""
    stores = [Store(pg_url, pool_size=2) for _ in range(8)]
    try:
        stores[0].create_schedule(EVERY_SECOND, actor=OPS)
        for _ in range(20):
            row, plan = plan_now(stores[0])
            start = threading.Barrier(len(stores))
            won: list[object] = []

            def race(s: Store, row=row, plan=plan, start=start, won=won) -> None:
                start.wait()
                got = s.fire_schedule("beat", expected=row["next_run_at"], plan=plan, fired_by="racer")
                if got is not None:
                    won.append(got)

            threads = [threading.Thread(target=race, args=(s,)) for s in stores]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert len(won) == 1
        rows = ledger(stores[0])
        ticks = [r[0] for r in rows]
        assert len(ticks) == len(set(ticks))
        jobs = sql(stores[0], "SELECT idempotency_key FROM jobs_hot")
        assert len(jobs) == len(rows) == len({k for (k,) in jobs})
    finally:
        for s in stores:
            s.close()
