"""The filter grammar itself (chokaq_ops.filters): lists, exclusions, ids, times and their refusals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from chokaq_ops import errors
from chokaq_ops.filters import (
    Choice,
    failure_filter,
    filter_query,
    parse_choice,
    parse_ids,
    parse_reasons,
    parse_time,
)
from chokaq_ops.models import FailureReason

NOW = datetime(2026, 3, 10, 15, 30, tzinfo=UTC)


def test_lists_and_exclusions_from_text_and_lists() -> None:
    assert parse_choice("a,b", "queue") == Choice(("a", "b"), None)
    assert parse_choice(["a", "!b", "c,!d"], "queue") == Choice(("a", "c"), ("b", "d"))
    assert parse_choice(" !bulk ", "queue") == Choice(None, ("bulk",))
    assert parse_reasons("Fatal,timeout,!Zombie") == Choice(
        (FailureReason.Fatal, FailureReason.Timeout), (FailureReason.Zombie,)
    )
    assert parse_reasons(["6", FailureReason.Timeout.name]).include == (
        FailureReason.Fatal,
        FailureReason.Timeout,
    )


@pytest.mark.parametrize("bad", ["a,,b", "!", "", ["a", ""], 3.5, {"a": 1}])
def test_empty_items_and_wrong_types_are_refused(bad) -> None:
    with pytest.raises(errors.ValidationError) as caught:
        parse_choice(bad, "queue")
    assert caught.value.field == "queue"


def test_unknown_reason_names_the_field() -> None:
    with pytest.raises(errors.ValidationError, match="unknown failure reason 'Nope'") as caught:
        parse_reasons("Fatal,Nope")
    assert caught.value.field == "reason"


def test_ids_from_text_lists_and_series() -> None:
    assert parse_ids("a, b,a") == ("a", "b")
    assert parse_ids(pd.Series(["x", "y"])) == ("x", "y")
    assert parse_ids(np.array(["p"])) == ("p",)
    with pytest.raises(errors.ValidationError, match="excluded"):
        parse_ids("!a")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("24h", NOW - timedelta(hours=24)),
        ("24h ago", NOW - timedelta(hours=24)),
        ("1h30m AGO", NOW - timedelta(minutes=90)),
        ("7d", NOW - timedelta(days=7)),
        ("now", NOW),
        ("today", datetime(2026, 3, 10, tzinfo=UTC)),
        ("yesterday", datetime(2026, 3, 9, tzinfo=UTC)),
        ("2026-01-01T00:00:00Z", datetime(2026, 1, 1, tzinfo=UTC)),
        ("2026-01-01T02:00:00+02:00", datetime(2026, 1, 1, tzinfo=UTC)),
    ],
)
def test_times_from_text(text, expected) -> None:
    assert parse_time(text, "failed_from", now=NOW) == expected


def test_times_from_python_pandas_and_numpy() -> None:
    plus2 = timezone(timedelta(hours=2))
    assert parse_time(datetime(2026, 1, 1, 2, tzinfo=plus2), "t") == datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_time(pd.Timestamp("2026-01-01", tz="UTC"), "t") == datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_time(np.datetime64("2026-01-01T00:00:00"), "t") == datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_time(timedelta(hours=1), "t", now=NOW) == NOW - timedelta(hours=1)


@pytest.mark.parametrize(
    "naive", [datetime(2026, 1, 1), pd.Timestamp("2026-01-01"), "2026-01-01T00:00:00", "2026-01-01"]
)
def test_naive_times_are_refused_naming_the_field(naive) -> None:
    with pytest.raises(errors.ValidationError, match="timezone") as caught:
        parse_time(naive, "failed_to")
    assert caught.value.field == "failed_to"


@pytest.mark.parametrize(
    "bad", ["-24h", "soon", "24x", 12, "9" * 40, "1e300", "3000000d ago", timedelta(days=999_999_999)]
)
def test_other_times_are_refused(bad) -> None:
    with pytest.raises(errors.ValidationError) as caught:
        parse_time(bad, "failed_from")
    assert caught.value.field == "failed_from"


def test_a_filter_survives_its_text_form() -> None:
    flt = failure_filter(
        ids=["a", "b"],
        queue="q1,!q2",
        reason=["Fatal", "!Zombie"],
        fingerprint="f1",
        outcome="dead",
        failed_from="yesterday",
        failed_to=pd.Timestamp("2026-03-10", tz="UTC"),
    )
    assert failure_filter(filter_query(flt)) == flt
    with pytest.raises(errors.ValidationError, match="unknown failure-history filter 'colour'"):
        failure_filter(colour="red")
