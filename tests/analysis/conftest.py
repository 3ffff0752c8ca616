"""Analysis tests draw without a display and share the client fixtures (tests/support/clients.py)."""

import matplotlib

from tests.support.clients import any_client, api, client  # noqa: F401 (fixtures)

matplotlib.use("Agg")
