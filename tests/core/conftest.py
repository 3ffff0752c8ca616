"""Library tests; the filter-surface tests use the client fixtures (tests/support/clients.py)."""

from tests.support.clients import any_client, api, client  # noqa: F401 (fixtures)
