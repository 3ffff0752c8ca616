"""The schedule check (chokaq_ops/engine/scheduling.py) on SQLite and PostgreSQL: DST in a zone that shifts,
both ways, under a frozen clock; the misfire policies after an outage; checkers racing for the same ticks;
code declarations written at start; and a hosted worker running the jobs its schedule makes."""

from __future__ import annotations

import threading
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from worker_support import fast_settings, hosted, wait_for

from chokaq_ops import cron
from chokaq_ops.engine.handlers import Registry
from chokaq_ops.engine.scheduling import ScheduleChecker
from chokaq_ops.models import Actor
from chokaq_ops.schedules import Schedule, tick_key
from chokaq_ops.settings import Settings
from chokaq_ops.storage import Store
from tests.support.dbprobe import events, scalar, sql

OPS = Actor("ops")
BERLIN = ZoneInfo("Europe/Berlin")


def last_transitions(before: datetime) -> dict[str, date]:
    """The local dates of Europe/Berlin's most recent spring-forward and fall-back before `before`: in
    the past of the database clock, so the database finds the schedule due at every frozen step."""
    found: dict[str, date] = {}
    t = before.replace(minute=0, second=0, microsecond=0)
    while len(found) < 2:
        earlier = t - timedelta(hours=1)
        jump = t.astimezone(BERLIN).utcoffset() - earlier.astimezone(BERLIN).utcoffset()  # type: ignore[operator]
        if jump and ("spring" if jump > timedelta(0) else "fall") not in found:
            found["spring" if jump > timedelta(0) else "fall"] = earlier.astimezone(BERLIN).date()
        t = earlier
    return found


def set_next(store: Store, name: str, at: datetime) -> None:
    sql(store, "UPDATE schedules SET next_run_at = ? WHERE name = ?", store.format_time(at), name)


def ledger_ticks(store: Store, name: str) -> list[datetime]:
    rows = store.schedule_runs(name, page_size=1000).items
    assert all(r.kind == "cron" and not r.late and r.job_id for r in rows)
    return sorted(r.tick_at for r in rows)


@pytest.mark.parametrize("shift", ["spring", "fall"])
def test_dst_in_a_zone_that_shifts_runs_each_tick_apscheduler_names_once(store, shift):
    """A day in Europe/Berlin when the clocks go forward (23 hours) or back (25 hours), stepped through
    under a frozen clock in 7-minute checks. Ticks are instants (UTC): on the spring day 02:00-02:59 does
    not exist, so the daily 02:30 runs once at 01:30 UTC (03:30 CEST), and the hourly schedule has 23
    ticks; on the fall day 02:00-02:59 happens twice and APScheduler fires both (02:30 CEST = 00:30 UTC and
    02:30 CET = 01:30 UTC), 25 hourly ticks. Each tick got one ledger row and one job keyed by it."""
    settings = Settings().with_overrides({"storage.url": store.url})
    day = last_transitions(store.now() - timedelta(days=2))[shift]
    start = datetime(day.year, day.month, day.day, tzinfo=BERLIN).astimezone(UTC)
    end = datetime.combine(day + timedelta(days=1), datetime.min.time(), BERLIN).astimezone(UTC)
    for name, expression in (("hourly", "0 * * * *"), ("daily", "30 2 * * *"), ("half", "*/30 * * * *")):
        store.create_schedule(
            {
                "name": name,
                "type": f"{name}.v1",
                "cron": expression,
                "tz": "Europe/Berlin",
                "misfire": "skip",
                "misfire_grace_seconds": 600,  # the frozen clock steps 7 minutes: no tick is late
            },
            actor=OPS,
        )
        set_next(store, name, cron.parse(expression, "Europe/Berlin").at_or_after(start))
    checker = ScheduleChecker(store, settings)
    now = start
    while now < end:
        result = checker.check(now=now)
        assert not result.errors and result.missed == 0
        now += timedelta(minutes=7)
    checker.check(now=end - timedelta(microseconds=1))
    hourly, daily, half = (ledger_ticks(store, n) for n in ("hourly", "daily", "half"))
    hours = 23 if shift == "spring" else 25
    assert (end - start) == timedelta(hours=hours)
    assert hourly == [start + timedelta(hours=h) for h in range(hours)]
    assert half == [start + timedelta(minutes=30 * h) for h in range(2 * hours)]
    utc_day = datetime(day.year, day.month, day.day, tzinfo=UTC)
    if shift == "spring":
        assert daily == [utc_day + timedelta(hours=1, minutes=30)]  # 03:30 CEST, once
    else:
        assert daily == [utc_day + timedelta(minutes=30), utc_day + timedelta(hours=1, minutes=30)]
        assert {t.astimezone(BERLIN).strftime("%H:%M") for t in daily} == {"02:30"}
    keys = {k for (k,) in sql(store, "SELECT idempotency_key FROM jobs_hot")}
    expected = {
        tick_key(n, t) for n, ticks in (("hourly", hourly), ("daily", daily), ("half", half)) for t in ticks
    }
    assert keys == expected and scalar(store, "SELECT count(*) FROM jobs_hot") == len(expected)


@pytest.mark.parametrize(("misfire", "late"), [("skip", 0), ("once", 1), ("catch_up", 3)])
def test_after_an_outage_the_misfire_policy_decides_which_missed_ticks_run(store, misfire, late):
    settings = Settings().with_overrides({"storage.url": store.url})
    store.create_schedule(
        {
            "name": "beat",
            "type": "beat.v1",
            "cron": "* * * * * *",
            "misfire": misfire,
            "catch_up_max": 3,
            "misfire_grace_seconds": 5,
        },
        actor=OPS,
    )
    now = store.now().replace(microsecond=500_000)
    set_next(store, "beat", now.replace(microsecond=0) - timedelta(seconds=120))  # nobody ran for 2 minutes
    result = ScheduleChecker(store, settings).check(now=now)
    runs = store.schedule_runs("beat", page_size=1000).items
    assert sum(r.late for r in runs) == late == result.late
    on_time = sorted(r.tick_at for r in runs if not r.late)
    assert on_time == [now.replace(microsecond=0) - timedelta(seconds=s) for s in range(4, -1, -1)]
    late_ticks = sorted(r.tick_at for r in runs if r.late)
    assert late_ticks == [on_time[0] - timedelta(seconds=s) for s in range(late, 0, -1)]
    assert result.missed == 116 - late and store.get_schedule("beat").missed_total == 116 - late
    assert scalar(store, "SELECT count(*) FROM jobs_hot") == len(runs)
    (event,) = events(store, "schedule")[-1:]
    assert f"{116 - late} tick(s) missed" in event["message"]


def test_checkers_racing_for_the_same_ticks_enqueue_each_once(store, tmp_path):
    """Four checkers on four stores (as four processes), released together at every frozen second."""
    settings = Settings().with_overrides({"storage.url": store.url})
    store.create_schedule({"name": "beat", "type": "beat.v1", "cron": "* * * * * *"}, actor=OPS)
    start = store.now().replace(microsecond=0) - timedelta(seconds=60)
    set_next(store, "beat", start)
    stores = [Store(store.url, pool_size=2, transient_retry_base_delay=0.02) for _ in range(4)]
    try:
        checkers = [ScheduleChecker(s, settings, holder=f"p{i}") for i, s in enumerate(stores)]
        for second in range(30):
            gate = threading.Barrier(len(checkers))
            frozen = start + timedelta(seconds=second, milliseconds=300)

            def run(c: ScheduleChecker, gate=gate, frozen=frozen) -> None:
                gate.wait()
                assert not c.check(now=frozen).errors

            threads = [threading.Thread(target=run, args=(c,)) for c in checkers]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        for s in stores:
            s.close()
    ticks = ledger_ticks(store, "beat")
    assert ticks == [start + timedelta(seconds=s) for s in range(30)]
    holders = {h for (h,) in sql(store, "SELECT fired_by FROM schedule_runs")}
    assert holders <= {"p0", "p1", "p2", "p3"}
    keys = [k for (k,) in sql(store, "SELECT idempotency_key FROM jobs_hot")]
    assert sorted(keys) == sorted(tick_key("beat", t) for t in ticks)


def test_a_host_writes_its_declarations_and_its_worker_runs_the_ticks(store):
    ran: list[str] = []
    registry = Registry()

    @registry.job("beat.v1", schedules=[Schedule("* * * * * *", name="beat", payload={"n": 1})])
    def beat(payload, ctx):
        ran.append(ctx.job_id)

    settings = fast_settings(store, schedules__check_interval=0.1, schedules__misfire_grace=5)
    with hosted(store, settings, registry) as host:
        assert host.schedules is not None
        wait_for(lambda: len(ran) >= 3, 15, "three ticks run by the worker")
        wait_for(
            lambda: store.get_schedule("beat").last_outcome == "succeeded", 10, "the newest job archived"
        )
    made = store.get_schedule("beat")
    assert made.source == "code" and made.payload == '{"n":1}' and made.created_by.startswith("code:")
    ticks = ledger_ticks(store, "beat")
    assert ticks == [ticks[0] + timedelta(seconds=i) for i in range(len(ticks))]  # consecutive seconds
    assert set(ran) <= {r.job_id for r in store.schedule_runs("beat", page_size=1000).items}


def test_a_failing_check_is_reported_and_the_next_one_runs(store):
    settings = Settings().with_overrides({"storage.url": store.url})
    store.create_schedule({"name": "beat", "type": "beat.v1", "cron": "* * * * * *"}, actor=OPS)
    set_next(store, "beat", store.now().replace(microsecond=0) - timedelta(seconds=2))
    checker = ScheduleChecker(store, settings)
    original = store.schedules.fire_schedule

    def broken(*args, **kwargs):
        raise RuntimeError("injected")

    store.schedules.fire_schedule = broken  # type: ignore[method-assign]
    try:
        failed = checker.check()
    finally:
        store.schedules.fire_schedule = original  # type: ignore[method-assign]
    assert failed.errors and "injected" in checker.last_error
    assert checker.check().enqueued >= 2
