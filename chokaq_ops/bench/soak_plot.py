"""The PNG of a `chokaq bench soak` run: throughput and backlog over time, the held windows shaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot(
    intervals: list[dict[str, Any]], held: list[tuple[float, float, str]], path: Path, title: str
) -> Path:
    """Three panels sharing the time axis: offered and archived jobs/s; backlog (jobs); claim p99 and the
    hot table's dead versions (PostgreSQL) or the WAL's size (SQLite). `held` are (from_s, to_s, label)
    windows during which a snapshot was held."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [r["t_s"] / 60.0 for r in intervals]
    fig, (top, mid, low) = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    top.plot(t, [r["offered_per_s"] for r in intervals], label="offered jobs/s", color="0.5", linestyle="--")
    top.plot(t, [r["archived_per_s"] for r in intervals], label="archived jobs/s", color="tab:blue")
    top.set_ylabel("jobs/s")
    top.set_ylim(bottom=0)
    top.legend(loc="lower left")
    mid.plot(t, [r["backlog"] for r in intervals], color="tab:red", label="backlog (jobs waiting)")
    mid.set_ylabel("jobs")
    mid.set_ylim(bottom=0)
    mid.legend(loc="upper left")
    low.plot(t, [r["claim_p99_ms"] for r in intervals], color="tab:purple", label="claim p99 (ms)")
    low.set_ylabel("ms")
    low.set_ylim(bottom=0)
    low.set_xlabel("minutes")
    twin = low.twinx()
    if any(r.get("wal_bytes") is not None for r in intervals):
        twin.plot(
            t, [(r.get("wal_bytes") or 0) / 2**20 for r in intervals], color="tab:green", label="WAL (MB)"
        )
        twin.set_ylabel("WAL MB")
    else:
        twin.plot(
            t,
            [(r.get("hot_dead_tuples") or 0) / 1000 for r in intervals],
            color="tab:green",
            label="dead (k)",
        )
        twin.set_ylabel("jobs_hot dead versions (thousands)")
    twin.set_ylim(bottom=0)
    lines = low.get_legend_handles_labels()
    more = twin.get_legend_handles_labels()
    low.legend(lines[0] + more[0], lines[1] + more[1], loc="upper left")
    for axis in (top, mid, low):
        for start, end, _ in held:
            axis.axvspan(start / 60.0, end / 60.0, color="tab:orange", alpha=0.15, label=None)
        axis.grid(alpha=0.3)
    if held:
        top.text(held[0][0] / 60.0, top.get_ylim()[1] * 0.95, " " + held[0][2], va="top", fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
