"""`chokaq bench compare --peer pgqueuer`: a peer queue as the base side of the interleaved rounds.

The argument checks and the peer side's command line need no pgqueuer; the one test that runs the peer's
harness against PostgreSQL needs the optional `peers` extra and skips without it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from chokaq_ops.bench import compare, compare_sides
from chokaq_ops.bench.compare_sides import PeerSide, Side
from chokaq_ops.cli import main

PG = "postgresql://postgres@127.0.0.1:5432/chokaq_peer_never_opened"


def _compare(*extra: str, benches: str = "throughput", db: str = PG) -> list[str]:
    return ["bench", "compare", "--benches", benches, "--db", db, *extra]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (_compare("--peer", "nope"), "invalid choice: 'nope'"),
        (_compare("--peer", "pgqueuer", "--base", "HEAD~1"), "give --peer or --base, not both"),
        (
            _compare("--peer", "pgqueuer", benches="throughput,enqueue"),
            "--peer pgqueuer measures throughput,latency only, not enqueue",
        ),
        (
            _compare("--peer", "pgqueuer", "--bench-args", "latency:--rows 5", benches="latency"),
            "measures idle pickup only: give latency --mode idle",
        ),
        (
            _compare("--peer", "pgqueuer", "--bench-args", "throughput:--kinds plain"),
            "unrecognized arguments: --kinds plain",
        ),
        (
            _compare("--peer", "pgqueuer", "--bench-args", "throughput:--concurrency 0"),
            "--concurrency wants numbers between 1 and 1024",
        ),
        (_compare("--peer", "pgqueuer", db="sqlite:///x.db"), "runs on PostgreSQL only"),
        (_compare("--peer-args", "--style limit"), "--peer-args are for a --peer's harness"),
        (_compare("--peer", "pgqueuer", "--peer-args", "--style odd"), "invalid choice: 'odd'"),
    ],
    ids=["unknown-peer", "peer-and-base", "unsupported-bench", "latency-not-idle", "unknown-flag",
         "bad-concurrency", "sqlite", "peer-args-alone", "bad-peer-args"],
)  # fmt: skip
def test_peer_arguments_are_refused_before_any_round(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_round(*_: Any) -> Any:
        raise AssertionError("a side was started")

    monkeypatch.setattr(Side, "run", no_round)
    monkeypatch.setattr(Side, "probe", no_round)
    monkeypatch.setattr(PeerSide, "probe", no_round)
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.out == ""


def test_peer_side_runs_the_harness_module_with_the_benchs_flags() -> None:
    side = PeerSide("base", "pgqueuer", Path("/tree"), "/venv/python", PG, peer="pgqueuer")
    assert compare_sides.PEERS["pgqueuer"] == "chokaq_ops.bench.peer_pgqueuer"
    assert side.command("throughput", ["--concurrency", "8", "--rows", "2000"], 3) == [
        "/venv/python",
        "-m",
        "chokaq_ops.bench.peer_pgqueuer",
        "throughput",
        "--db",
        PG,
        "--repeat",
        "3",
        "--concurrency",
        "8",
        "--rows",
        "2000",
    ]
    # --peer-args reach the peer's harness alone, after the flags both sides get.
    limited = dataclasses.replace(side, extra=("--style", "limit"))
    assert limited.command("throughput", ["--rows", "5"], 1)[-4:] == ["--rows", "5", "--style", "limit"]
    # The harness runs in the working tree, like a revision's bench process in its own.
    assert side.env()["PYTHONPATH"] == "/tree"
    assert side.versioned({"pgqueuer": "9.9.9"}).rev == "pgqueuer 9.9.9"


def compare_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    compare.add_arguments(parser)
    return parser.parse_args(argv)


def test_compare_with_a_peer_names_it_and_its_version_and_keeps_the_rounds(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        PeerSide,
        "probe",
        lambda self: {
            "harness": "/tree/chokaq_ops/bench/peer_pgqueuer.py",
            "pgqueuer": "9.9.9",
            "asyncpg": "1",
        },
    )
    monkeypatch.setattr(Side, "probe", lambda self: {"chokaq_ops": "x", "chokaq_api": "y"})
    calls: list[tuple[str, str, list[str]]] = []
    per_second = {"base": iter([100.0, 110.0]), "head": iter([150.0, 160.0])}

    def runner(side: Side, bench: str, args: Any, repeat: int) -> list[dict[str, Any]]:
        command = side.command(bench, args, repeat)
        calls.append((side.name, side.rev, command))
        line = {
            "bench": bench,
            "rows": 20,
            "concurrency": 8,
            "run": 1,
            "per_second": next(per_second[side.name]),
        }
        return [line, {**line, "stat": "median"}]

    args = compare_args(
        ["--peer", "pgqueuer", "--benches", "throughput", "--rounds", "2", "--db", PG,
         "--bench-args", "throughput:--concurrency 8 --rows 20"]
    )  # fmt: skip
    assert compare.run(args, runner=runner) == 0
    captured = capsys.readouterr()
    lines = [json.loads(line) for line in captured.out.splitlines()]
    header = lines[0]
    assert header["peer"] == {"name": "pgqueuer", "args": [], "pgqueuer": "9.9.9", "asyncpg": "1"}
    assert header["base"]["rev"] == "pgqueuer 9.9.9" and header["base"]["version"] == "9.9.9"
    assert header["bench_code_same"] is None
    # Interleaved as against a revision: the peer first in odd rounds, the working tree in even ones.
    assert [(c[0], c[1]) for c in calls] == [
        ("base", "pgqueuer 9.9.9"),
        ("head", "working tree"),
        ("head", "working tree"),
        ("base", "pgqueuer 9.9.9"),
    ]
    peer_command = calls[0][2]
    assert peer_command[1:4] == ["-m", "chokaq_ops.bench.peer_pgqueuer", "throughput"]
    assert peer_command[-4:] == ["--concurrency", "8", "--rows", "20"]
    head_command = calls[1][2]
    assert head_command[1] == "-c" and head_command[3:5] == ["bench", "throughput"]
    assert head_command[-4:] == peer_command[-4:]  # the same --bench-args on both sides
    rounds = [r for r in lines if r["event"] == "round"]
    assert {r["rev"] for r in rounds if r["side"] == "base"} == {"pgqueuer 9.9.9"}
    (summary,) = [s for s in lines if s["event"] == "summary"]
    assert summary["variant"] == {"concurrency": 8}
    assert summary["ratio"] == round(155.0 / 105.0, 4)
    assert captured.err.startswith("base pgqueuer 9.9.9 vs head working tree, 2 interleaved rounds")


def test_peer_harness_measures_pgqueuer_on_postgresql(pg_url: str) -> None:
    pytest.importorskip(
        "pgqueuer",
        reason="pgqueuer is the optional `peers` extra (pip install '.[peers]'); CI does not install it",
    )
    pytest.importorskip(
        "asyncpg",
        reason="asyncpg is in the optional `peers` extra (pip install '.[peers]'); CI does not install it",
    )
    # Through the side compare runs: the harness from this tree, in a process of its own.
    root = compare_sides.repo_root()
    side = PeerSide("base", "pgqueuer", root, sys.executable, pg_url, peer="pgqueuer")
    found = side.probe()
    assert found["harness"].startswith(str(root)) and found["pgqueuer"]

    lines = side.run("throughput", ["--rows", "40", "--concurrency", "1,4"], 1)
    runs = [r for r in lines if "stat" not in r]
    assert [r["concurrency"] for r in runs] == [1, 4]
    for r in runs:
        assert r["bench"] == "throughput" and r["rows"] == 40 and r["peer"] == "pgqueuer"
        assert r["per_second"] > 0 and r["seconds"] > 0
        # By default C consumers dequeue batches of 10, as pgqueuer's own drain benchmark runs it.
        assert (r["style"], r["batch_size"]) == ("dequeuers", 10)
        assert "worker_cpu_us_per_job" in r and "db_cpu_us_per_job" in r
    assert [r["concurrency"] for r in lines if r.get("stat") == "median"] == [1, 4]
    limited = dataclasses.replace(side, extra=("--style", "limit"))
    (run,) = [
        r for r in limited.run("throughput", ["--rows", "40", "--concurrency", "4"], 1) if "stat" not in r
    ]
    assert (run["style"], run["batch_size"], run["per_second"] > 0) == ("limit", 4, True)

    lines = side.run("latency", ["--rows", "5", "--mode", "idle", "--gap", "5", "--concurrency", "2"], 1)
    (run,) = [r for r in lines if "stat" not in r]
    assert run["mode"] == "idle" and run["concurrency"] == 2 and run["rows"] == 5
    assert 0 < run["p50_ms"] <= run["p95_ms"] <= run["max_ms"]

    # The harness dropped pgqueuer's tables again: the scratch database is as it found it.
    import psycopg

    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT to_regclass('pgqueuer')").fetchone() == (None,)
