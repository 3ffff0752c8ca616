"""GET /api/v1/jobs/<id>/failures with an id no job can have: the caller's error, never the database's."""

from __future__ import annotations

import pytest

from chokaq_ops import errors
from chokaq_ops.models import FailureFilter


def test_a_nul_in_the_job_id_is_refused_with_the_field_named(client):
    """Found by the API fuzzer on PostgreSQL: the id went to the database as JSON and came back as 500."""
    r = client.get("/jobs/%00/failures", role="reader")
    assert r.status_code == 422, r.get_data(as_text=True)
    assert "NUL" in r.get_data(as_text=True) and "ids" in r.get_data(as_text=True)


def test_failure_history_refuses_a_nul_in_any_list_of_a_hand_built_filter(store):
    for field in ("ids", "queues", "types", "fingerprints"):
        with pytest.raises(errors.ValidationError) as caught:
            store.failure_history(FailureFilter(**{field: ("ok", "bad\x00")}))
        assert caught.value.field == field
