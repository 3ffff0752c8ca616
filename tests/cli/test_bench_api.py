"""`chokaq bench api` end to end with a tiny DLQ, through a served API (no timing asserted)."""

from __future__ import annotations

import json

from chokaq_ops.cli import main


def test_api_bench_asks_for_page_one_and_a_deep_page(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    argv = ["bench", "api", "--db", url, "--rows", "800", "--pages", "3", "--page-size", "10"]
    assert main([*argv, "--at-page", "50", "--repeat", "1"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    runs = {r["scenario"]: r for r in lines if "stat" not in r}
    assert set(runs) == {"deep", "filtered", "first", "at"}
    assert (runs["first"]["page"], runs["at"]["page"], runs["deep"]["page"]) == (1, 50, None)
    assert all(r["requests"] == 3 and r["p95_ms"] > 0 for r in runs.values())


def test_api_bench_refuses_a_page_past_the_end(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    argv = ["bench", "api", "--db", url, "--rows", "200", "--pages", "2", "--page-size", "10"]
    assert main([*argv, "--at-page", "500", "--repeat", "1"]) != 0
    assert "page 500 asked of a list of 20 pages" in capsys.readouterr().err
