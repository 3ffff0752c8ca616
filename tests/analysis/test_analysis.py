"""Analysis functions on frames: fingerprint groups, summaries, trends, the zombie report and the plots."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import matplotlib.axes
import pandas as pd
import pytest

from chokaq_ops import analysis
from chokaq_ops.analysis import columns as C
from chokaq_ops.client import DbClient
from chokaq_ops.fingerprint import fingerprint_text
from chokaq_ops.models import FailureReason
from tests.support.seeds import seed_dlq, traceback_text

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


def tb(frames: list[tuple[str, str]], exc: str) -> str:
    """A hand-made traceback: (path, function) frames outermost first, then the exception line."""
    lines = ["Traceback (most recent call last):"]
    for path, func in frames:
        lines += [f'  File "{path}", line 17, in {func}', "    do_it()"]
    return "\n".join([*lines, exc, ""])


WORKER = ("/opt/venv/lib/python3.11/site-packages/chokaq_ops/engine/worker.py", "run_one")
LIB = ("/opt/venv/lib/python3.11/site-packages/requests/sessions.py", "send")
CHARGE = ("/srv/app/billing/charge.py", "charge")
REFUND = ("/srv/app/billing/refund.py", "refund")


def jobs(errors: list[str], *, fingerprints: list[str | None] | None = None) -> pd.DataFrame:
    n = len(errors)
    raw = pd.DataFrame(
        {
            "id": [f"job-{i:03d}" for i in range(n)],
            "queue": ["billing"] * n,
            "type": ["billing.charge.v1"] * n,
            "failure_reason": [int(FailureReason.MaxRetriesExceeded)] * n,
            "error_details": errors,
            "fingerprint": fingerprints or [None] * n,
            "failed_at": [T0 + timedelta(hours=5 * i) for i in range(n)],
            "created_at": [T0 + timedelta(hours=5 * i, minutes=-1) for i in range(n)],
        }
    )
    return C.normalise(raw, "dlq")


HAND_MADE = [
    # 0-2: the same failure with different order numbers, ids, amounts and e-mails -> one group
    tb(
        [WORKER, CHARGE, LIB],
        "ConnectionError: card 4242 declined for order 1001 (usr_8f3kd92jd, bob@example.com)",
    ),
    tb(
        [WORKER, CHARGE, LIB],
        "ConnectionError: card 9876 declined for order 2222 (usr_k2m4p6q8r, eve@example.org)",
    ),
    tb([WORKER, CHARGE, LIB], "ConnectionError: card 1111 declined for order 31337 (usr_zz99yy88x, x@y.io)"),
    # 3: same message template, different exception type -> its own group
    tb(
        [WORKER, CHARGE, LIB],
        "TimeoutError: card 4242 declined for order 1001 (usr_8f3kd92jd, bob@example.com)",
    ),
    # 4: same type and template, raised from a different application frame -> its own group
    tb(
        [WORKER, REFUND, LIB],
        "ConnectionError: card 4242 declined for order 1001 (usr_8f3kd92jd, bob@example.com)",
    ),
    # 5-6: quoted values and UUIDs normalised -> one group
    tb([WORKER, CHARGE], "KeyError: 'sku-123' missing in cart 0f8fad5b-d9cb-469f-a165-70867728950e"),
    tb([WORKER, CHARGE], "KeyError: 'sku-999' missing in cart 7c9e6679-7425-40de-944b-e07fc1f90ae7"),
]


def test_fingerprints_group_what_belongs_together_and_separate_what_does_not() -> None:
    frame = analysis.add_fingerprints(jobs(HAND_MADE))
    fp = frame["fingerprint"].tolist()
    assert fp[0] == fp[1] == fp[2], "same template with different ids must be one group"
    assert fp[3] != fp[0], "a different exception type must be its own group"
    assert fp[4] != fp[0], "a different application frame must be its own group"
    assert fp[5] == fp[6] and fp[5] != fp[0]
    assert len(set(fp)) == 4
    row = frame.iloc[0]
    assert row["exception_type"] == "ConnectionError"
    assert row["template"] == "card <n> declined for order <n> (usr_<id>, <email>)"
    assert row["frame"] == "billing/charge.py:charge", "the innermost application frame, not the library's"
    assert frame.iloc[4]["frame"] == "billing/refund.py:refund"
    assert frame.iloc[5]["template"] == "'<str>' missing in cart <uuid>"
    # the worker stores fingerprint_text(...).id: recomputing on the analyst's side agrees
    assert fp[0] == fingerprint_text(HAND_MADE[1]).id


def test_summarize_fingerprints_counts_first_last_seen_and_describes_each_group() -> None:
    summary = analysis.summarize_fingerprints(jobs(HAND_MADE))
    assert list(summary.columns) == [
        "fingerprint",
        "count",
        "share",
        "first_seen",
        "last_seen",
        "failure_reason",
        "exception_type",
        "template",
        "frame",
        "example_id",
        "queues",
        "types",
    ]
    assert summary["count"].tolist() == [3, 2, 1, 1]
    top = summary.iloc[0]
    assert (top["exception_type"], top["frame"]) == ("ConnectionError", "billing/charge.py:charge")
    assert top["first_seen"] == T0 and top["last_seen"] == T0 + timedelta(hours=10)
    assert top["example_id"] == "job-002", "the example is the newest job of the group"
    assert top["share"] == pytest.approx(3 / 7) and top["queues"] == "billing"
    assert top["failure_reason"] == "MaxRetriesExceeded"
    assert isinstance(summary["first_seen"].dtype, pd.DatetimeTZDtype)
    assert len(analysis.summarize_fingerprints(jobs(HAND_MADE), top=2)) == 2


def test_stored_fingerprints_win_and_missing_ones_are_computed() -> None:
    stored = ["zombie-fp", "zombie-fp", None, None, None, None, None]
    frame = analysis.add_fingerprints(jobs(HAND_MADE, fingerprints=stored), details=False)
    assert frame["fingerprint"].tolist()[:2] == ["zombie-fp", "zombie-fp"]
    assert frame["fingerprint"].tolist()[2] == fingerprint_text(HAND_MADE[2]).id
    recomputed = analysis.add_fingerprints(jobs(HAND_MADE, fingerprints=stored), recompute=True)
    assert recomputed["fingerprint"].iloc[0] == fingerprint_text(HAND_MADE[0]).id
    light = jobs(HAND_MADE, fingerprints=stored).drop(columns=["error_details"])
    summary = analysis.summarize_fingerprints(light)  # light frames: stored groups only, undescribed
    assert summary["fingerprint"].tolist() == ["zombie-fp"] and summary["template"].isna().all()


def test_fingerprint_trends_per_period() -> None:
    trends = analysis.fingerprint_trends(jobs(HAND_MADE), "D", top=2)
    assert trends.index.name == "period" and str(trends.index.tz) == "UTC"
    summary = analysis.summarize_fingerprints(jobs(HAND_MADE))
    assert list(trends.columns) == [*summary["fingerprint"].iloc[:2], "other"]
    assert int(trends.to_numpy().sum()) == 7
    assert trends.index[0] == pd.Timestamp("2026-11-20", tz="UTC") and len(trends) == 2  # 30 h of failures
    assert trends.loc["2026-11-20", summary["fingerprint"].iloc[0]] == 3


def test_summaries_by_reason_queue_type_and_period(client, store) -> None:
    seed_dlq(store, 6, queue="billing", reason=FailureReason.Timeout)
    seed_dlq(store, 3, queue="media", type="media.resize.v1", reason=FailureReason.Zombie)
    frame = client.load_dlq()
    by_reason = analysis.summarize_by_reason(frame)
    assert by_reason[["failure_reason", "count"]].values.tolist() == [["Timeout", 6], ["Zombie", 3]]
    assert by_reason["share"].sum() == pytest.approx(1.0)
    assert list(by_reason.columns) == [
        "failure_reason",
        "count",
        "share",
        "first_failed_at",
        "last_failed_at",
        "attempt_count",
    ]
    assert analysis.summarize_by_queue(frame)["queue"].tolist() == ["billing", "media"]
    assert analysis.summarize_by_type(frame)["count"].tolist() == [6, 3]
    assert analysis.summarize_jobs(frame, ["queue", "failure_reason"])["count"].tolist() == [6, 3]
    per_hour = analysis.count_by_period(frame, "h")
    assert list(per_hour.columns) == ["Timeout", "Zombie"] and per_hour.to_numpy().sum() == 9
    total = analysis.count_by_period(frame, "D", by=None)
    assert list(total.columns) == ["count"] and total["count"].sum() == 9
    assert analysis.summarize_jobs(frame.iloc[:0]).empty


def test_zombie_report_with_the_handlers_idempotency(client, store) -> None:
    seed_dlq(store, 2, queue="media", type="media.resize.v1", reason=FailureReason.Zombie)
    seed_dlq(store, 1, queue="billing", type="billing.charge.v1", reason=FailureReason.Zombie)
    seed_dlq(store, 4, queue="billing", reason=FailureReason.Timeout)
    frame = client.load_dlq()
    report = analysis.zombie_report(frame, registry={"media.resize.v1": True, "billing.charge.v1": False})
    assert list(report.columns) == list(analysis.zombies.REPORT_COLUMNS)
    assert len(report) == 3
    assert report.set_index("type")["idempotent"].to_dict() == {
        "media.resize.v1": True,
        "billing.charge.v1": False,
    }
    assert str(report["idempotent"].dtype) == "boolean"
    assert (report["heartbeat_age_s"] >= 0).all() and (report["runtime_s"] >= 0).all()
    # One meaning of "runtime" everywhere: the handler's run before its last heartbeat (duration_ms).
    by_id = frame.set_index("id")
    for row in report.itertuples():
        job = by_id.loc[row.id]
        expected = (
            job["duration_ms"] / 1000
            if pd.notna(job["duration_ms"])
            else (job["heartbeat_at"] - job["started_at"]).total_seconds()
        )
        assert row.runtime_s == pytest.approx(expected)
    assert report["failed_at"].is_monotonic_decreasing
    unknown = analysis.zombie_report(frame, registry={})
    assert unknown["idempotent"].isna().all()

    class Handler:
        idempotent = True

    objects = analysis.zombie_report(frame, registry={"media.resize.v1": Handler()})
    assert int(objects["idempotent"].sum()) == 2 and objects["idempotent"].isna().sum() == 1
    per_worker = analysis.summarize_zombies(report)
    assert per_worker["count"].sum() == 3 and "heartbeat_age_s" in per_worker.columns


def test_every_plot_returns_its_axes(client, store) -> None:
    seed_dlq(store, 3, queue="media", type="media.resize.v1", reason=FailureReason.Zombie)
    frame = client.load_dlq()
    report = analysis.zombie_report(frame, registry={"media.resize.v1": True})
    axes = [
        analysis.plot_summary(analysis.summarize_by_reason(frame)),
        analysis.plot_timeline(analysis.count_by_period(frame, "min")),
        analysis.plot_timeline(analysis.count_by_period(frame, "min"), kind="line"),
        analysis.plot_fingerprint_trends(
            analysis.fingerprint_trends(frame, "h"), analysis.summarize_fingerprints(frame)
        ),
        analysis.plot_zombies(report),
        analysis.plot_zombies(report.iloc[:0]),
        analysis.plot_timeline(analysis.count_by_period(frame.iloc[:0], "min")),
        analysis.plot_failure_rates(analysis.failure_rates(frame, frame.iloc[:0])),
    ]
    assert all(isinstance(ax, matplotlib.axes.Axes) for ax in axes)
    assert axes[0].get_title() == "Dead jobs by failure reason (3 in all)"
    import matplotlib.pyplot as plt

    plt.close("all")


def test_the_charts_follow_the_rules_a_reader_needs(client, store) -> None:
    """Counts are bars; rankings put the largest on top; labels are whole; titles give the unit, the
    period and UTC."""
    import matplotlib.pyplot as plt

    long_type = "reports.render.quarterly-regional-breakdown-with-a-very-long-name.v1"
    seed_dlq(store, 5, queue="billing", reason=FailureReason.MaxRetriesExceeded)
    seed_dlq(
        store,
        2,
        queue="media",
        type="media.resize.v1",
        reason=FailureReason.Zombie,
        error=lambda i: f"Zombie detected: heartbeat expired; worker w-{i}",
    )
    seed_dlq(
        store,
        1,
        queue="reports",
        type=long_type,
        reason=FailureReason.Fatal,
        error=lambda i: traceback_text(
            "KeyError", "region 'apac-7' is missing from the quarterly figures table"
        ),
    )
    frame = client.load_dlq()

    ranking = analysis.plot_summary(analysis.summarize_by_type(frame))
    labels = [t.get_text() for t in ranking.get_yticklabels()]
    assert labels[-1] == "billing.charge.v1", "the largest bar is on top"
    assert long_type in "".join(label.replace("\n", "") for label in labels), (
        "a long label is wrapped, not cut"
    )

    per_reason = analysis.count_by_period(frame, "3h")
    timeline = analysis.plot_timeline(per_reason)
    assert timeline.get_title() == "Dead jobs per 3 hours by failure reason (UTC)"
    assert timeline.get_ylabel() == "dead jobs per 3 hours" and timeline.get_xlabel() == "time (UTC)"
    assert timeline.patches and not timeline.lines, "counts are bars"
    legend = [t.get_text() for t in timeline.get_legend().get_texts()]
    assert legend == ["Fatal", "Zombie", "MaxRetriesExceeded"], "the legend reads like the stack: top first"

    groups = analysis.summarize_fingerprints(frame)
    first = analysis.plot_fingerprint_trends(analysis.fingerprint_trends(frame, "h"), groups)
    panels = first.figure.axes
    assert len(panels) == 3 and all(p.patches for p in panels)
    titles = [p.get_title(loc="left").replace("\n", " ") for p in panels]
    assert "region '<str>' is missing from the quarterly figures table" in " ".join(titles), titles
    assert titles[0].startswith("MaxRetriesExceeded · ") and titles[0].endswith("(5 jobs)")
    assert first.figure.get_suptitle() == "Dead jobs per hour by error group (UTC)"

    rates = analysis.failure_rates(frame, frame[frame["queue"] == "billing"])
    bars = analysis.plot_failure_rates(rates)
    ordered = [t.get_text() for t in bars.get_yticklabels()]
    assert ordered[-1].replace("\n", "") == rates.index[0], "the highest rate is on top"
    assert rates.loc["billing.charge.v1", "failure_rate"] == 0.5
    assert "50.0%  (5 of 10)" in [t.get_text() for t in bars.texts]

    report = analysis.zombie_report(frame, registry={"media.resize.v1": True})
    scatter = analysis.plot_zombies(report)
    assert scatter.get_xlabel() == "runtime before the last heartbeat [s]"
    assert next(t.get_text() for t in scatter.get_legend().get_texts()).endswith("(2)")
    plt.close("all")


def test_add_fingerprints_works_on_light_frames(store) -> None:
    def text(i: int) -> str:
        return traceback_text("ValueError", f"bad order {i}")

    # As the worker stores them: the text and its fingerprint.
    seed_dlq(store, 2, queue="light", error=text, fingerprint=lambda i: fingerprint_text(text(i)).id)
    client = DbClient(store, actor="t")
    light = analysis.add_fingerprints(client.load_dlq(queue="light", heavy=False))
    heavy = analysis.add_fingerprints(client.load_dlq(queue="light"))
    assert list(light["fingerprint"]) == list(heavy["fingerprint"]) and light["fingerprint"].notna().all()
    assert light["template"].isna().all() and list(heavy["template"]) == ["bad order <n>"] * 2
    with pytest.raises(KeyError, match="heavy=True"):
        analysis.add_fingerprints(client.load_dlq(queue="light", heavy=False), recompute=True)


def test_a_group_keeps_its_colour_in_every_panel() -> None:
    from matplotlib.colors import to_rgba

    from chokaq_ops.analysis.plots import colour_of

    frame = jobs(HAND_MADE)
    wide = analysis.fingerprint_trends(frame, "D", top=2)
    narrow = analysis.fingerprint_trends(frame, "D", top=1)
    colours = {}
    for trends in (wide, narrow):
        ax = analysis.plot_fingerprint_trends(trends)
        for panel, column in zip(ax.figure.axes, trends.columns, strict=True):
            colours.setdefault(column, set()).add(panel.patches[0].get_facecolor())
    first = wide.columns[0]
    assert colours[first] == {to_rgba(colour_of(first))}, "the same group, the same colour in both charts"
    assert colours["other"] == {to_rgba(colour_of("other"))}
    assert colour_of("Zombie") == colour_of("Zombie") != colour_of("Fatal")
