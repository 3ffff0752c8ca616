"""The pandas toolkit: job frames, summaries, error fingerprints, zombie reports, plots and plans.

Every public function is re-exported here (``from chokaq_ops import analysis; analysis.zombie_report(df)``).
Column names and dtypes are defined once in `chokaq_ops.analysis.columns`. Modules load on first use, so
importing one part (the API imports nothing from here) does not import matplotlib.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "summarize_jobs": "summaries",
    "summarize_by_reason": "summaries",
    "summarize_by_queue": "summaries",
    "summarize_by_type": "summaries",
    "count_by_period": "summaries",
    "failure_rates": "summaries",
    "add_fingerprints": "fingerprints",
    "summarize_fingerprints": "fingerprints",
    "fingerprint_trends": "fingerprints",
    "zombie_report": "zombies",
    "summarize_zombies": "zombies",
    "idempotency_lookup": "zombies",
    "plot_summary": "plots",
    "plot_timeline": "plots",
    "plot_fingerprint_trends": "plots",
    "plot_zombies": "plots",
    "plot_failure_rates": "plots",
    "Plan": "plans",
    "normalise": "columns",
    "job_columns": "columns",
    "concat_jobs": "columns",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f"chokaq_ops.analysis.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'chokaq_ops.analysis' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
