"""`chokaq` command tests share the client fixtures (tests/support/clients.py)."""

from collections.abc import Iterator

import pytest

from tests.support.cli import Target, target
from tests.support.clients import any_client, api, client  # noqa: F401 (fixtures)


@pytest.fixture(params=["db", "http"])
def on(request, store, db_url, monkeypatch) -> Iterator[Target]:
    """The command under test on the database and through the real API (an admin token named ann)."""
    with target(request.param, store, db_url, monkeypatch, actor="ann") as where:
        yield where
