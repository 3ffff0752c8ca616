"""`chokaq bench throughput` runs end to end on a scratch SQLite file (a smoke test: no timing asserted)."""

from __future__ import annotations

import json

from chokaq_ops.cli import main


def test_throughput_bench_drains_and_reports(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    assert (
        main(["bench", "throughput", "--db", url, "--rows", "300", "--concurrency", "1,4", "--repeat", "1"])
        == 0
    )
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    runs = [r for r in records if "stat" not in r]
    assert [(r["concurrency"], r["rows"], r["conflicts"]) for r in runs] == [(1, 300, 0), (4, 300, 0)]
    assert all(r["per_second"] > 0 and r["db"] == "sqlite" and r["cpu_count"] for r in runs)
    assert [r["concurrency"] for r in records if r.get("stat") == "median"] == [1, 4]


def test_throughput_bench_rejects_bad_concurrency(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    assert main(["bench", "throughput", "--db", url, "--rows", "10", "--concurrency", "0,x"]) == 2
    assert "--concurrency" in capsys.readouterr().err
