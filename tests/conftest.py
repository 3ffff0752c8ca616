"""Shared fixtures: every storage-backed test runs on SQLite and on PostgreSQL.

PostgreSQL comes from CHOKAQ_TEST_PG (an admin URL, default postgresql://postgres@127.0.0.1:5432/postgres).
Each test gets a fresh database cloned from a migrated template. When the server is unreachable the
PostgreSQL half is skipped with the reason, unless CHOKAQ_REQUIRE_PG=1 (CI), where it fails instead.
CHOKAQ_TEST_DIALECTS=sqlite (or postgresql) limits the run to one dialect.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from chokaq_ops.storage import Store
from chokaq_ops.storage.dialects import from_url
from chokaq_ops.storage.migrate import migrate
from tests.support.apps import app_shells, bound_app  # noqa: F401 (fixtures)

PG_ADMIN_URL = os.environ.get("CHOKAQ_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
REQUIRE_PG = os.environ.get("CHOKAQ_REQUIRE_PG", "") not in ("", "0", "false", "no")
DIALECTS = [d.strip() for d in os.environ.get("CHOKAQ_TEST_DIALECTS", "sqlite,postgresql").split(",")]

_counter = itertools.count()


class PgServer:
    """Creates throwaway databases on the test server from one migrated template per session."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.prefix = f"chokaq_t{os.getpid()}_{uuid.uuid4().hex[:6]}"
        self.template = f"{self.prefix}_tpl"
        self._created: list[str] = []
        self._admin = from_url(admin_url).connect()
        self._exec(f'CREATE DATABASE "{self.template}"')
        with Store(self.url_for(self.template), pool_size=1) as store:
            migrate(store)

    def url_for(self, db: str) -> str:
        base, _, _ = self.admin_url.rpartition("/")
        return f"{base}/{db}"

    def _exec(self, sql: str) -> None:
        cur = self._admin.cursor()
        try:
            cur.execute(sql)
        finally:
            cur.close()

    def create(self, *, migrated: bool = True) -> str:
        name = f"{self.prefix}_{next(_counter)}"
        self._exec(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{self.template}"' if migrated else ""))
        self._created.append(name)
        return self.url_for(name)

    def drop(self, url: str) -> None:
        name = url.rpartition("/")[2]
        self._exec(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if name in self._created:
            self._created.remove(name)

    def close(self) -> None:
        for name in [*self._created, self.template]:
            with contextlib.suppress(Exception):
                self._exec(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self._admin.close()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer | None]:
    if "postgresql" not in DIALECTS:
        yield None
        return
    try:
        server = PgServer(PG_ADMIN_URL)
    except Exception as exc:
        if REQUIRE_PG:
            pytest.fail(
                f"PostgreSQL is required (CHOKAQ_REQUIRE_PG) but unreachable at {PG_ADMIN_URL}: {exc}"
            )
        yield None
        return
    yield server
    server.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test marked postgres_only or sqlite_only is not collected for the other dialect's database:
    it is not a test that database could run (and so never shows as skipped)."""
    keep, drop = [], []
    for item in items:
        dialect = getattr(getattr(item, "callspec", None), "params", {}).get("db_url")
        only = {m.name for m in item.iter_markers()} & {"postgres_only", "sqlite_only"}
        own = {"postgresql": "postgres_only", "sqlite": "sqlite_only"}.get(dialect or "")
        wrong = dialect is not None and only and own not in only
        (drop if wrong else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _skip_unless(dialect: str, pg_server: PgServer | None) -> None:
    if dialect not in DIALECTS:
        pytest.skip(f"{dialect} excluded by CHOKAQ_TEST_DIALECTS")
    if dialect == "postgresql" and pg_server is None:
        pytest.skip(f"PostgreSQL not reachable at {PG_ADMIN_URL} (set CHOKAQ_TEST_PG to an admin URL)")


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One migrated SQLite file per test process; each test gets a copy (a copy is ~100x faster than
    migrating). Closing the store checkpoints the WAL, so the file alone holds the schema."""
    path = tmp_path_factory.mktemp("template") / "chokaq.db"
    with Store(f"sqlite:///{path}", pool_size=1) as store:
        migrate(store)
    return path


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path, pg_server: PgServer | None) -> Iterator[str]:
    """A fresh, migrated database URL for each test, on each dialect."""
    _skip_unless(request.param, pg_server)
    if request.param == "sqlite":
        path = tmp_path / "chokaq.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        yield f"sqlite:///{path}"
    else:
        assert pg_server is not None
        url = pg_server.create()
        yield url
        pg_server.drop(url)


@pytest.fixture
def pg_url(pg_server: PgServer | None) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database (for PostgreSQL-only behaviour such as real row locks)."""
    _skip_unless("postgresql", pg_server)
    assert pg_server is not None
    url = pg_server.create()
    yield url
    pg_server.drop(url)


@pytest.fixture
def dialect(db_url: str) -> str:
    return "sqlite" if db_url.startswith("sqlite") else "postgresql"


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    with Store(db_url, pool_size=24, transient_retry_base_delay=0.02) as s:
        yield s
