"""Cron expressions (chokaq_ops/cron.py) and the misfire plan (chokaq_ops/schedules.py): pure, no database.

The DST behaviour through the real engine and both databases is in tests/engine/test_schedule_checks.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from chokaq_ops import cron, errors
from chokaq_ops.schedules import Schedule, check_definition, plan_ticks, tick_key

T0 = datetime(2026, 1, 1, tzinfo=UTC)  # a Thursday


def days(expression: str, count: int = 7, tz: str = "UTC") -> list[str]:
    return [t.strftime("%a %d") for t in cron.parse(expression, tz).upcoming(T0, count)]


def test_day_of_week_numbers_mean_what_crontab_means_not_apscheduler_3():
    # APScheduler 3 reads 0 as Monday; cron reads 0 (and 7) as Sunday and 1-5 as Monday to Friday.
    assert days("0 9 * * 1-5", 5) == ["Thu 01", "Fri 02", "Mon 05", "Tue 06", "Wed 07"]
    assert days("0 9 * * 0", 2) == days("0 9 * * 7", 2) == days("0 9 * * sun", 2) == ["Sun 04", "Sun 11"]
    assert days("0 9 * * */2", 4) == ["Thu 01", "Sat 03", "Sun 04", "Tue 06"]  # 0,2,4,6: sun tue thu sat
    assert days("0 9 * * 5-7", 3) == ["Fri 02", "Sat 03", "Sun 04"]
    assert days("0 9 * * mon-fri", 5) == days("0 9 * * 1-5", 5)


def test_both_day_fields_restricted_fire_when_either_matches_as_in_cron():
    # The 13th of the month or any Friday (APScheduler alone would want a Friday the 13th).
    assert days("0 0 13 * 5", 5) == ["Fri 02", "Fri 09", "Tue 13", "Fri 16", "Fri 23"]


def test_six_fields_put_seconds_first_and_aliases_expand():
    every_second = cron.parse("* * * * * *")
    assert every_second.upcoming(T0, 3) == [T0 + timedelta(seconds=s) for s in (1, 2, 3)]
    assert cron.parse("*/15 * * * * *").upcoming(T0, 2) == [T0 + timedelta(seconds=s) for s in (15, 30)]
    assert cron.parse("@hourly").upcoming(T0, 1) == [T0 + timedelta(hours=1)]
    assert cron.parse("@daily", "Europe/Berlin").upcoming(T0, 1) == [datetime(2026, 1, 1, 23, tzinfo=UTC)]


@pytest.mark.parametrize(
    ("expression", "tz", "field"),
    [
        ("61 * * * *", "UTC", "cron"),
        ("* * *", "UTC", "cron"),
        ("", "UTC", "cron"),
        ("0 0 31 2 *", "UTC", "cron"),  # never fires
        ("0 0 * * 5-1", "UTC", "cron"),  # a backwards range
        ("0 0 * * 8", "UTC", "cron"),
        ("* * * * *", "Mars/Olympus", "tz"),
        ("* * * * *", "", "tz"),
        ("* * * * *", None, "tz"),
    ],
)
def test_bad_expressions_and_zones_name_their_field(expression, tz, field):
    with pytest.raises(errors.ValidationError) as raised:
        cron.parse(expression, tz)
    assert raised.value.field == field


def test_a_declaration_fails_its_import_naming_the_field():
    with pytest.raises(errors.ConfigError) as raised:
        Schedule("0 0 * * *", name="x", tz="Nowhere/Land")
    assert raised.value.field == "tz"
    with pytest.raises(errors.ConfigError) as raised:
        Schedule("0 0 * * *", name="x", misfire="sometimes")
    assert raised.value.field == "misfire"


def test_definitions_are_checked_field_by_field():
    ok = check_definition({"name": "a.b", "cron": "0 3 * * *", "tz": "Europe/Berlin", "payload": {"x": 1}})
    assert ok == {"name": "a.b", "cron": "0 3 * * *", "tz": "Europe/Berlin", "payload": '{"x":1}'}
    for bad, field in (
        ({"name": "has space"}, "name"),
        ({"name": "x" * 81}, "name"),
        ({"payload": "{not json"}, "payload"),
        ({"misfire": "later"}, "misfire"),
        ({"catch_up_max": 0}, "catch_up_max"),
        ({"catch_up_max": 1001}, "catch_up_max"),
        ({"misfire_grace_seconds": 0}, "misfire_grace_seconds"),
        ({"priority": -1}, "priority"),
    ):
        with pytest.raises(errors.ValidationError) as raised:
            check_definition(bad)
        assert raised.value.field == field, bad


def test_a_ticks_key_names_the_schedule_and_the_instant():
    assert (
        tick_key("nightly", datetime(2026, 3, 29, 1, 30, tzinfo=UTC))
        == "schedule:nightly@2026-03-29T01:30:00Z"
    )


# ---------------------------------------------------------------------------------------- misfire plans

NOW = datetime(2026, 6, 1, 12, 0, 0, 400_000, tzinfo=UTC)
EVERY_SECOND = cron.parse("* * * * * *")


def plan(misfire: str, down_s: float, catch_up_max: int = 1, grace_s: float = 5.0):
    return plan_ticks(
        EVERY_SECOND,
        (NOW - timedelta(seconds=down_s)).replace(microsecond=0),
        NOW,
        misfire=misfire,
        catch_up_max=catch_up_max,
        grace_s=grace_s,
    )


def test_ticks_within_the_grace_always_run_and_are_not_late():
    p = plan("skip", down_s=3)
    assert len(p.fire) == 4 and not p.late and p.missed == 0  # 11:59:57 .. 12:00:00
    assert p.next_run_at == datetime(2026, 6, 1, 12, 0, 1, tzinfo=UTC)


@pytest.mark.parametrize(("misfire", "kept"), [("skip", 0), ("once", 1), ("catch_up", 7)])
def test_missed_ticks_follow_the_misfire_policy(misfire, kept):
    # Down 120 s (due 11:58:00, now 12:00:00.4), grace 5 s: the 5 ticks from 11:59:56 are on time; the
    # 116 from 11:58:00 to 11:59:55 were missed.
    p = plan(misfire, down_s=120, catch_up_max=7)
    on_time = [t for t in p.fire if t not in p.late]
    assert len(on_time) == 5 and len(p.late) == kept
    assert p.missed == 116 - kept
    # The late ones are the newest missed ticks, right before the grace.
    newest_missed = datetime(2026, 6, 1, 11, 59, 55, tzinfo=UTC)
    assert sorted(p.late) == [newest_missed - timedelta(seconds=i) for i in range(kept - 1, -1, -1)]
    assert list(p.fire) == sorted(p.fire)


def test_a_long_outage_is_planned_without_walking_every_tick():
    p = plan("once", down_s=30 * 86_400)  # a month of a schedule of every second
    assert len(p.late) == 1 and p.missed == 10_000  # counted up to the cap (a floor), not 2.6 million
    assert p.next_run_at == datetime(2026, 6, 1, 12, 0, 1, tzinfo=UTC)
