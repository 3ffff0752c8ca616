"""What `chokaq bench compare` makes of its rounds: per side median and spread, and the ratio head/base.

As in asv's `compare` and pytest-benchmark's `--benchmark-compare`, each side is summarised on its own
(median, min-max, interquartile range), then the two are put side by side. Because the rounds are
interleaved, each round also gives a paired ratio (head / base of that round), whose median and range
are reported too: on a shared machine the load moves both sides of a round together.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# Keys that name what a bench line measured (a variant), not a figure: e.g. `kind` of enqueue.
VARIANT_KEYS = ("kind", "mode", "concurrency", "work", "scenario", "columns", "queue_filter")
# Figures compared when --metrics is not given, those of them a bench reports.
DEFAULT_METRICS = (
    "per_second",
    "ms",
    "p50_ms",
    "p95_ms",
    "worker_cpu_us_per_job",
    "producer_cpu_us_per_job",
    "db_cpu_us_per_job",
    "client_cpu_us_per_claim",
    "db_cpu_us_per_claim",
)
# A change is called only when the two sides' ranges (min-max) do not overlap: within noise otherwise.
HIGHER_IS_BETTER = ("per_second", "rows_per_second")


def variant_of(record: Mapping[str, Any]) -> dict[str, Any]:
    return {k: record[k] for k in VARIANT_KEYS if k in record}


def variant_label(variant: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in variant.items()) or "-"


def better(metric: str) -> str:
    return "higher" if metric.endswith(HIGHER_IS_BETTER) else "lower"


def spread(values: Sequence[float]) -> dict[str, Any]:
    """Median, min, max and quartiles (inclusive method: the quartiles lie within min-max)."""
    ordered = sorted(values)
    out: dict[str, Any] = {"n": len(ordered), "median": _round(statistics.median(ordered))}
    out["min"], out["max"] = _round(ordered[0]), _round(ordered[-1])
    if len(ordered) >= 2:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
        out["q1"], out["q3"] = _round(q1), _round(q3)
    else:
        out["q1"] = out["q3"] = out["median"]
    out["values"] = [_round(v) for v in values]
    return out


def ratio(head: float, base: float) -> float | None:
    return None if base == 0 else round(head / base, 4)


def verdict(metric: str, base: Mapping[str, Any], head: Mapping[str, Any]) -> str:
    """`better`, `worse`, or `same` (the two ranges overlap: not told apart by these rounds)."""
    if head["min"] > base["max"]:
        up = True
    elif head["max"] < base["min"]:
        up = False
    else:
        return "same"
    return "better" if up == (better(metric) == "higher") else "worse"


def summarise(
    bench: str, metric: str, variant: Mapping[str, Any], rounds: Iterable[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """One summary line of a bench/variant/metric from its round lines (event `round`), or None when a
    side has no value for it (a bench that reports the figure only on PostgreSQL, say)."""
    by_side: dict[str, list[float]] = {"base": [], "head": []}
    by_round: dict[int, dict[str, float]] = {}
    for line in rounds:
        value = line["metrics"].get(metric)
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        by_side[line["side"]].append(float(value))
        by_round.setdefault(line["round"], {})[line["side"]] = float(value)
    if not by_side["base"] or not by_side["head"]:
        return None
    base, head = spread(by_side["base"]), spread(by_side["head"])
    paired = [
        r
        for _, sides in sorted(by_round.items())
        if len(sides) == 2 and (r := ratio(sides["head"], sides["base"]))
    ]
    out: dict[str, Any] = {
        "event": "summary",
        "bench": bench,
        "variant": dict(variant),
        "metric": metric,
        "better": better(metric),
        "base": base,
        "head": head,
        "ratio": ratio(head["median"], base["median"]),
        "round_ratios": paired,
        "round_ratio_median": _round(statistics.median(paired)) if paired else None,
        "round_ratio_min": min(paired) if paired else None,
        "round_ratio_max": max(paired) if paired else None,
        "verdict": verdict(metric, base, head),
    }
    return out


def table(summaries: Sequence[Mapping[str, Any]], header: Mapping[str, Any]) -> str:
    """The summaries as a text table, one row per bench/variant/metric."""
    rows = [
        (
            "bench",
            "variant",
            "metric",
            "base median [min-max]",
            "head median [min-max]",
            "head/base",
            "per round",
            "",
        )
    ]
    for s in summaries:
        per_round = (
            f"{s['round_ratio_median']:.2f}x [{s['round_ratio_min']:.2f}-{s['round_ratio_max']:.2f}]"
            if s["round_ratio_median"] is not None
            else "-"
        )
        rows.append(
            (
                s["bench"],
                variant_label(s["variant"]),
                f"{s['metric']} ({s['better']})",
                _side(s["base"]),
                _side(s["head"]),
                f"{s['ratio']:.2f}x" if s["ratio"] is not None else "-",
                per_round,
                "" if s["verdict"] == "same" else s["verdict"],
            )
        )
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = [
        f"base {_rev(header['base']['rev'])} vs head {header['head']['rev']}, {header['rounds']} interleaved "
        f"rounds, {header['machine'].get('cpu_count')} x {header['machine'].get('cpu_model')}"
    ]
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines) + "\n"


def _rev(rev: str) -> str:
    """A commit id shortened to 12 digits; a peer's `name version` whole."""
    return rev[:12] if all(c in "0123456789abcdef" for c in rev) else rev


def _side(s: Mapping[str, Any]) -> str:
    return f"{fmt(s['median'])} [{fmt(s['min'])}-{fmt(s['max'])}]"


def fmt(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}".rstrip("0").rstrip(".")


def _round(value: float) -> float:
    return round(value, 4)
