"""Fixtures for the real-process tests: a work directory, a worker factory that always cleans up."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chokaq_ops.storage import Store
from crash.procs import WorkerProc
from crash.proxy import CuttableProxy


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., WorkerProc]]:
    """Start `chokaq worker` processes; every one still running at the end is killed (by its pid)."""
    procs: list[WorkerProc] = []

    def start(url: str, config: Path, name: str, **kw: Any) -> WorkerProc:
        w = WorkerProc(url, config, tmp_path, name, **kw)
        procs.append(w)
        return w

    yield start
    for w in procs:
        w.stop()


@pytest.fixture(autouse=True)
def _show_worker_logs_on_failure(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[None]:
    yield
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        for log in sorted(tmp_path.glob("worker-*.log")):
            print(f"----- {log.name} (last 60 lines)")
            print("\n".join(log.read_text(errors="replace").splitlines()[-60:]))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)


@pytest.fixture
def proxy() -> Iterator[CuttableProxy]:
    """A cuttable TCP proxy to the PostgreSQL server (crash/proxy.py), closed after the test."""
    p = CuttableProxy()
    yield p
    p.close()


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[Store]:
    """A reader on this test's own PostgreSQL database (PostgreSQL-only tests)."""
    with Store(pg_url, pool_size=4) as s:
        yield s
