"""`chokaq bench compare`: interleaved rounds of the working tree against a base revision.

No timing assertions: the checks are the output's shape, the order of the rounds and the arithmetic of
the ratios, all read from the lines the tool printed.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from chokaq_ops.bench import compare, compare_stats
from chokaq_ops.bench.compare_sides import Side
from chokaq_ops.cli import main


def _side(name: str) -> Side:
    return Side(name, name, Path("."), "python", "sqlite:///x.db")


def test_rounds_alternate_the_side_that_goes_first_and_summaries_pair_them() -> None:
    calls: list[tuple[str, str]] = []
    values = {"base": iter([100.0, 90.0, 110.0, 80.0]), "head": iter([150.0, 120.0, 160.0, 200.0])}

    def runner(side: Side, bench: str, args: Any, repeat: int) -> list[dict[str, Any]]:
        calls.append((bench, side.name))
        assert args == ["--rows", "5"] and repeat == 2
        run = {"kind": "single", "rows": 5, "per_second": next(values[side.name]), "run": 1}
        return [run, {"kind": "single", "stat": "median", "per_second": 1.0}]

    emitted: list[dict[str, Any]] = []
    lines = list(
        compare.rounds(
            _side("base"),
            _side("head"),
            ["enqueue"],
            {"enqueue": ["--rows", "5"]},
            4,
            2,
            runner,
            emitted.append,
        )
    )
    assert lines == emitted  # every round line is printed as it happens
    assert [c[1] for c in calls] == ["base", "head", "head", "base", "base", "head", "head", "base"]
    assert [(r["round"], r["position"], r["side"]) for r in lines][:4] == [
        (1, 1, "base"),
        (1, 2, "head"),
        (2, 1, "head"),
        (2, 2, "base"),
    ]
    assert all(r["variant"] == {"kind": "single"} for r in lines)  # the bench's own median is left out
    assert all("rows" not in r["metrics"] and "run" not in r["metrics"] for r in lines)

    (summary,) = compare.summarise(lines, ["per_second", "p50_ms"])  # no p50_ms: no summary of it
    assert summary["base"]["values"] == [100.0, 90.0, 110.0, 80.0]
    assert summary["base"]["median"] == 95.0 and summary["head"]["median"] == 155.0
    assert summary["base"]["min"] == 80.0 and summary["head"]["max"] == 200.0
    assert summary["ratio"] == round(155.0 / 95.0, 4)
    assert summary["round_ratios"] == [1.5, round(120 / 90, 4), round(160 / 110, 4), 2.5]
    assert summary["round_ratio_median"] == round(statistics.median(summary["round_ratios"]), 4)
    assert summary["better"] == "higher" and summary["verdict"] == "better"  # 120..200 against 80..110


def test_verdict_is_same_while_the_ranges_overlap_and_lower_is_better_for_times() -> None:
    base = compare_stats.spread([10.0, 12.0, 14.0])
    assert compare_stats.verdict("p50_ms", base, compare_stats.spread([13.0, 15.0])) == "same"
    assert compare_stats.verdict("p50_ms", base, compare_stats.spread([5.0, 6.0])) == "better"
    assert compare_stats.verdict("per_second", base, compare_stats.spread([5.0, 6.0])) == "worse"
    assert base["q1"] == 11.0 and base["q3"] == 13.0


def test_bench_args_go_to_the_named_bench_only() -> None:
    got = compare.bench_args(
        ["enqueue:--rows 30 --kinds 'plain,single'", "resurrect:--rows 40"], ["enqueue", "resurrect"]
    )
    assert got == {"enqueue": ["--rows", "30", "--kinds", "plain,single"], "resurrect": ["--rows", "40"]}
    with pytest.raises(Exception, match="NAME:FLAGS"):
        compare.bench_args(["sweep:--rows 1"], ["enqueue"])


@pytest.mark.slow
def test_compare_runs_both_trees_in_interleaved_rounds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A real run: HEAD exported by git into a temporary tree, the working tree beside it, one SQLite file.
    db = f"sqlite:///{tmp_path / 'compare.db'}"
    argv = [
        "bench",
        "compare",
        "--base",
        "HEAD",
        "--benches",
        "enqueue,purge-archive",
        "--rounds",
        "2",
        "--db",
        db,
        "--bench-args",
        "enqueue:--rows 20 --kinds plain,single",
        "--bench-args",
        "purge-archive:--rows 30",
    ]
    assert main(argv) == 0
    captured = capsys.readouterr()
    lines = [json.loads(line) for line in captured.out.splitlines()]
    header, rest = lines[0], lines[1:]
    assert header["event"] == "compare" and len(header["base"]["rev"]) == 40
    assert header["base"]["imports"]["chokaq_ops"].startswith(header["base"]["tree"])
    assert header["head"]["imports"]["chokaq_ops"].startswith(header["head"]["tree"])
    assert header["machine"]["cpu_count"] >= 1

    rounds = [r for r in rest if r["event"] == "round"]
    summaries = [r for r in rest if r["event"] == "summary"]
    assert rest == rounds + summaries  # every measurement first, then the summaries
    # enqueue prints two variants per run; purge-archive one. Two rounds, two sides.
    assert len(rounds) == 2 * 2 * (2 + 1)
    order = [(r["round"], r["bench"], r["side"]) for r in rounds if r["variant"] != {"kind": "single"}]
    assert order == [
        (1, "enqueue", "base"),
        (1, "enqueue", "head"),
        (1, "purge-archive", "base"),
        (1, "purge-archive", "head"),
        (2, "enqueue", "head"),
        (2, "enqueue", "base"),
        (2, "purge-archive", "head"),
        (2, "purge-archive", "base"),
    ]
    per_second = {
        (s["bench"], compare_stats.variant_label(s["variant"])): s
        for s in summaries
        if s["metric"] == "per_second"
    }
    assert set(per_second) == {("enqueue", "kind=plain"), ("enqueue", "kind=single"), ("purge-archive", "-")}
    for (bench, variant), s in per_second.items():
        mine = [
            r for r in rounds if r["bench"] == bench and compare_stats.variant_label(r["variant"]) == variant
        ]
        for side in ("base", "head"):
            values = [r["metrics"]["per_second"] for r in mine if r["side"] == side]
            assert s[side]["values"] == values and s[side]["n"] == 2
            assert s[side]["median"] == round(statistics.median(values), 4)
        assert s["ratio"] == round(s["head"]["median"] / s["base"]["median"], 4)
        by_round = {(r["round"], r["side"]): r["metrics"]["per_second"] for r in mine}
        assert s["round_ratios"] == [round(by_round[(n, "head")] / by_round[(n, "base")], 4) for n in (1, 2)]
    # The readable table went to stderr, one row per summary.
    assert "head/base" in captured.err
    assert sum(
        1 for line in captured.err.splitlines() if line.startswith(("enqueue", "purge-archive"))
    ) == len(summaries)
