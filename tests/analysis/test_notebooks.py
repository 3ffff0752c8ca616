"""The notebooks run headless (nbclient) on a `chokaq demo` history, straight on the database and through a
served API (`chokaq serve`); a cell that raises fails the test."""

from __future__ import annotations

import json
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

from chokaq_ops.models import Actor, DlqFilter, FailureReason
from chokaq_ops.storage import Store

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
CHOKAQ = str(Path(sys.executable).with_name("chokaq"))
TARGET_ENV = ("CHOKAQ_DB", "CHOKAQ_API_URL", "CHOKAQ_API_TOKEN", "CHOKAQ_CONFIG", "CHOKAQ_ACTOR")


def execute(path: Path, workdir: Path, km: KernelManager | None = None) -> nbformat.NotebookNode:
    """Run every cell of a notebook; a cell that raises raises CellExecutionError here.

    With `km`, the notebook runs on that (already started) kernel after `%reset -f`: a clean namespace,
    so a notebook cannot lean on another's variables or imports, but warm module caches."""
    notebook = nbformat.read(path, as_version=4)
    if km is not None:
        notebook.cells.insert(0, nbformat.v4.new_code_cell("%reset -f"))
    client = NotebookClient(
        notebook, km=km, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}
    )
    client.execute()
    return notebook


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
    made = json.loads(done.stdout)
    assert made["dlq"] > 0 and made["archive"] > 0, made
    return path


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
        [CHOKAQ, "serve", "--db", url, "--port", "0", "--no-worker", "--no-rescue", "--no-retention"],
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


def run_all(workdir: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> list[nbformat.NotebookNode]:
    for name in TARGET_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(workdir))  # the kernel inherits the environment set above
    try:
        return [execute(path, workdir, km) for path in NOTEBOOKS]
    finally:
        km.shutdown_kernel(now=True)


def plans_made(url: str) -> list[dict]:
    with Store(url, pool_size=1) as store:
        plans, _ = store.list_plans()
        return plans


def test_there_are_three_notebooks_committed_without_outputs() -> None:
    assert [p.name for p in NOTEBOOKS] == [
        "01_dlq_triage.ipynb",
        "02_zombie_review.ipynb",
        "03_failure_trends.ipynb",
    ]
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        code = [c for c in notebook.cells if c.cell_type == "code"]
        assert all(not c.outputs and c.execution_count is None for c in code), f"{path.name} has outputs"
        source = "\n".join(c.source for c in code)
        assert "import chokaq_ops" in source and "SELECT" not in source.upper().replace("SELECTION", "")


def test_notebooks_on_the_database(demo_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = copy_db(demo_db, tmp_path / "direct.db")
    run_all(tmp_path, monkeypatch, CHOKAQ_DB=url, CHOKAQ_ACTOR="notebook-ci")
    plans = {p["id"]: p for p in plans_made(url)}
    assert len(plans) == 2, "triage resurrects the fixed payloads, the zombie review yesterday's zombies"
    assert {p["state"] for p in plans.values()} == {"done"}
    assert {p["actor"] for p in plans.values()} == {"notebook-ci"}
    by_reason = {r: p["total"] for p in plans.values() for r in p["by_reason"]}
    assert by_reason["Zombie"] == 3, "the idempotent renders; the settlement is left for a human"
    assert by_reason["Fatal"] >= 1


def test_notebooks_through_the_api(served: tuple[str, str, str], tmp_path: Path, monkeypatch) -> None:
    api_url, token, db_url = served
    run_all(tmp_path, monkeypatch, CHOKAQ_API_URL=api_url, CHOKAQ_API_TOKEN=token)
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
    """What the notebooks rely on: every kind of failure, zombies from a killed worker, days of history."""
    with Store(f"sqlite:///{demo_db}", pool_size=1) as store:
        summary = store.dlq_summary()
        reasons = {e["value"]: e["count"] for e in summary["by_reason"]}
        assert {"MaxRetriesExceeded", "Fatal", "Timeout", "Zombie", "Cancelled"} <= set(reasons), reasons
        assert reasons["Zombie"] == 4
        zombies = store.list_dlq(DlqFilter(reason=FailureReason.Zombie)).items
        assert {z["worker_id"] for z in zombies} == {"demo-media-1"}
        assert all(z["heartbeat_at"] is not None and z["heartbeat_at"] < z["failed_at"] for z in zombies)
        groups = {(e["exception_type"], e["template"]) for e in summary["top_errors"]}
        assert len(groups) >= 5, groups
        stats = store.stats()
        assert stats["retried_total"] > 0 and stats["archive"] > 0
        first = min(e["first_failed_at"] for e in summary["by_reason"])
        last = max(e["last_failed_at"] for e in summary["by_reason"])
        assert (last - first).total_seconds() > 86_400, "the history is spread over days"


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
