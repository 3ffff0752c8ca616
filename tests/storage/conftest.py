"""Fixtures of the storage contract suite beyond the shared `store` / `db_url` / `pg_url`.

`module_store` is one migrated database per test module and dialect, for read-only tests that share a
dataset built once (building it per test would cost most of the suite's time budget)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from chokaq_ops.storage import Store
from chokaq_ops.storage.migrate import migrate

_DIALECTS = [d.strip() for d in os.environ.get("CHOKAQ_TEST_DIALECTS", "sqlite,postgresql").split(",")]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def module_store(request: pytest.FixtureRequest, tmp_path_factory, pg_server) -> Iterator[Store]:
    if request.param not in _DIALECTS:
        pytest.skip(f"{request.param} excluded by CHOKAQ_TEST_DIALECTS")
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('mod') / 'chokaq.db'}"
        with Store(url, pool_size=1) as s:
            migrate(s)
        with Store(url, pool_size=8) as s:
            yield s
        return
    if pg_server is None:
        pytest.skip("PostgreSQL not reachable (set CHOKAQ_TEST_PG to an admin URL)")
    url = pg_server.create()
    try:
        with Store(url, pool_size=8) as s:
            yield s
    finally:
        pg_server.drop(url)


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    """A fresh, migrated SQLite database (for SQLite-only behaviour, without creating a PostgreSQL one)."""
    if "sqlite" not in _DIALECTS:
        pytest.skip("sqlite excluded by CHOKAQ_TEST_DIALECTS")
    url = f"sqlite:///{tmp_path / 'chokaq.db'}"
    with Store(url, pool_size=1) as s:
        migrate(s)
    return url
