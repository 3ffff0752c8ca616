"""matplotlib charts for the summaries; each draws on `ax` (a new figure when None) and returns the Axes.

Conventions, so a chart can be read without its notebook: counts of jobs are bars (a line or an area
between two sparse periods invents jobs that never were), the largest group is on top of a ranking and
at the bottom of a stack, labels are never cut (long ones wrap), titles say what is counted, per what
period, and that times are UTC.
"""

from __future__ import annotations

import hashlib
import textwrap
from typing import TYPE_CHECKING, Any

import pandas as pd

from chokaq_ops.analysis import columns as C
from chokaq_ops.models import FailureReason

if TYPE_CHECKING:
    from matplotlib.axes import Axes

UTC_LABEL = "time (UTC)"


def _axes(ax: Axes | None, size: tuple[float, float] = (8, 4)) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=size, layout="constrained")
    return ax


def _wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False)) or text


def _words(name: str | None) -> str:
    return (name or "group").replace("_", " ")


def _step(index: pd.DatetimeIndex) -> pd.Timedelta:
    """The length of one period of a `count_by_period` index."""
    if index.freq is not None:
        return pd.Timedelta(pd.tseries.frequencies.to_offset(index.freq).nanos, "ns")
    if len(index) > 1:
        return pd.Series(index).diff().min()
    return pd.Timedelta(hours=1)


def period_words(step: pd.Timedelta) -> str:
    """'hour', '3 hours', 'day', '15 minutes': what one bar counts."""
    for unit, size in (
        ("day", pd.Timedelta(days=1)),
        ("hour", pd.Timedelta(hours=1)),
        ("minute", pd.Timedelta(minutes=1)),
    ):
        if step >= size and step % size == pd.Timedelta(0):
            n = step // size
            return unit if n == 1 else f"{n} {unit}s"
    return f"{step.total_seconds():g} s"


def _date_axis(ax: Axes) -> None:
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator(minticks=4, maxticks=10)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set_xlabel(UTC_LABEL)


def _whole_counts(ax: Axes, ticks: int = 8) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(nbins=ticks, integer=True))


# A key keeps its colour in every panel and every notebook run: failure reasons by their number, "other"
# grey, anything else (queues, types, fingerprints, workers) by a stable hash into tab20. The colour of a
# group no longer depends on which other groups a panel happens to show or on their order.
_PALETTE = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf",
    "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5",
]  # fmt: skip
_OTHER = "#7f7f7f"


def colour_of(key: object) -> str:
    """The colour a group key gets in every chart (stable across panels, frames and sessions)."""
    text = str(key)
    if text in ("other", "all other groups"):
        return _OTHER
    reason = next((r for r in FailureReason if r.name == text), None)
    if reason is not None:
        return _PALETTE[int(reason) % len(_PALETTE)]
    digest = hashlib.sha1(text.encode(), usedforsecurity=False).digest()
    return _PALETTE[int.from_bytes(digest[:4], "big") % len(_PALETTE)]


def _stacked_bars(ax: Axes, counts: pd.DataFrame, labels: dict[str, str] | None = None) -> None:
    """Bars per period, one colour per column, the largest column at the bottom."""
    index = counts.index.tz_convert("UTC").tz_localize(None)
    step = _step(counts.index)
    order = counts.sum().sort_values(ascending=False).index
    bottom = pd.Series(0, index=index, dtype="int64")
    for column in order:
        values = counts[column].to_numpy()
        name = (labels or {}).get(str(column), str(column))
        ax.bar(
            index + step / 2,
            values,
            width=step * 0.85,
            bottom=bottom.to_numpy(),
            label=name,
            color=colour_of(column),
        )
        bottom += values
    _date_axis(ax)
    _whole_counts(ax)


def plot_summary(
    summary: pd.DataFrame, ax: Axes | None = None, *, top: int = 15, title: str | None = None
) -> Axes:
    """Horizontal bars of ``count`` per group of a `summarize_jobs` result (its first column), the
    largest on top, each bar labelled with its count."""
    key = summary.columns[0]
    data = summary.sort_values(C.COUNT, ascending=False, kind="stable").head(top).iloc[::-1]
    ax = _axes(ax, (8, max(2.2, 0.4 * len(data) + 1.2)))
    labels = [_wrap(str(v), 40) for v in data[key]]
    ax.barh(labels, data[C.COUNT], color="tab:red" if key == C.FAILURE_REASON else "tab:blue")
    for y, n in enumerate(data[C.COUNT]):
        ax.annotate(f"{n:,}", (n, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize=8)
    total = int(summary[C.COUNT].sum())
    shown = "" if len(summary) <= top else f", top {top} of {len(summary)}"
    ax.set_xlabel("dead jobs")
    ax.set_title(title or f"Dead jobs by {_words(key)} ({total:,} in all{shown})")
    ax.margins(x=0.15)
    return ax


def plot_timeline(
    counts: pd.DataFrame,
    ax: Axes | None = None,
    *,
    kind: str = "bar",
    title: str | None = None,
    what: str = "dead jobs",
) -> Axes:
    """Jobs per period from `count_by_period`: stacked bars (``kind="bar"``, the default: counts are
    sparse), or one line per group (``"line"``). `what` names the jobs counted, for the labels."""
    ax = _axes(ax, (10, 4))
    if counts.empty:
        ax.set_title(title or f"No {what} in range")
        return ax
    step = period_words(_step(counts.index))
    group = _words(counts.columns.name)
    if kind == "line":
        data = counts.copy()
        data.index = data.index.tz_convert("UTC").tz_localize(None) + _step(counts.index) / 2
        for column in counts.sum().sort_values(ascending=False).index:
            ax.plot(data.index, data[column], marker="o", markersize=3, label=str(column))
        _date_axis(ax)
    elif kind == "bar":
        _stacked_bars(ax, counts)
    else:
        raise ValueError(f"kind must be 'bar' or 'line', not {kind!r}")
    ax.set_ylabel(f"{what} per {step}")
    ax.set_title(title or f"{what.capitalize()} per {step} by {group} (UTC)")
    if len(counts.columns) > 1 or counts.columns[0] != C.COUNT:
        handles, names = ax.get_legend_handles_labels()
        if kind == "bar":  # the legend reads top to bottom like the stack
            handles, names = handles[::-1], names[::-1]
        ax.legend(
            handles, names, title=group, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False
        )
    return ax


def _group_labels(summary: pd.DataFrame | None, width: int) -> dict[str, str]:
    labels: dict[str, str] = {}
    if summary is None or summary.empty:
        return labels
    for row in summary.itertuples(index=False):
        text = f"{getattr(row, C.EXCEPTION_TYPE) or ''}: {getattr(row, C.TEMPLATE) or ''}".strip(": ")
        text = f"{getattr(row, C.FAILURE_REASON)} · {text}" if text else str(getattr(row, C.FINGERPRINT))
        labels[str(getattr(row, C.FINGERPRINT))] = _wrap(text, width)
    return labels


def plot_fingerprint_trends(
    trends: pd.DataFrame,
    summary: pd.DataFrame | None = None,
    ax: Axes | None = None,
    *,
    title: str | None = None,
    label_width: int = 90,
) -> Axes:
    """Dead jobs per period of each error group of `fingerprint_trends`, labelled with its reason,
    exception and message template (wrapped, never cut) when `summary` (`summarize_fingerprints`) is
    given.

    Without `ax`: one panel per group, largest first, on a shared time axis and a shared count scale
    (a small group's bars stay small), and the first panel's Axes is returned (``ax.figure`` holds them
    all). With `ax`: stacked bars on it with the labels in a legend below."""
    labels = _group_labels(summary, label_width)
    if trends.empty:
        ax = _axes(ax, (10, 3))
        ax.set_title(title or "No failures in range")
        return ax
    step = period_words(_step(trends.index))
    heading = title or f"Dead jobs per {step} by error group (UTC)"
    if ax is not None:
        _stacked_bars(ax, trends, labels)
        ax.set_ylabel(f"dead jobs per {step}")
        ax.set_title(heading)
        ax.legend(loc="upper left", bbox_to_anchor=(0, -0.15), fontsize=7, frameon=False)
        return ax
    import matplotlib.pyplot as plt

    n = len(trends.columns)
    fig, axes = plt.subplots(
        n, 1, sharex=True, sharey=True, figsize=(10, 1.15 * n + 1.2), layout="constrained"
    )
    axes = [axes] if n == 1 else list(axes)
    index = trends.index.tz_convert("UTC").tz_localize(None)
    width = _step(trends.index)
    for panel, column in zip(axes, trends.columns, strict=True):
        panel.bar(index + width / 2, trends[column], width=width * 0.85, color=colour_of(column))
        name = labels.get(str(column), "all other groups" if column == "other" else str(column))
        total = int(trends[column].sum())
        panel.set_title(f"{name}  ({total:,} job{'' if total == 1 else 's'})", loc="left", fontsize=8)
        panel.spines[["top", "right"]].set_visible(False)
        _whole_counts(panel, ticks=3)
    axes[n // 2].set_ylabel(f"dead jobs per {step}")
    _date_axis(axes[-1])
    fig.suptitle(heading)
    return axes[0]


def plot_failure_rates(rates: pd.DataFrame, ax: Axes | None = None, *, title: str | None = None) -> Axes:
    """Horizontal bars of ``failure_rate`` (0-1) per row of `rates` (index: job type or queue; columns
    ``failed`` and ``succeeded``), the highest on top, each labelled "12 of 340"."""
    data = rates.sort_values(["failure_rate", "failed"], ascending=True, kind="stable")
    ax = _axes(ax, (8, max(2.2, 0.4 * len(data) + 1.2)))
    ax.barh([_wrap(str(v), 40) for v in data.index], data["failure_rate"] * 100, color="tab:red")
    for y, row in enumerate(data.itertuples()):
        total = int(row.failed + row.succeeded)
        ax.annotate(
            f"{row.failure_rate:.1%}  ({int(row.failed):,} of {total:,})",
            (row.failure_rate * 100, y),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    from matplotlib.ticker import PercentFormatter

    top = float(data["failure_rate"].max() * 100) if len(data) else 100.0
    ax.set_xlim(0, max(top, 1.0) * 1.4)  # room for the labels; ticks stop at 100 %
    ax.set_xticks([t for t in ax.get_xticks() if 0 <= t <= 100])
    ax.xaxis.set_major_formatter(PercentFormatter(100))
    ax.set_xlabel("finished jobs that ended in the DLQ [%]")
    ax.set_title(title or f"Failure rate by {_words(rates.index.name)}")
    return ax


def plot_zombies(report: pd.DataFrame, ax: Axes | None = None, *, title: str | None = None) -> Axes:
    """Runtime against heartbeat age per zombie, one colour per worker; idempotent types are hollow.

    Runtime is how long the handler ran before its last heartbeat, heartbeat age how long the job had
    then been silent when the sweep declared it dead: a dead host shows as a column of its jobs at one
    heartbeat age, a hung handler as a long runtime."""
    from matplotlib.lines import Line2D

    ax = _axes(ax, (8, 5))
    if report.empty:
        ax.set_title(title or "No zombies")
        return ax
    handles: list[Any] = []
    for worker, rows in report.groupby(C.WORKER_ID, dropna=False, observed=True):
        color = colour_of(worker)
        idem = rows[C.IDEMPOTENT].fillna(False).astype(bool)
        ax.scatter(rows.loc[~idem, C.RUNTIME_S], rows.loc[~idem, C.HEARTBEAT_AGE_S], s=40, color=color)
        ax.scatter(
            rows.loc[idem, C.RUNTIME_S],
            rows.loc[idem, C.HEARTBEAT_AGE_S],
            s=40,
            facecolors="none",
            edgecolors=color,
        )
        handles.append(Line2D([], [], marker="o", linestyle="", color=color, label=f"{worker} ({len(rows)})"))
    handles += [
        Line2D([], [], marker="o", linestyle="", color="grey", label="not idempotent: review"),
        Line2D([], [], marker="o", linestyle="", markerfacecolor="none", color="grey", label="idempotent"),
    ]
    ax.set_xlabel("runtime before the last heartbeat [s]")
    ax.set_ylabel("heartbeat age when declared dead [s]")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_title(title or f"{len(report)} zombies: how long they ran, how long they were silent")
    ax.legend(
        handles=handles,
        title="worker (zombies)",
        loc="upper left",
        bbox_to_anchor=(1.01, 1),
        fontsize=8,
        frameon=False,
    )
    return ax
