"""`chokaq bench load` with a tiny row count: JSON lines with the docs/benchmarks.md keys plus memory figures.

No timing assertions: the figures are for docs/notebooks.md, not for tests."""

from __future__ import annotations

import json

from chokaq_ops.cli import main
from chokaq_ops.storage import Store


def test_bench_load_reports_seconds_and_memory(db_url, capsys) -> None:
    assert main(["bench", "load", "--db", db_url, "--rows", "40", "--repeat", "1"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    measured = [r for r in lines if "stat" not in r]
    summaries = [r for r in lines if r.get("stat") == "median"]
    assert [r["columns"] for r in measured] == ["heavy", "light"]
    assert [r["columns"] for r in summaries] == ["heavy", "light"]
    for record in lines:
        assert record["bench"] == "load" and record["rows"] == 40 and record["db"] == db_url.split(":")[0]
        assert record["seconds"] > 0 and record["per_second"] > 0
        assert record["frame_mb"] > 0 and record["peak_rss_mb"] > 0
    assert measured[0]["frame_columns"] == 23 and measured[1]["frame_columns"] == 21
    assert measured[0]["frame_mb"] > measured[1]["frame_mb"]
    with Store(db_url, pool_size=1) as store:
        assert store.run("table_counts") == [{"hot": 0, "archive": 0, "dlq": 0}]
