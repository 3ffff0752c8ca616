"""Counts of dead (or any) jobs by reason, queue, type and time period."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from chokaq_ops.analysis import columns as C


def _keys(by: str | Sequence[str]) -> list[str]:
    return [by] if isinstance(by, str) else list(by)


def summarize_jobs(jobs: pd.DataFrame, by: str | Sequence[str] = C.FAILURE_REASON) -> pd.DataFrame:
    """Count jobs per value of one or more columns, largest group first.

    Parameters
    ----------
    jobs : DataFrame
        A job frame (see `chokaq_ops.analysis.columns`), typically from ``client.load_dlq()``.
    by : str or list of str
        Column(s) to group by, e.g. ``"failure_reason"``, ``"queue"``, ``"type"``,
        ``["queue", "failure_reason"]``.

    Returns
    -------
    DataFrame
        One row per group with the `by` column(s) and

        - ``count`` (int64): jobs in the group
        - ``share`` (float64): fraction of all jobs in `jobs` [0..1]
        - ``first_failed_at``, ``last_failed_at`` (datetime64[us, UTC]): first and last failure
          (NaT for jobs that did not fail)
        - ``attempt_count`` (float64): mean attempts of the group's jobs

        Categorical groups with no jobs are left out.
    """
    keys = _keys(by)
    missing = [k for k in keys if k not in jobs.columns]
    if missing:
        raise KeyError(f"no column {missing[0]!r} in the frame; columns: {', '.join(jobs.columns)}")
    if jobs.empty:
        return pd.DataFrame(
            {k: pd.Series([], dtype=jobs[k].dtype) for k in keys}
            | {
                C.COUNT: pd.Series([], dtype="int64"),
                C.SHARE: pd.Series([], dtype="float64"),
                C.FIRST_FAILED_AT: pd.Series([], dtype=C.TIME_DTYPE),
                C.LAST_FAILED_AT: pd.Series([], dtype=C.TIME_DTYPE),
                C.ATTEMPT_COUNT: pd.Series([], dtype="float64"),
            }
        )
    grouped = jobs.groupby(keys, observed=True, dropna=False)
    out = grouped.agg(
        **{
            C.COUNT: (C.ID, "size"),
            C.FIRST_FAILED_AT: (C.FAILED_AT, "min"),
            C.LAST_FAILED_AT: (C.FAILED_AT, "max"),
            C.ATTEMPT_COUNT: (C.ATTEMPT_COUNT, "mean"),
        }
    ).reset_index()
    out[C.COUNT] = out[C.COUNT].astype("int64")
    out.insert(len(keys) + 1, C.SHARE, out[C.COUNT] / len(jobs))
    for col in (C.FIRST_FAILED_AT, C.LAST_FAILED_AT):
        out[col] = out[col].astype(C.TIME_DTYPE)
    return out.sort_values([C.COUNT, *keys], ascending=[False] + [True] * len(keys), ignore_index=True)


def summarize_by_reason(jobs: pd.DataFrame) -> pd.DataFrame:
    """`summarize_jobs` by ``failure_reason``; columns: failure_reason, count, share, first_failed_at,
    last_failed_at, attempt_count."""
    return summarize_jobs(jobs, C.FAILURE_REASON)


def summarize_by_queue(jobs: pd.DataFrame) -> pd.DataFrame:
    """`summarize_jobs` by ``queue``; columns: queue, count, share, first_failed_at, last_failed_at,
    attempt_count."""
    return summarize_jobs(jobs, C.QUEUE)


def summarize_by_type(jobs: pd.DataFrame) -> pd.DataFrame:
    """`summarize_jobs` by ``type``; columns: type, count, share, first_failed_at, last_failed_at,
    attempt_count."""
    return summarize_jobs(jobs, C.TYPE)


def count_by_period(
    jobs: pd.DataFrame,
    freq: str = "h",
    *,
    by: str | None = C.FAILURE_REASON,
    time_column: str = C.FAILED_AT,
) -> pd.DataFrame:
    """Jobs per time period, one column per group: the table behind a stacked timeline.

    Parameters
    ----------
    jobs : DataFrame
        A job frame.
    freq : str
        A pandas frequency: ``"min"``, ``"h"`` (hour), ``"D"`` (day), ``"W"``, ``"15min"`` ...
    by : str or None
        Column whose values become the result's columns (``failure_reason``, ``queue``, ``type``,
        ``fingerprint`` ...); None counts all jobs in one column named ``count``.
    time_column : str
        The time that places a job in a period: ``failed_at`` (default), ``created_at``,
        ``finished_at`` ...

    Returns
    -------
    DataFrame
        Index ``period`` (DatetimeIndex, UTC, every period from the first to the last, empty ones
        included); one int64 column per group value (or ``count``), largest group first: the number
        of jobs whose `time_column` falls in the period. Jobs without that time are left out.
    """
    times = jobs[time_column]
    keep = times.notna()
    if by is None:
        series = pd.Series(1, index=times[keep])
        out = series.resample(freq).sum().to_frame(C.COUNT)
    else:
        frame = pd.DataFrame({"t": times[keep], "g": jobs.loc[keep, by]})
        if isinstance(frame["g"].dtype, pd.CategoricalDtype):
            frame["g"] = frame["g"].cat.remove_unused_categories()
        out = (
            frame.groupby([pd.Grouper(key="t", freq=freq), "g"], observed=True)
            .size()
            .unstack("g", fill_value=0)
        )
        if not out.empty:
            full = pd.date_range(out.index.min(), out.index.max(), freq=freq, tz="UTC")
            out = out.reindex(full, fill_value=0)
        out.columns = [str(c) for c in out.columns]
        totals = out.sum()
        out = out[sorted(out.columns, key=lambda c: (-totals[c], c))]
        out.columns.name = by
    out = out.astype("int64")
    out.index.name = C.PERIOD
    return out


def failure_rates(dead: pd.DataFrame, succeeded: pd.DataFrame, by: str = C.TYPE) -> pd.DataFrame:
    """Of the jobs that finished, the share that ended in the DLQ, per `by` (type, queue ...).

    Parameters
    ----------
    dead, succeeded : DataFrame
        Job frames of the DLQ and the archive (``load_archive(heavy=False)`` is enough), over the same
        window.
    by : str
        The column to group by (default ``type``).

    Returns
    -------
    DataFrame
        Index `by`; ``failed`` and ``succeeded`` (int64) and ``failure_rate`` (float64, failed / both),
        highest rate first.
    """
    failed = dead.groupby(by, observed=True).size().rename("failed")
    done = succeeded.groupby(by, observed=True).size().rename("succeeded")
    out = pd.concat([failed, done], axis=1).fillna(0).astype("int64")
    out.index = out.index.astype(str)
    out.index.name = by
    out["failure_rate"] = out["failed"] / (out["failed"] + out["succeeded"])
    return out.sort_values(["failure_rate", "failed"], ascending=False)
