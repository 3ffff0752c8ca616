"""Client tests: DbClient and HttpClient over the same fixtures (tests/support/clients.py)."""

from tests.support.clients import any_client, api, client  # noqa: F401 (fixtures)
