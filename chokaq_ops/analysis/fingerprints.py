"""Error groups: dead jobs that failed for the same reason, by fingerprint, with counts and trends.

A fingerprint is exception type + normalised message template + innermost application frame
(`chokaq_ops.fingerprint`). The worker stores it on every DLQ row; rows without one (written by an older
worker, or imported) are fingerprinted here from their error details with the same function, so both
sides always agree.
"""

from __future__ import annotations

import pandas as pd

from chokaq_ops.analysis import columns as C
from chokaq_ops.analysis.summaries import count_by_period
from chokaq_ops.fingerprint import fingerprint_text

OTHER = "other"


def add_fingerprints(jobs: pd.DataFrame, *, recompute: bool = False, details: bool = True) -> pd.DataFrame:
    """A copy of `jobs` with every fingerprint filled in and, optionally, what it is made of.

    Parameters
    ----------
    jobs : DataFrame
        A job frame. With ``error_details`` (``heavy=True``, the default) missing fingerprints are
        computed and the detail columns filled; a light frame keeps its stored fingerprints and gets
        empty detail columns (``recompute=True`` needs the text and raises KeyError without it).
    recompute : bool
        Recompute every fingerprint from ``error_details`` instead of only the missing ones.
    details : bool
        Add ``exception_type``, ``template`` and ``frame`` columns.

    Returns
    -------
    DataFrame
        `jobs` with ``fingerprint`` (str) filled where error details exist, and with `details`:

        - ``exception_type`` (str): the raised exception's type, e.g. ``KeyError``
        - ``template`` (str): the message with numbers, ids, hex, UUIDs, e-mails and quoted values
          replaced by placeholders (``<n>``, ``<id>``, ``<hex>``, ``<uuid>``, ``<email>``, ``'<str>'``)
        - ``frame`` (str): the innermost application frame, ``path/module.py:function``

        Each distinct error text is parsed once.
    """
    out = jobs.copy()
    if C.ERROR_DETAILS not in out.columns:
        # A light frame (heavy=False): the stored fingerprints are all there is; the parts they are made
        # of need the text, so the detail columns come back empty rather than failing the call.
        if recompute or C.FINGERPRINT not in out.columns:
            raise KeyError(
                "recomputing fingerprints needs the error_details column: load the frame with heavy=True"
            )
        out[C.FINGERPRINT] = out[C.FINGERPRINT].astype(C.STRING_DTYPE)
        if details:
            for column in (C.EXCEPTION_TYPE, C.TEMPLATE, C.FRAME):
                out[column] = pd.Series(pd.NA, index=out.index, dtype=C.STRING_DTYPE)
        return out
    texts = out[C.ERROR_DETAILS]
    stored = out[C.FINGERPRINT] if C.FINGERPRINT in out.columns else pd.Series(pd.NA, index=out.index)
    need = texts.notna() & (stored.isna() | recompute)
    if details:
        need_parse = texts.notna()
    else:
        need_parse = need
    parsed = {t: fingerprint_text(t) for t in pd.unique(texts[need_parse])}
    fp = stored.astype(object).copy()
    fp[need] = texts[need].map(lambda t: parsed[t].id)
    out[C.FINGERPRINT] = fp.astype(C.STRING_DTYPE)
    if details:
        for column, attribute in (
            (C.EXCEPTION_TYPE, "exception_type"),
            (C.TEMPLATE, "template"),
            (C.FRAME, "frame"),
        ):
            values = texts.map(lambda t, a=attribute: getattr(parsed[t], a) if isinstance(t, str) else None)
            out[column] = values.astype(object).where(values.notna(), None).astype(C.STRING_DTYPE)
    return out


def summarize_fingerprints(jobs: pd.DataFrame, *, top: int | None = None) -> pd.DataFrame:
    """One row per error group, largest first.

    Parameters
    ----------
    jobs : DataFrame
        A job frame of dead jobs. With ``error_details`` (heavy frames) missing fingerprints are computed
        and each group is described; without it, rows with no stored fingerprint are left out and the
        description columns are empty.
    top : int, optional
        Keep the `top` largest groups.

    Returns
    -------
    DataFrame
        - ``fingerprint`` (str): the group id
        - ``count`` (int64), ``share`` (float64, of all rows in `jobs`)
        - ``first_seen``, ``last_seen`` (datetime64[us, UTC]): first and last failure in the group
        - ``failure_reason`` (category): the group's most common reason
        - ``exception_type``, ``template``, ``frame`` (str): the group's description, from its newest job
        - ``example_id`` (str): the group's newest job
        - ``queues``, ``types`` (str): comma-separated distinct queues and types in the group
    """
    heavy = C.ERROR_DETAILS in jobs.columns
    frame = add_fingerprints(jobs, details=False) if heavy else jobs
    frame = frame[frame[C.FINGERPRINT].notna()]
    result_columns = [
        C.FINGERPRINT,
        C.COUNT,
        C.SHARE,
        C.FIRST_SEEN,
        C.LAST_SEEN,
        C.FAILURE_REASON,
        C.EXCEPTION_TYPE,
        C.TEMPLATE,
        C.FRAME,
        C.EXAMPLE_ID,
        "queues",
        "types",
    ]
    if frame.empty:
        return pd.DataFrame(
            {
                C.FINGERPRINT: pd.Series([], dtype=C.STRING_DTYPE),
                C.COUNT: pd.Series([], dtype="int64"),
                C.SHARE: pd.Series([], dtype="float64"),
                C.FIRST_SEEN: pd.Series([], dtype=C.TIME_DTYPE),
                C.LAST_SEEN: pd.Series([], dtype=C.TIME_DTYPE),
                C.FAILURE_REASON: pd.Series([], dtype=C.REASON_DTYPE),
            }
            | {c: pd.Series([], dtype=C.STRING_DTYPE) for c in result_columns[6:]}
        )
    newest = frame.sort_values([C.FAILED_AT, C.ID], ascending=[False, True]).drop_duplicates(C.FINGERPRINT)
    newest = newest.set_index(C.FINGERPRINT)
    g = frame.groupby(C.FINGERPRINT, sort=False)
    out = pd.DataFrame(
        {
            C.COUNT: g.size().astype("int64"),
            C.FIRST_SEEN: g[C.FAILED_AT].min(),
            C.LAST_SEEN: g[C.FAILED_AT].max(),
            C.FAILURE_REASON: g[C.FAILURE_REASON].agg(_mode),
            "queues": g[C.QUEUE].agg(_distinct),
            "types": g[C.TYPE].agg(_distinct),
        }
    )
    out[C.EXAMPLE_ID] = newest[C.ID].reindex(out.index)
    described = [
        fingerprint_text(t) if isinstance(t, str) else None
        for t in (newest[C.ERROR_DETAILS].reindex(out.index) if heavy else [None] * len(out))
    ]
    out[C.EXCEPTION_TYPE] = [d.exception_type if d else None for d in described]
    out[C.TEMPLATE] = [d.template if d else None for d in described]
    out[C.FRAME] = [d.frame if d else None for d in described]
    out[C.SHARE] = out[C.COUNT] / len(jobs)
    out = out.reset_index().rename(columns={"index": C.FINGERPRINT})
    out = out.sort_values([C.COUNT, C.LAST_SEEN], ascending=[False, False], ignore_index=True)
    for col in (C.FIRST_SEEN, C.LAST_SEEN):
        out[col] = out[col].astype(C.TIME_DTYPE)
    out[C.FAILURE_REASON] = out[C.FAILURE_REASON].astype(object).astype(C.REASON_DTYPE)
    for col in (C.FINGERPRINT, C.EXCEPTION_TYPE, C.TEMPLATE, C.FRAME, C.EXAMPLE_ID, "queues", "types"):
        out[col] = out[col].astype(object).where(out[col].notna(), None).astype(C.STRING_DTYPE)
    out = out[result_columns]
    return out.head(top) if top is not None else out


def fingerprint_trends(
    jobs: pd.DataFrame, freq: str = "D", *, top: int = 10, time_column: str = C.FAILED_AT
) -> pd.DataFrame:
    """Failures per period for the largest error groups: is a group growing, new, or gone?

    Parameters
    ----------
    jobs : DataFrame
        A job frame of dead jobs (fingerprints are filled in as by `summarize_fingerprints`).
    freq : str
        A pandas frequency (``"h"``, ``"D"``, ``"W"`` ...).
    top : int
        Groups to keep as columns, by total count; the rest are summed in a column ``other``.
    time_column : str
        The time that places a failure in a period (default ``failed_at``).

    Returns
    -------
    DataFrame
        Index ``period`` (DatetimeIndex, UTC, every period from the first to the last); one int64 column
        per fingerprint id, largest group first, then ``other`` when there are more than `top` groups.
        Label the columns with `summarize_fingerprints` (fingerprint -> template).
    """
    frame = add_fingerprints(jobs, details=False) if C.ERROR_DETAILS in jobs.columns else jobs
    frame = frame[frame[C.FINGERPRINT].notna()]
    counts = frame[C.FINGERPRINT].value_counts()
    keep = list(counts.index[:top])
    grouped = frame[C.FINGERPRINT].where(frame[C.FINGERPRINT].isin(keep), OTHER)
    table = count_by_period(
        frame.assign(**{C.FINGERPRINT: grouped}), freq, by=C.FINGERPRINT, time_column=time_column
    )
    ordered = [c for c in keep if c in table.columns] + ([OTHER] if OTHER in table.columns else [])
    return table[ordered]


def _mode(values: pd.Series) -> object:
    counts = values.value_counts()
    return counts.index[0] if len(counts) else None


def _distinct(values: pd.Series) -> str:
    return ",".join(sorted({str(v) for v in values.dropna()}))
