"""Job pages dumped without marshmallow's per-field calls (chokaq_api/fast_dump.py) answer exactly what
marshmallow's own dump answers, for every job schema and every kind of job, on both databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import marshmallow as ma
import pytest

from chokaq_api import fast_dump
from chokaq_api.resources.dlq.schemas import DeadJobSchema
from chokaq_api.resources.jobs.schemas import JobSchema
from chokaq_ops.filters import DlqFilter
from chokaq_ops.models import FailureReason
from tests.api.conftest import WORKER, enqueue, to_archive, to_dlq


def _marshmallow(schema: ma.Schema, items: list, many: bool = True):
    return ma.Schema.dump(schema, items, many=many)


def _jobs(store) -> None:
    """A hot job in each status, with and without the optional fields, and archived and dead ones."""
    enqueue(store, 1, queue="fd.a", tags="a,b", idempotency_key="k-1", priority=30)
    enqueue(store, 1, queue="fd.a", scheduled_at=datetime.now(UTC) + timedelta(hours=1))
    enqueue(store, 2, queue="fd.b", payload='{"n": 1}')
    claimed = [r["id"] for r in store.fetch(WORKER, 2, queues=["fd.b"])]
    store.mark_processing(WORKER, claimed[:1])
    to_archive(store, 2, queue="fd.c", tags="done")
    to_dlq(store, 2, queue="fd.d", error="ValueError: boom\n  at line 3")
    to_dlq(store, 1, queue="fd.d", reason=FailureReason.Zombie)


def test_every_job_schema_is_compiled():
    """Without this the comparisons below would compare marshmallow with itself."""
    assert JobSchema()._fast is not None
    assert DeadJobSchema(many=True)._fast is not None


@pytest.mark.parametrize("where", ["hot", "archive", "dlq"])
def test_pages_match_marshmallow(store, where):
    _jobs(store)
    if where == "hot":
        items = list(store.list_hot(page=1, page_size=100).items)
        assert {j["status"] for j in items} == {"pending", "fetched", "processing"}
        schema = JobSchema(many=True)
    elif where == "archive":
        items = list(store.list_archive(page=1, page_size=100).items)
        schema = JobSchema(many=True)
    else:
        items = list(store.list_dlq(DlqFilter(), page=1, page_size=100).items)
        schema = DeadJobSchema(many=True)
    assert len(items) >= 2
    items.append(store.get_job(items[0]["id"]))  # the single-job record too
    fast = schema.dump(items)
    assert fast == _marshmallow(schema, items)
    assert [list(d) for d in fast] == [list(d) for d in _marshmallow(schema, items)]  # field order too
    one = schema.dump(items[0], many=False)
    assert one == _marshmallow(schema, items[0], many=False)
    if where == "dlq":
        assert any(d["heartbeat_age_seconds"] is not None or d["runtime_seconds"] is not None for d in fast)


def test_values_of_every_shape_match_marshmallow():
    """Times naive, UTC, another offset and as text; numbers as text; a boolean; bytes; None."""
    schema = DeadJobSchema()
    item = {
        "id": "x1",
        "location": "dlq",
        "status": "dead",
        "queue": b"q",
        "type": "t",
        "priority": "7",
        "attempt_count": 3.0,
        "worker_gone": True,
        "created_at": datetime(2026, 1, 2, 3, 4, 5),
        "started_at": datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC),
        "failed_at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=-5))),
        "heartbeat_at": "2026-01-02T03:04:05+02:00",
        "duration_ms": "12.5",
        "failure_count": None,
    }
    assert schema.dump(item) == _marshmallow(schema, item, many=False)
    assert schema.dump([item, item], many=True) == _marshmallow(schema, [item, item])


def test_a_schema_it_does_not_understand_is_left_to_marshmallow():
    class Renamed(JobSchema):
        queue = ma.fields.String(data_key="queue_name")

    class Hooked(JobSchema):
        @ma.post_dump
        def shout(self, data, **kwargs):
            return {k.upper(): v for k, v in data.items()}

    class Nested(JobSchema):
        extra = ma.fields.List(ma.fields.String())

    for schema in (Renamed(), Hooked(), Nested()):
        assert schema._fast is None
    assert fast_dump.compile_dumper(Hooked(), "every_field") is None
    assert "QUEUE" in Hooked().dump({"id": "x", "queue": "q"})
