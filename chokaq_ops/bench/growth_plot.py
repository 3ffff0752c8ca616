"""The PNG of a `chokaq bench growth` run: the figure against the data size (log axis), one line per
variant, min-max as error bars, and the tolerance band under (or over) each variant's smallest size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chokaq_ops.bench import compare_stats


def plot(points: list[dict[str, Any]], path: Path, header: dict[str, Any]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric, tolerance = header["metric"], float(header["tolerance"])
    higher = compare_stats.better(metric) == "higher"
    fig, ax = plt.subplots(figsize=(8, 4.5))
    labels = sorted({p["label"] for p in points})
    for n, label in enumerate(labels):
        mine = sorted((p for p in points if p["label"] == label), key=lambda p: p["size"])
        x = [p["size"] for p in mine]
        y = [p["median"] for p in mine]
        low = [p["median"] - p["min"] for p in mine]
        high = [p["max"] - p["median"] for p in mine]
        color = f"C{n % 10}"
        ax.errorbar(x, y, yerr=[low, high], marker="o", capsize=3, color=color, label=label)
        edge = y[0] * ((1 - tolerance) if higher else (1 + tolerance))
        ax.fill_between(
            [x[0], x[-1]], [min(y[0], edge)] * 2, [max(y[0], edge)] * 2, color=color, alpha=0.08, linewidth=0
        )
    ax.set_xscale("log")
    ax.set_xlabel(f"{header['size_flag'].lstrip('-')} (log scale)")
    ax.set_ylabel(f"{metric} ({'higher' if higher else 'lower'} is better)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="lower left", fontsize=8)
    machine = header.get("machine") or {}
    ax.set_title(
        f"chokaq bench {header['bench']} {' '.join(header['args'])}: {metric} as the data grows\n"
        f"{str(header.get('db', '')).split(':', 1)[0]}, {machine.get('cpu_count', '?')} x "
        f"{machine.get('cpu_model', '?')}; shaded: within "
        f"{tolerance:.0%} of the smallest size",
        fontsize=9,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
