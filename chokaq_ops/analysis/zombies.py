"""Zombie review: the evidence behind each job the rescue sweep moved to the DLQ as `Zombie`.

A zombie's handler started (attempt counted, maybe side effects) and then its heartbeat stopped: the
worker died, hung or lost the database. Whether it is safe to run again depends on the handler, so the
report says whether the job type declared itself idempotent (``@job(..., idempotent=True)``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from chokaq_ops.analysis import columns as C

REPORT_COLUMNS = (
    C.ID,
    C.QUEUE,
    C.TYPE,
    C.WORKER_ID,
    C.ATTEMPT_COUNT,
    C.CREATED_AT,
    C.STARTED_AT,
    C.HEARTBEAT_AT,
    C.FAILED_AT,
    C.HEARTBEAT_AGE_S,
    C.RUNTIME_S,
    C.IDEMPOTENT,
)


def idempotency_lookup(registry: Any = None) -> Callable[[str], bool | None]:
    """A function job type -> declared idempotent (True/False), or None when the type is unknown.

    `registry` may be a mapping of type -> bool, a mapping of type -> handler (anything with an
    `idempotent` attribute), an object with such a `get` method, or None for the worker's own registry of
    the handlers imported in this process (chokaq_ops.engine.handlers), when it is available."""
    if registry is None:
        registry = _default_registry()
        if registry is None:
            return lambda job_type: None

    def look(job_type: str) -> bool | None:
        getter = getattr(registry, "get", None)
        try:
            entry = getter(job_type) if callable(getter) else registry[job_type]
        except (KeyError, LookupError):
            return None
        if entry is None:
            return None
        if isinstance(entry, bool | np.bool_):
            return bool(entry)
        flag = getattr(entry, "idempotent", None)
        if flag is None:
            flag = getattr(getattr(entry, "options", None), "idempotent", None)
        return None if flag is None else bool(flag)

    return look


def _default_registry() -> Any:
    """The worker's module-level registry: the handlers imported in this process (import your handler
    modules first, as a worker does with Worker.Handlers).

    Looked up in sys.modules, not imported: a handler module imports the engine, so when none was imported
    there is nothing to find, and analysis stays below the engine (the engine's default client reads
    through the client, which reads through analysis)."""
    handlers = sys.modules.get("chokaq_ops.engine.handlers")
    return getattr(handlers, "registry", None)


def zombie_report(jobs: pd.DataFrame, registry: Any = None) -> pd.DataFrame:
    """The zombies among `jobs`, newest first, with the evidence a human needs to judge them.

    Parameters
    ----------
    jobs : DataFrame
        A job frame of dead jobs (rows whose ``failure_reason`` is not Zombie are ignored).
    registry : mapping or object, optional
        Where to look up whether a job type is idempotent; see `idempotency_lookup`.

    Returns
    -------
    DataFrame
        - ``id``, ``queue``, ``type``, ``worker_id``, ``attempt_count``: as in the job frame
        - ``created_at``, ``started_at``, ``heartbeat_at``, ``failed_at`` (datetime64[us, UTC])
        - ``heartbeat_age_s`` (float64): failed_at - heartbeat_at, how long the job was silent when the
          sweep declared it dead [s] (NaN when it never sent one)
        - ``runtime_s`` (float64): how long the handler ran before its last heartbeat [s]: duration_ms,
          the "runtime" of the error message and the API's ``runtime_seconds``
          (else heartbeat_at - started_at)
        - ``idempotent`` (boolean, nullable): the handler's declaration; <NA> when the type is unknown
    """
    zombies = jobs[jobs[C.FAILURE_REASON] == "Zombie"]
    seconds = lambda later, earlier: (zombies[later] - zombies[earlier]).dt.total_seconds()  # noqa: E731
    look = idempotency_lookup(registry)
    known = {t: look(str(t)) for t in pd.unique(zombies[C.TYPE].dropna())}
    runtime = seconds(C.HEARTBEAT_AT, C.STARTED_AT)
    if C.DURATION_MS in zombies.columns:  # the sweep's own measure, also when no heartbeat ever came
        runtime = (zombies[C.DURATION_MS] / 1000).fillna(runtime)
    out = pd.DataFrame(
        {
            C.ID: zombies[C.ID],
            C.QUEUE: zombies[C.QUEUE],
            C.TYPE: zombies[C.TYPE],
            C.WORKER_ID: zombies[C.WORKER_ID],
            C.ATTEMPT_COUNT: zombies[C.ATTEMPT_COUNT],
            C.CREATED_AT: zombies[C.CREATED_AT],
            C.STARTED_AT: zombies[C.STARTED_AT],
            C.HEARTBEAT_AT: zombies[C.HEARTBEAT_AT],
            C.FAILED_AT: zombies[C.FAILED_AT],
            C.HEARTBEAT_AGE_S: seconds(C.FAILED_AT, C.HEARTBEAT_AT).astype("float64"),
            C.RUNTIME_S: runtime.astype("float64"),
            C.IDEMPOTENT: pd.array([known.get(t) for t in zombies[C.TYPE].astype(object)], dtype="boolean"),
        },
        columns=list(REPORT_COLUMNS),
    )
    return out.sort_values([C.FAILED_AT, C.ID], ascending=[False, True], ignore_index=True)


def summarize_zombies(report: pd.DataFrame, by: str = C.WORKER_ID) -> pd.DataFrame:
    """Zombies per worker (or queue, type): did one host die, or do many jobs hang?

    Parameters
    ----------
    report : DataFrame
        A `zombie_report`.
    by : str
        ``worker_id`` (default), ``queue`` or ``type``.

    Returns
    -------
    DataFrame
        One row per `by` value, most zombies first: `by`, ``count`` (int64), ``first_failed_at``,
        ``last_failed_at`` (datetime64[us, UTC]), ``heartbeat_age_s`` (float64, median [s]),
        ``runtime_s`` (float64, longest [s]), ``idempotent`` (int64, how many are idempotent).
    """
    g = report.groupby(by, observed=True, dropna=False)
    out = g.agg(
        **{
            C.COUNT: (C.ID, "size"),
            C.FIRST_FAILED_AT: (C.FAILED_AT, "min"),
            C.LAST_FAILED_AT: (C.FAILED_AT, "max"),
            C.HEARTBEAT_AGE_S: (C.HEARTBEAT_AGE_S, "median"),
            C.RUNTIME_S: (C.RUNTIME_S, "max"),
            C.IDEMPOTENT: (C.IDEMPOTENT, lambda s: int(s.fillna(False).sum())),
        }
    ).reset_index()
    out[C.COUNT] = out[C.COUNT].astype("int64")
    out[C.IDEMPOTENT] = out[C.IDEMPOTENT].astype("int64")
    return out.sort_values([C.COUNT, by], ascending=[False, True], ignore_index=True)
