"""`chokaq bench <name>` end to end with tiny row counts: JSON lines with the keys in docs/benchmarks.md.

No timing assertions: figures are for docs/benchmarks.md, not for tests.
"""

from __future__ import annotations

import argparse
import json
import types
from collections.abc import Iterator
from typing import Any

import pytest

from chokaq_ops import bench
from chokaq_ops.cli import main
from chokaq_ops.models import NewJob
from chokaq_ops.storage import Store

TINY = {
    "purge-archive": ["--rows", "50"],
    "purge-dlq": ["--rows", "40", "--noise", "7"],
    "resurrect": ["--rows", "40", "--noise", "7", "--by", "both"],
    "sweep": ["--rows", "300", "--zombies", "12", "--abandoned", "5", "--live", "10"],
    "claim": ["--rows", "400", "--batch", "5", "--claims", "6", "--queues", "3"],
    "maintenance": ["--rows", "60", "--keep", "5", "--jobs", "4", "--every", "2"],
    "enqueue": ["--rows", "40", "--batch", "10"],
}
EXTRA = {  # other paths through the same benches
    "claim": [["--queue-filter"], ["--max-workers", "1000"]],
    "maintenance": [["--work", "freeze"], ["--work", "sweep"]],
    "resurrect": [["--by", "plan"]],
    "purge-dlq": [["--by", "plan", "--streams", "1"]],
}
MACHINE_KEYS = {"cpu_count", "platform", "cpu_model"}


def _lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    out = capsys.readouterr().out
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_the_storage_benches_are_registered() -> None:
    # Other benches (throughput, api, load) are registered by their owners and tested with their code.
    assert set(TINY) <= set(bench.names())


@pytest.mark.parametrize("name", sorted(TINY))
def test_bench_prints_measurements_and_median(
    name: str, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", name, "--db", db_url, "--repeat", "2", *TINY[name]]) == 0
    lines = _lines(capsys)
    dialect = db_url.split(":", 1)[0]
    measurements = [r for r in lines if "stat" not in r]
    summaries = [r for r in lines if r.get("stat") == "median"]
    assert measurements and summaries and lines[-1] in summaries
    assert len(measurements) == 2 * len(summaries)  # two runs for each summarised measurement
    rows = int(TINY[name][1])
    for record in lines:
        assert record["bench"] == name
        assert record["db"] == dialect
        assert record["rows"] == rows
        assert set(record) >= MACHINE_KEYS
        assert isinstance(record["cpu_count"], int) and record["cpu_model"]
        timing = {"per_second", "p50_ms", "p95_ms", "ms"} & set(record)
        assert timing, record
        assert all(isinstance(record[k], int | float) and record[k] > 0 for k in timing)
    for record in measurements:
        assert isinstance(record["seconds"], float) and record["seconds"] > 0
    for record in summaries:
        assert record["runs"] == 2
    # The bench leaves its scratch database empty again.
    with Store(db_url, pool_size=1) as store:
        assert store.run("table_counts") == [{"hot": 0, "archive": 0, "dlq": 0}]


@pytest.mark.parametrize(("name", "flags"), [(n, f) for n, fs in EXTRA.items() for f in fs])
def test_bench_variants_run(
    name: str, flags: list[str], db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", name, "--db", db_url, "--repeat", "1", *TINY[name], *flags]) == 0
    *runs, summary = _lines(capsys)
    assert len(runs) == 1 and summary["stat"] == "median"
    assert summary.get("p50_ms", summary.get("per_second", 0)) > 0, summary
    if "plan" in flags:  # the plan's execution is timed, its freeze reported beside it
        assert runs[0]["mode"] == "plan" and runs[0]["freeze_seconds"] > 0 and runs[0]["batches"] >= 1


def test_bench_latency_measures_every_job_idle_and_under_load(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # A worker process of its own. SQLite stamps milliseconds, so a pickup may read 0: no `> 0` here.
    flags = ["--rows", "6", "--gap", "5", "--rate", "200", "--repeat", "1"]
    assert main(["bench", "latency", "--db", db_url, *flags]) == 0
    lines = _lines(capsys)
    runs = {r["mode"]: r for r in lines if "stat" not in r}
    summaries = {r["mode"]: r for r in lines if r.get("stat") == "median"}
    assert set(runs) == set(summaries) == {"idle", "load"}
    for record in runs.values():
        assert record["rows"] == 6 and set(record) >= MACHINE_KEYS
        assert 0 <= record["p50_ms"] <= record["p95_ms"] <= record["p99_ms"] <= record["max_ms"]
    with Store(db_url, pool_size=1) as store:
        assert store.run("table_counts") == [{"hot": 0, "archive": 0, "dlq": 0}]


def test_bench_refuses_a_database_that_holds_jobs(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with Store(db_url, pool_size=1) as store:
        store.enqueue([NewJob(type="keep.me.v1", id="keep-1")])
    assert main(["bench", "purge-archive", "--db", db_url, "--rows", "20", "--repeat", "1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "holds 1 jobs" in captured.err and "--force" in captured.err
    with Store(db_url, pool_size=1) as store:
        assert store.get_job("keep-1")["location"] == "hot"

    assert main(["bench", "purge-archive", "--db", db_url, "--rows", "20", "--repeat", "1", "--force"]) == 0
    assert _lines(capsys)[-1]["stat"] == "median"


def test_a_registered_module_becomes_a_subcommand(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, Any] = {}

    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.set_defaults(rows=7)
        parser.add_argument("--concurrency", type=int, default=1)

    def run(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
        seen.update(
            rows=args.rows, repeat=args.repeat, concurrency=args.concurrency, db=args.settings.storage.url
        )
        yield {"db": "sqlite", "rows": args.rows, "seconds": 1.0, "per_second": 7.0}

    module = types.ModuleType("chokaq_ops.bench.fake_throughput", "throughput: a fake for the registry test")
    module.add_arguments = add_arguments  # type: ignore[attr-defined]
    module.run = run  # type: ignore[attr-defined]
    monkeypatch.setitem(bench.BENCHES, "throughput", module.__name__)
    monkeypatch.setitem(__import__("sys").modules, module.__name__, module)

    assert main(["bench", "throughput", "--db", "sqlite:///unused.db", "--concurrency", "4"]) == 0
    assert seen == {"rows": 7, "repeat": 3, "concurrency": 4, "db": "sqlite:///unused.db"}
    (record,) = _lines(capsys)
    assert record["bench"] == "throughput" and set(record) >= MACHINE_KEYS


def test_bench_rejects_bad_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "purge-archive", "--rows", "0"]) == 2
    assert "--rows" in capsys.readouterr().err


def test_maintenance_bench_reports_heartbeat_latency_against_the_interval(
    db_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHOKAQ_STORAGE__CLEANUP_BATCH_SIZE", "7")  # 60 rows: 9 batches of each kind
    assert main(["bench", "maintenance", "--db", db_url, "--repeat", "1", *TINY["maintenance"]]) == 0
    run, summary = _lines(capsys)
    assert run["heartbeats"] >= 1 and 0 < run["p50_ms"] <= run["p99_ms"] <= run["max_ms"]
    assert run["heartbeat_interval_ms"] == 8000 and isinstance(run["p99_under_interval"], bool)
    assert (run["batch_size"], run["batches"]) == (7, 18) and summary["p99_ms"] == run["p99_ms"]


def test_bench_refuses_a_database_with_an_audit_log(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    from chokaq_ops.models import Actor

    with Store(db_url, pool_size=1) as store:
        store.create_token("ops", "admin", actor=Actor("alice"))  # no job, one audit row
    assert main(["bench", "purge-archive", "--db", db_url, "--rows", "20", "--repeat", "1"]) == 2
    captured = capsys.readouterr()
    assert "holds 1 audit log rows" in captured.err and "--force" in captured.err
    with Store(db_url, pool_size=1) as store:
        assert [a["action"] for a in store.list_audit().items] == ["token_create"]
    assert main(["bench", "purge-archive", "--db", db_url, "--rows", "20", "--repeat", "1", "--force"]) == 0


def test_bench_enqueue_reports_the_cpu_a_job_cost(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Producer CPU for every run; the server's too on PostgreSQL on this host (null elsewhere, and when a
    backend closed during the run, which sixteen producers growing the pool may cause)."""
    flags = ["--rows", "40", "--kinds", "single,single16", "--repeat", "1"]
    assert main(["bench", "enqueue", "--db", db_url, *flags]) == 0
    runs = [r for r in _lines(capsys) if "stat" not in r]
    assert [r["kind"] for r in runs] == ["single", "single16"]
    assert all(r["producer_cpu_us_per_job"] > 0 for r in runs)
    if db_url.startswith("postgresql"):
        assert runs[0]["db_cpu_us_per_job"] > 0
    else:
        assert {r["db_cpu_us_per_job"] for r in runs} == {None}


def test_bench_enqueue_posts_jobs_through_a_served_api(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`api` and `api16` POST every job to a `chokaq serve` process; the bench itself checks each 201 and
    that every job is in hot. This process is only the HTTP clients, so no producer CPU is claimed."""
    flags = ["--rows", "32", "--kinds", "api,api16", "--repeat", "1"]
    assert main(["bench", "enqueue", "--db", db_url, *flags]) == 0
    runs = [r for r in _lines(capsys) if "stat" not in r]
    assert [(r["kind"], r["producers"], r["rows"]) for r in runs] == [("api", 1, 32), ("api16", 16, 32)]
    assert all(r["per_second"] > 0 and r["producer_cpu_us_per_job"] is None for r in runs)
    with Store(db_url, pool_size=1) as store:  # the bench's token is revoked again
        assert all(t["revoked_at"] is not None for t in store.list_tokens())


def test_the_soak_snapshot_holder_stops_whether_or_not_it_started(db_url: str) -> None:
    """`bench soak --analytics N` without --hold-snapshot stops a holder it never started (a run of 16
    minutes ended in a RuntimeError, with no summary and no plot)."""
    from chokaq_ops.bench.soak_load import Holder
    from chokaq_ops.storage import queries

    with Store(db_url) as store:
        store.queries = store.queries | queries.load(store.dialect.name, "bench")  # as BenchDb does
        Holder(store).stop()
        held = Holder(store)
        held.start()
        held.stop()
        assert held.error is None


def test_bench_claim_reports_the_cpu_a_claim_cost(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """This process's CPU per claim always; the database backends' on PostgreSQL on this host (SQLite has
    no server processes)."""
    assert main(["bench", "claim", "--db", db_url, "--repeat", "1", *TINY["claim"]]) == 0
    run, median = _lines(capsys)
    assert run["client_cpu_us_per_claim"] > 0 and median["client_cpu_us_per_claim"] > 0
    if db_url.startswith("postgresql"):
        assert run["db_cpu_us_per_claim"] > 0
    else:
        assert run["db_cpu_us_per_claim"] is None
