"""Job frames: the documented columns and dtypes on both dialects, filters in SQL, keyset pages."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import pytest

from chokaq_ops import errors
from chokaq_ops.analysis import columns as C
from chokaq_ops.models import FailureReason
from tests.support.seeds import seed_archive, seed_dlq, seed_hot, traceback_text

EXPECTED_KINDS = {
    "id": "string",
    "queue": "category",
    "type": "category",
    "payload": "string",
    "tags": "string",
    "priority": "int64",
    "status": "category",
    "attempt_count": "int64",
    "worker_id": "string",
    "idempotency_key": "string",
    "heartbeat_at": "time",
    "scheduled_at": "time",
    "created_at": "time",
    "started_at": "time",
    "finished_at": "time",
    "failed_at": "time",
    "duration_ms": "float64",
    "created_by": "string",
    "last_modified_by": "string",
    "failure_reason": "category",
    "error_details": "string",
    "fingerprint": "string",
    "location": "category",
}


def kind(dtype: object) -> str:
    if isinstance(dtype, pd.CategoricalDtype):
        return "category"
    if isinstance(dtype, pd.DatetimeTZDtype):
        assert str(dtype.tz) == "UTC" and dtype.unit == "us", dtype
        return "time"
    if dtype == C.STRING_DTYPE:
        return "string"
    return str(dtype)


def assert_contract(frame: pd.DataFrame, *, heavy: bool = True) -> None:
    expected = [c for c in EXPECTED_KINDS if heavy or c not in ("payload", "error_details")]
    assert list(frame.columns) == expected
    assert {c: kind(frame[c].dtype) for c in frame.columns} == {c: EXPECTED_KINDS[c] for c in expected}
    assert list(frame["failure_reason"].cat.categories) == [r.name for r in sorted(FailureReason)]
    assert list(frame["status"].cat.categories) == ["pending", "fetched", "processing", "succeeded", "dead"]
    assert list(frame["location"].cat.categories) == ["hot", "archive", "dlq"]


def test_columns_are_defined_once_and_match_the_contract() -> None:
    contract = [
        "id",
        "queue",
        "type",
        "payload",
        "tags",
        "priority",
        "status",
        "attempt_count",
        "worker_id",
        "idempotency_key",
        "heartbeat_at",
        "scheduled_at",
        "created_at",
        "started_at",
        "finished_at",
        "failed_at",
        "duration_ms",
        "created_by",
        "last_modified_by",
        "failure_reason",
        "error_details",
        "location",
    ]
    assert [c for c in C.JOB_COLUMNS if c != "fingerprint"] == contract
    assert list(EXPECTED_KINDS) == list(C.JOB_COLUMNS)


def test_dlq_frame_columns_dtypes_and_values(client, store) -> None:
    ids = seed_dlq(
        store,
        5,
        reason=FailureReason.Zombie,
        error=lambda i: f'Zombie detected: heartbeat expired, "quoted", comma, and\nnewline {i}',
        payload=lambda i: f'{{"a": "x,\\"y\\"\\n", "i": {i}}}',
    )
    frame = client.load_dlq()
    assert_contract(frame)
    assert len(frame) == 5 and set(frame["id"]) == set(ids)
    row = frame.set_index("id").loc[ids[2]]
    stored = store.get_job(ids[2])
    # text survives the CSV round trip on PostgreSQL byte for byte
    assert row["payload"] == stored["payload"] == '{"a": "x,\\"y\\"\\n", "i": 2}'
    assert row["error_details"] == stored["error_details"]
    assert row["failure_reason"] == "Zombie" and row["status"] == "dead" and row["location"] == "dlq"
    assert row["queue"] == "billing" and row["worker_id"] == stored["worker_id"]
    assert row["failed_at"] == pd.Timestamp(stored["failed_at"])  # microseconds kept exactly
    assert row["heartbeat_at"] == pd.Timestamp(stored["heartbeat_at"])
    assert row["duration_ms"] == 1500.0 and row["attempt_count"] == 1 and row["priority"] == 10
    assert pd.isna(row["finished_at"]) and pd.isna(row["tags"]) and pd.isna(row["scheduled_at"])
    assert frame["failed_at"].is_monotonic_increasing


def test_light_frames_leave_out_payload_and_error_details(client, store) -> None:
    seed_dlq(store, 3)
    frame = client.load_dlq(heavy=False)
    assert_contract(frame, heavy=False)
    assert len(frame) == 3


def test_archive_and_hot_frames_share_the_columns(client, store) -> None:
    seed_archive(store, 4)
    seed_hot(store, 3)
    archive, hot = client.load_archive(), client.load_hot()
    assert_contract(archive)
    assert_contract(hot)
    assert (archive["status"] == "succeeded").all() and archive["finished_at"].notna().all()
    assert (archive["duration_ms"] == 12.5).all() and archive["failure_reason"].isna().all()
    assert (
        (hot["status"] == "pending").all()
        and (hot["location"] == "hot").all()
        and (hot["tags"] == "nightly").all()
    )
    both = C.concat_jobs([archive, hot])
    assert_contract(both)
    assert set(both["queue"].cat.categories) == {"mail", "reports"}


def test_empty_frames_have_every_column(client) -> None:
    assert_contract(client.load_dlq())
    assert_contract(client.load_hot(heavy=False), heavy=False)


def test_filters_are_pushed_down(client, store) -> None:
    seed_dlq(store, 4, queue="billing", error=lambda i: traceback_text("KeyError", f"'sku-{i}'"))
    zombies = seed_dlq(store, 3, queue="media", type="media.resize.v1", reason=FailureReason.Zombie)
    seed_dlq(store, 2, queue="mail", fingerprint=lambda i: "fp-mail")
    assert set(client.load_dlq(queue="media")["id"]) == set(zombies)
    assert set(client.load_dlq(reason="Zombie")["id"]) == set(zombies)
    assert set(client.load_dlq(reason=2)["id"]) == set(zombies)
    assert len(client.load_dlq(type="media.resize.v1", reason="Fatal")) == 0
    assert len(client.load_dlq(fingerprint="fp-mail")) == 2
    assert len(client.load_dlq(search="sku-")) == 4
    now = store.now()
    assert len(client.load_dlq(failed_from=now + timedelta(hours=1))) == 0
    assert len(client.load_dlq(failed_to=(now + timedelta(hours=1)).isoformat())) == 9
    assert len(client.load_dlq(created_from=timedelta(hours=1))) == 9  # a timedelta means "that long ago"
    with pytest.raises(errors.ValidationError) as bad:
        client.load_dlq(colour="red")
    assert bad.value.field == "colour"
    with pytest.raises(errors.ValidationError) as bad:
        client.load_dlq(reason="Exploded")
    assert bad.value.field == "reason"


def test_keyset_pages_return_every_row_once(client, store) -> None:
    ids = seed_dlq(store, 23)
    pages = list(client.iter_dlq(chunk_size=5))
    assert [len(p) for p in pages] == [5, 5, 5, 5, 3]
    together = C.concat_jobs(pages)
    assert sorted(together["id"]) == sorted(ids)
    assert together["failed_at"].is_monotonic_increasing
    assert_contract(together)
    whole = client.load_dlq(chunk_size=7)
    pd.testing.assert_frame_equal(whole, client.load_dlq())
    assert len(client.load_dlq(limit=6, chunk_size=4)) == 6
