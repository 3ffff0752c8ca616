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
    # CPU per job: the worker's own (it ran in this process); SQLite has no server processes to read.
    assert all(r["worker_cpu_us_per_job"] > 0 and r["db_cpu_us_per_job"] is None for r in runs)
    medians = [r for r in records if r.get("stat") == "median"]
    assert [r["concurrency"] for r in medians] == [1, 4]
    assert all(r["worker_cpu_us_per_job"] > 0 for r in medians)


def test_throughput_bench_splits_the_workers_cpu_by_thread(tmp_path, capsys):
    """The worker's CPU per job by thread role (claims, handlers, outcomes): each of this run's worker
    threads counted once, so the parts are positive and add up to less than the whole process."""
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    assert (
        main(["bench", "throughput", "--db", url, "--rows", "400", "--concurrency", "4", "--repeat", "2"])
        == 0
    )
    runs = [json.loads(line) for line in capsys.readouterr().out.splitlines()][:2]
    for run in runs:
        parts = [run[f"{role}_cpu_us_per_job"] for role in ("fetch", "exec", "completer")]
        assert all(p > 0 for p in parts), run
        assert sum(parts) < run["worker_cpu_us_per_job"], run


def test_throughput_bench_rejects_bad_concurrency(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    assert main(["bench", "throughput", "--db", url, "--rows", "10", "--concurrency", "0,x"]) == 2
    assert "--concurrency" in capsys.readouterr().err


def test_throughput_bench_reports_the_database_servers_cpu_on_postgresql(pg_url, capsys):
    """On a PostgreSQL server on this host the bench reads its backends' CPU: a figure, not null."""
    argv = ["bench", "throughput", "--db", pg_url, "--rows", "300", "--concurrency", "4", "--repeat", "1"]
    assert main(argv) == 0
    [run, median] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert run["db"] == "postgresql" and run["rows"] == 300
    assert run["worker_cpu_us_per_job"] > 0 and run["db_cpu_us_per_job"] > 0
    assert median["db_cpu_us_per_job"] == run["db_cpu_us_per_job"]


def test_throughput_bench_drains_beside_an_archive_it_seeded(tmp_path, capsys):
    """`--archive N` (data-growth curves, docs/benchmarks.md): the drain runs with N archived jobs already in
    the table, and the archive holds them and the drained ones after it."""
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    argv = ["bench", "throughput", "--db", url, "--rows", "200", "--archive", "1500", "--concurrency", "4"]
    assert main([*argv, "--repeat", "1"]) == 0
    run = json.loads(capsys.readouterr().out.splitlines()[0])
    assert (run["archive_rows"], run["archive_after"]) == (1500, 1700)
