"""`chokaq bench growth`: one bench at several data sizes, and whether its figure stays flat.

No timing assertions: a fake runner stands in for the bench processes, and the checks are the order of
the runs, the arithmetic of the medians and ratios, the verdicts and the PNG; one run end to end on
SQLite checks that the real bench processes are started with the size flag.
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any

import pytest

from chokaq_ops.bench import growth
from chokaq_ops.bench.compare_sides import Side
from chokaq_ops.cli import main


def _args(**over: Any) -> argparse.Namespace:
    base = {
        "bench": "claim",
        "sizes": "1000,100,10000",
        "size_flag": "rows",
        "args": "--batch 5",
        "metric": "per_second",
        "rounds": 2,
        "repeat": 1,
        "tolerance": 0.2,
        "db": "sqlite:///unused.db",
        "plot": None,
    }
    return argparse.Namespace(**{**base, **over})


def _fake(values: dict[int, list[float]], calls: list[list[str]]):
    def runner(side: Side, bench: str, args: Any, repeat: int) -> list[dict[str, Any]]:
        calls.append(list(args))
        size = int(args[1])
        run = {"scenario": "first", "rows": size, "per_second": values[size].pop(0), "p50_ms": 1.0}
        return [run, {"scenario": "first", "stat": "median", "per_second": 1.0}]

    return runner


def test_sizes_run_in_turn_reversed_every_other_round_and_a_flat_curve_is_called_flat() -> None:
    calls: list[list[str]] = []
    values = {100: [100.0, 104.0], 1000: [95.0, 99.0], 10000: [90.0, 84.0]}
    out, err = io.StringIO(), io.StringIO()
    assert growth.run(_args(), runner=_fake(values, calls), out=out, err=err) == 0
    assert [c[:2] for c in calls] == [["--rows", s] for s in ("100", "1000", "10000", "10000", "1000", "100")]
    assert all(c[2:] == ["--batch", "5"] for c in calls)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines[0]["event"] == "growth" and lines[0]["sizes"] == [100, 1000, 10000]
    runs = [x for x in lines if x["event"] == "run"]
    assert len(runs) == 6  # the bench's own median lines are left out
    points = {x["size"]: x for x in lines if x["event"] == "point"}
    assert points[100]["median"] == 102.0 and points[10000]["min"] == 84.0
    (shape,) = [x for x in lines if x["event"] == "shape"]
    assert shape["against_smallest"] == {"100": 1.0, "1000": round(97 / 102, 4), "10000": round(87 / 102, 4)}
    assert shape["verdict"] == "flat"  # 0.85x is within 20 %
    assert "| scenario=first | 102 (1.00x) | 97 (0.95x) | 87 (0.85x) | flat |" in err.getvalue()


def test_a_rate_that_falls_past_the_tolerance_grows_and_a_time_that_rises_does() -> None:
    values = {100: [100.0, 100.0], 1000: [90.0, 90.0], 10000: [70.0, 70.0]}
    out = io.StringIO()
    growth.run(_args(), runner=_fake(values, []), out=out, err=io.StringIO())
    (shape,) = [json.loads(x) for x in out.getvalue().splitlines() if '"shape"' in x]
    assert shape["verdict"] == "grows"  # 0.70x of the smallest size's rate
    points = [
        {"label": "a", "variant": {}, "size": 10, "median": 10.0},
        {"label": "a", "variant": {}, "size": 100, "median": 11.5},
    ]
    assert growth.shapes_of(points, "p95_ms", 0.2)[0]["verdict"] == "flat"
    points[1]["median"] = 12.5
    assert growth.shapes_of(points, "p95_ms", 0.2)[0]["verdict"] == "grows"  # a time 1.25x as long


def test_the_plot_is_a_png(tmp_path: Path) -> None:
    values = {100: [100.0, 104.0], 1000: [95.0, 99.0], 10000: [90.0, 84.0]}
    png = tmp_path / "curve.png"
    growth.run(_args(plot=str(png)), runner=_fake(values, []), out=io.StringIO(), err=io.StringIO())
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--sizes", "1000"], "two or more distinct"),
        (["--sizes", "10,10"], "two or more distinct"),
        (["--sizes", "10,x"], "two or more distinct"),
        (["--bench", "nope"], "--bench takes one of"),
        (["--size-flag", "Rows!"], "--size-flag wants a bench flag's name"),
    ],
)
def test_bad_arguments_exit_2_naming_the_flag(flags, message, capsys, tmp_path: Path) -> None:
    argv = ["bench", "growth", "--bench", "claim", "--sizes", "10,100", "--db", f"sqlite:///{tmp_path}/g.db"]
    for i in range(0, len(flags), 2):
        at = argv.index(flags[i]) if flags[i] in argv else None
        if at is None:
            argv += flags[i : i + 2]
        else:
            argv[at + 1] = flags[i + 1]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "g.db").exists()  # refused before any bench ran


def test_end_to_end_on_sqlite_the_size_reaches_the_bench(tmp_path: Path, capsys) -> None:
    db = f"sqlite:///{tmp_path}/growth.db"
    argv = ["bench", "growth", "--bench", "claim", "--sizes", "300,600", "--args", "--claims 5 --batch 4"]
    assert main([*argv, "--db", db]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert sorted(x["size"] for x in lines if x["event"] == "point") == [300, 600]
    assert all(x["value"] > 0 for x in lines if x["event"] == "run")
