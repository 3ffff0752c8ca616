"""The notebooks run headless (nbclient) on a `chokaq demo` history, straight on the database and through a
served API (`chokaq serve`); a cell that raises fails the test."""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from chokaq_ops.client import DbClient
from chokaq_ops.models import Actor, DlqFilter, FailureReason
from chokaq_ops.storage import Store
from tests.support.cli import record

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
CHOKAQ = str(Path(sys.executable).with_name("chokaq"))
# Jupyter kernels and served APIs in processes of their own: a minute of wall clock, so not in test-fast.
pytestmark = pytest.mark.slow

TARGET_ENV = ("CHOKAQ_DB", "CHOKAQ_API_URL", "CHOKAQ_API_TOKEN", "CHOKAQ_CONFIG", "CHOKAQ_ACTOR")


SWITCH_OFF, SWITCH_ON = "EXECUTE = False", "EXECUTE = True"


def execute(
    path: Path, workdir: Path, km: KernelManager | None = None, *, flip_switch: bool = False
) -> nbformat.NotebookNode:
    """Run every cell of a notebook; a cell that raises raises CellExecutionError here.

    With `km`, the notebook runs on that (already started) kernel after `%reset -f`: a clean namespace,
    so a notebook cannot lean on another's variables or imports, but warm module caches. With
    `flip_switch`, the notebook runs as a reader who set `EXECUTE = True` in its first code cell."""
    notebook = nbformat.read(path, as_version=4)
    if flip_switch:
        first = next(c for c in notebook.cells if c.cell_type == "code")
        assert first.source.count(SWITCH_OFF) == 1, f"{path.name}: no switch in the first code cell"
        first.source = first.source.replace(SWITCH_OFF, SWITCH_ON)
    if km is not None:
        notebook.cells.insert(0, nbformat.v4.new_code_cell("%reset -f"))
    client = NotebookClient(
        notebook, km=km, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}
    )
    client.execute()
    return notebook


def checksum(path: Path, ignore: frozenset[tuple[str, str]] = frozenset()) -> dict[str, tuple[int, str]]:
    """Every table of a SQLite database: (row count, sha256 of its sorted rows), columns in `ignore`
    ((table, column)) left out."""
    out: dict[str, tuple[int, str]] = {}
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in sorted(tables):
            cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})") if (table, r[1]) not in ignore]
            rows = sorted(repr(r) for r in conn.execute(f"SELECT {', '.join(cols)} FROM {table}"))
            out[table] = (len(rows), hashlib.sha256("\n".join(rows).encode()).hexdigest())
    return out


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One small demo history for every notebook run of this module (each run works on a copy)."""
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    env = {k: v for k, v in os.environ.items() if k not in TARGET_ENV}
    done = subprocess.run(
        [CHOKAQ, "demo", "--db", f"sqlite:///{path}", "--jobs", "120", "--seconds", "60", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    made = record(done.stdout)
    assert made["dlq"] > 0 and made["archive"] > 0, made
    return path


# `chokaq serve` without an engine: its first line (stdout and stderr together) is the "serving" line.
API_ONLY = ("--no-worker", "--no-rescue", "--no-retention", "--no-schedules")


def copy_db(source: Path, target: Path) -> str:
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    return f"sqlite:///{target}"


@pytest.fixture
def served(tmp_path: Path, demo_db: Path) -> Iterator[tuple[str, str, str]]:
    """`chokaq serve` (API only) over a copy of the demo database: (api url, admin token, db url)."""
    url = copy_db(demo_db, tmp_path / "served.db")
    with Store(url, pool_size=1) as store:
        token = store.create_token("notebook", "admin", actor=Actor("test-setup"))
    env = {k: v for k, v in os.environ.items() if k not in TARGET_ENV}
    proc = subprocess.Popen(
        [CHOKAQ, "serve", "--db", url, "--port", "0", *API_ONLY],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"serving (http://\S+?)/api/v1", line)
        assert found, (
            f"chokaq serve did not start: {line}{proc.stdout.read() if proc.poll() is not None else ''}"
        )
        yield found.group(1), token, url
    finally:
        proc.terminate()
        proc.wait(10)


def run_all(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, *, flip_switch: bool = False, **env: str
) -> list[nbformat.NotebookNode]:
    for name in TARGET_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(workdir))  # the kernel inherits the environment set above
    try:
        return [execute(path, workdir, km, flip_switch=flip_switch) for path in NOTEBOOKS]
    finally:
        km.shutdown_kernel(now=True)


def plans_made(url: str) -> list[dict]:
    with Store(url, pool_size=1) as store:
        plans, _ = store.list_plans()
        return plans


def test_the_notebooks_are_committed_with_the_outputs_of_a_dry_run() -> None:
    """A reader on GitHub sees every output without running anything, and what they see is what a run
    as shipped does: top to bottom, in order, no error, EXECUTE off, the decisions only previewed."""
    assert [p.name for p in NOTEBOOKS] == [
        "01_dlq_triage.ipynb",
        "02_zombie_review.ipynb",
        "03_failure_trends.ipynb",
    ]
    charts = {"01_dlq_triage.ipynb": 2, "02_zombie_review.ipynb": 1, "03_failure_trends.ipynb": 5}
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        code = [c for c in notebook.cells if c.cell_type == "code"]
        assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), (
            f"{path.name}: not run in order"
        )
        assignments = re.findall(r"^EXECUTE = \w+", "\n".join(c.source for c in code), flags=re.MULTILINE)
        assert assignments == [SWITCH_OFF] and SWITCH_OFF in code[0].source, path.name
        outputs = [o for c in code for o in c.outputs]
        assert not [o for o in outputs if o.output_type == "error"], path.name
        images = [o for o in outputs if "image/png" in o.get("data", {})]
        assert len(images) == charts[path.name], path.name
        text = "\n".join(
            str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in outputs
        )
        if path.name != "03_failure_trends.ipynb":
            assert "DRY RUN: would resurrect" in text and "nothing changed" in text, path.name
        source = "\n".join(c.source for c in code)
        assert "import chokaq_ops" in source and "SELECT" not in source.upper().replace("SELECTION", "")


def test_the_notebooks_as_shipped_change_no_row(demo_db: Path, tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "direct.db"
    url = copy_db(demo_db, path)
    before = checksum(path)
    assert before["jobs_dlq"][0] > 0 and before["jobs_archive"][0] > 0
    notebooks = run_all(tmp_path, monkeypatch, CHOKAQ_DB=url, CHOKAQ_ACTOR="notebook-ci")
    assert checksum(path) == before
    printed = "\n".join(
        str(o.get("text", "")) for nb in notebooks for c in nb.cells for o in c.get("outputs", [])
    )
    assert printed.count("DRY RUN: would resurrect") == 2


def test_the_notebooks_as_shipped_through_the_api_change_no_row(served, tmp_path: Path, monkeypatch) -> None:
    api_url, token, db_url = served
    path = Path(db_url.removeprefix("sqlite:///"))
    # The API stamps a token's last use (to the minute) on its requests: bookkeeping, not a change.
    ignore = frozenset({("api_tokens", "last_used_at")})
    before = checksum(path, ignore)
    run_all(tmp_path, monkeypatch, CHOKAQ_API_URL=api_url, CHOKAQ_API_TOKEN=token)
    assert checksum(path, ignore) == before


def test_the_switch_carries_the_decisions_out(demo_db: Path, tmp_path: Path, monkeypatch) -> None:
    url = copy_db(demo_db, tmp_path / "direct.db")
    run_all(tmp_path, monkeypatch, flip_switch=True, CHOKAQ_DB=url, CHOKAQ_ACTOR="notebook-ci")
    plans = {p["id"]: p for p in plans_made(url)}
    assert len(plans) == 2, "triage resurrects the fixed payloads, the zombie review the last day's zombies"
    assert {p["state"] for p in plans.values()} == {"done"}
    assert {p["actor"] for p in plans.values()} == {"notebook-ci"}
    by_reason = {r: p["total"] for p in plans.values() for r in p["by_reason"]}
    assert by_reason["Zombie"] == 2, "the second media host's renders; the settlement is left for a human"
    assert by_reason["Fatal"] >= 1


def test_the_switch_through_the_api(served: tuple[str, str, str], tmp_path: Path, monkeypatch) -> None:
    api_url, token, db_url = served
    run_all(tmp_path, monkeypatch, flip_switch=True, CHOKAQ_API_URL=api_url, CHOKAQ_API_TOKEN=token)
    plans = plans_made(db_url)
    assert len(plans) == 2 and {p["state"] for p in plans} == {"done"}
    assert {p["actor"] for p in plans} == {"notebook"}, "over the API the actor is the token's name"


def test_a_failing_cell_fails_the_run(tmp_path: Path) -> None:
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("assert x == 2, 'broken'")]
    )
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "broken.ipynb"
    nbformat.write(notebook, path)
    with pytest.raises(CellExecutionError, match="broken"):
        execute(path, tmp_path)


def test_demo_history(demo_db: Path) -> None:
    """What the notebooks rely on: every kind of failure, zombies from three dead workers with their own
    runtimes and heartbeat ages, busy and quiet hours over days, error groups that come, go and grow."""
    with Store(f"sqlite:///{demo_db}", pool_size=1) as store:
        summary = store.dlq_summary()
        reasons = {e["value"]: e["count"] for e in summary["by_reason"]}
        assert {"MaxRetriesExceeded", "Fatal", "Timeout", "Zombie", "Cancelled"} <= set(reasons), reasons
        assert reasons["Zombie"] == 6
        zombies = store.list_dlq(DlqFilter(reason=FailureReason.Zombie), page_size=10).items
        assert {z["worker_id"] for z in zombies} == {"demo-media-1", "demo-media-2", "demo-billing-1"}
        assert all(z["heartbeat_at"] is not None and z["heartbeat_at"] < z["failed_at"] for z in zombies)
        runtimes = {round(z["duration_ms"] / 100) for z in zombies}  # to 0.1 s
        ages = {round((z["failed_at"] - z["heartbeat_at"]).total_seconds()) for z in zombies}
        assert len(runtimes) >= 4 and len(ages) >= 2, (runtimes, ages)
        for z in zombies:  # the message quotes the heartbeat the column holds, after the move into history
            stamp = z["heartbeat_at"].isoformat(timespec="milliseconds").replace("+00:00", "Z")
            assert f"last heartbeat {stamp} " in z["error_details"], (stamp, z["error_details"])
        groups = {(e["exception_type"], e["template"]) for e in summary["top_errors"]}
        assert len(groups) >= 5, groups
        stats = store.stats()
        assert stats["retried_total"] > 0 and stats["archive"] > 0
        first = min(e["first_failed_at"] for e in summary["by_reason"])
        last = max(e["last_failed_at"] for e in summary["by_reason"])
        assert (last - first).total_seconds() > 86_400, "the history is spread over days"
    with DbClient(Store(f"sqlite:///{demo_db}", pool_size=1), actor="test", close_store=True) as client:
        done = client.load_archive(heavy=False)
    per_hour = done["finished_at"].dt.hour.value_counts().reindex(range(24), fill_value=0)
    quiet, busy = per_hour[[1, 2, 3, 4, 5]].sum(), per_hour[[12, 13, 14, 15, 16]].sum()
    assert busy > 4 * max(quiet, 1), per_hour.to_dict()


def test_notebooks_sharing_a_kernel_do_not_share_names(tmp_path: Path) -> None:
    first, second = tmp_path / "first.ipynb", tmp_path / "second.ipynb"
    for path, source in ((first, "import json\nleft_over = 1"), (second, "json.dumps(left_over)")):
        notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
        notebook.metadata["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3",
            "language": "python",
        }
        nbformat.write(notebook, path)
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(tmp_path))
    try:
        execute(first, tmp_path, km)
        with pytest.raises(CellExecutionError, match="NameError"):
            execute(second, tmp_path, km)
    finally:
        km.shutdown_kernel(now=True)
