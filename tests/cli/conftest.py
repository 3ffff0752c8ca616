"""`chokaq` command tests share the client fixtures (tests/support/clients.py)."""

from tests.support.clients import any_client, api, client  # noqa: F401 (fixtures)
