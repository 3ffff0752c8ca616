"""matplotlib charts for the summaries; each draws on `ax` (a new figure when None) and returns the Axes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from chokaq_ops.analysis import columns as C

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def _axes(ax: Axes | None, size: tuple[float, float] = (8, 4)) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=size)
    return ax


def plot_summary(
    summary: pd.DataFrame, ax: Axes | None = None, *, top: int = 15, title: str | None = None
) -> Axes:
    """Horizontal bars of ``count`` per group of a `summarize_jobs` result (its first column)."""
    key = summary.columns[0]
    data = summary.head(top).iloc[::-1]
    ax = _axes(ax, (8, max(2.0, 0.35 * len(data) + 1)))
    labels = [str(v) for v in data[key]]
    ax.barh(labels, data[C.COUNT], color="tab:red" if key == C.FAILURE_REASON else "tab:blue")
    for y, n in enumerate(data[C.COUNT]):
        ax.annotate(f"{n:,}", (n, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_xlabel("dead jobs")
    ax.set_title(title or f"Dead jobs by {key}")
    ax.margins(x=0.15)
    return ax


def plot_timeline(
    counts: pd.DataFrame, ax: Axes | None = None, *, kind: str = "area", title: str | None = None
) -> Axes:
    """Stacked jobs per period from `count_by_period` (``kind``: area, bar or line)."""
    ax = _axes(ax, (10, 4))
    if counts.empty:
        ax.set_title(title or "No jobs in range")
        return ax
    data = counts.copy()
    data.index = data.index.tz_convert("UTC").tz_localize(None)  # matplotlib date axis, labelled UTC
    if kind == "bar" or len(data) == 1:  # one period has no extent to draw an area over
        data.plot.bar(stacked=True, ax=ax, width=0.9)
    elif kind == "line":
        data.plot.line(ax=ax)
    else:
        data.plot.area(ax=ax, stacked=True, linewidth=0)
    ax.set_xlabel("period (UTC)")
    ax.set_ylabel("jobs")
    ax.set_title(title or f"Jobs per period by {counts.columns.name or 'group'}")
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    return ax


def plot_fingerprint_trends(
    trends: pd.DataFrame,
    summary: pd.DataFrame | None = None,
    ax: Axes | None = None,
    *,
    title: str | None = None,
    label_width: int = 60,
) -> Axes:
    """One line per error group of `fingerprint_trends`, labelled with its template when `summary` (from
    `summarize_fingerprints`) is given."""
    ax = _axes(ax, (10, 4))
    labels: dict[str, str] = {}
    if summary is not None and not summary.empty:
        for row in summary.itertuples(index=False):
            text = f"{getattr(row, C.EXCEPTION_TYPE) or ''}: {getattr(row, C.TEMPLATE) or ''}".strip(": ")
            labels[str(getattr(row, C.FINGERPRINT))] = text[:label_width] or str(getattr(row, C.FINGERPRINT))
    if trends.empty:
        ax.set_title(title or "No failures in range")
        return ax
    index = trends.index.tz_convert("UTC").tz_localize(None)
    for column in trends.columns:
        ax.plot(index, trends[column], marker="o", markersize=3, label=labels.get(str(column), str(column)))
    ax.set_xlabel("period (UTC)")
    ax.set_ylabel("dead jobs")
    ax.set_title(title or "Error groups over time")
    ax.legend(loc="upper left", fontsize=7, frameon=False)
    return ax


def plot_zombies(report: pd.DataFrame, ax: Axes | None = None, *, title: str | None = None) -> Axes:
    """Runtime against heartbeat age per zombie, one colour per worker; idempotent types are hollow."""
    ax = _axes(ax, (8, 5))
    if report.empty:
        ax.set_title(title or "No zombies")
        return ax
    for worker, rows in report.groupby(C.WORKER_ID, dropna=False, observed=True):
        idem = rows[C.IDEMPOTENT].fillna(False).astype(bool)
        kwargs: dict[str, Any] = {"s": 30, "label": str(worker)}
        points = ax.scatter(rows.loc[~idem, C.RUNTIME_S], rows.loc[~idem, C.HEARTBEAT_AGE_S], **kwargs)
        if idem.any():
            ax.scatter(
                rows.loc[idem, C.RUNTIME_S],
                rows.loc[idem, C.HEARTBEAT_AGE_S],
                s=30,
                facecolors="none",
                edgecolors=points.get_facecolor()[0] if len(points.get_offsets()) else None,
            )
    ax.set_xlabel("runtime at death [s]")
    ax.set_ylabel("heartbeat age at death [s]")
    ax.set_title(title or "Zombies: how long they ran, how long they were silent")
    ax.legend(title="worker", fontsize=8, frameon=False)
    return ax
