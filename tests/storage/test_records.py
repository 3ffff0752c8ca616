"""The store returns typed, immutable records (chokaq_ops/records.py) whose fields are the tables' columns,
readable by attribute and, at the JSON and DataFrame edges, as a mapping."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from chokaq_ops.models import Actor, FailureReason
from chokaq_ops.records import (
    ArchivedJob,
    AuditEntry,
    ClaimedJob,
    DeadJob,
    HotJob,
    Started,
    job_from_view,
    job_record,
)
from tests.support.seeds import seed_archive, seed_dlq, seed_hot


def test_each_location_comes_back_as_its_record_with_contract_names(store) -> None:
    hot, done, dead = seed_hot(store, 1)[0], seed_archive(store, 1)[0], seed_dlq(store, 1)[0]
    h, a, d = store.get_job(hot), store.get_job(done), store.get_job(dead)
    assert (type(h), type(a), type(d)) == (HotJob, ArchivedJob, DeadJob)
    assert (h.status, a.status, d.status) == ("pending", "succeeded", "dead")
    assert (h.location, a.location, d.location) == ("hot", "archive", "dlq")
    assert d.failure_reason == "MaxRetriesExceeded" and d.failed_at.tzinfo is not None
    assert a.duration_ms == 12.5 and a.finished_at >= a.created_at
    assert h.tags == "nightly" and h.due_at is not None


@pytest.mark.parametrize(
    ("location", "record"), [("hot", HotJob), ("archive", ArchivedJob), ("dlq", DeadJob)]
)
def test_a_record_declares_exactly_the_columns_of_its_table(store, location, record) -> None:
    seeded = {"hot": seed_hot, "archive": seed_archive, "dlq": seed_dlq}[location](store, 1)[0]
    row = store.run(f"get_{location}", write=False, id=seeded)[0]
    # `status` is stored only in hot; archive and DLQ rows show the status their table means.
    assert set(row) | {"status"} == set(record.from_stored(row)), "a column the record does not have"


def test_records_are_frozen_and_read_as_mappings(store) -> None:
    job = store.get_job(seed_dlq(store, 1, reason=FailureReason.Zombie)[0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.queue = "elsewhere"  # type: ignore[misc]
    with pytest.raises(TypeError):
        job["queue"] = "elsewhere"  # type: ignore[index]
    assert job["queue"] == job.queue == "billing" and job.get("no_such_field") is None
    assert dict(job) == job.to_dict() == job and dict(job)["location"] == "dlq"
    changed = dataclasses.replace(job, tags="x")
    assert changed.tags == "x" and job.tags is None and changed.id == job.id
    frame = pd.DataFrame([job, changed])
    assert list(frame["tags"].fillna("-")) == ["-", "x"] and set(frame["location"]) == {"dlq"}


def test_a_row_with_an_undeclared_column_is_refused() -> None:
    with pytest.raises(TypeError, match=r"unknown columns: \['surprise'\]"):
        job_record({"location": "hot", "id": "a", "queue": "q", "type": "t", "status": 0, "surprise": 1})


def test_a_view_with_derived_fields_builds_the_same_record(store) -> None:
    job = store.get_job(seed_dlq(store, 1)[0])
    view = job.to_dict() | job.evidence() | {"worker_gone": True}
    assert job_from_view(view) == job and isinstance(job_from_view(view), DeadJob)


def test_dead_job_evidence_uses_duration_then_the_timestamps(store) -> None:
    job = store.get_job(seed_dlq(store, 1)[0])
    assert job.evidence()["runtime_seconds"] == 1.5  # the seeded duration_ms
    no_duration = dataclasses.replace(job, duration_ms=None)
    expected = round((job.failed_at - job.started_at).total_seconds(), 3)
    assert no_duration.evidence()["runtime_seconds"] == expected
    assert job.evidence()["heartbeat_age_seconds"] == round(
        (job.failed_at - job.heartbeat_at).total_seconds(), 3
    )


def test_pages_hold_records_of_their_listing(store) -> None:
    seed_hot(store, 2)
    seed_archive(store, 2)
    seed_dlq(store, 2)
    assert {type(j) for j in store.list_hot().items} == {HotJob}
    assert {type(j) for j in store.list_archive().items} == {ArchivedJob}
    assert {type(j) for j in store.list_dlq().items} == {DeadJob}


def test_claims_and_starts_come_back_as_records_in_claim_order(store) -> None:
    seed_hot(store, 3, queue="claims")
    claimed = store.fetch("w-records", 3, ["claims"], start=1)
    assert all(isinstance(c, ClaimedJob) for c in claimed)
    assert [c.status for c in claimed] == ["processing", "fetched", "fetched"]
    assert claimed == sorted(claimed, key=ClaimedJob.sort_key)
    marked = store.mark_processing("w-records", [c.id for c in claimed[1:]])
    assert {type(m) for m in marked.values()} == {Started}
    assert {m.attempt_count for m in marked.values()} == {1}


def test_audit_rows_are_entries(store) -> None:
    dead = seed_dlq(store, 1)[0]
    store.resurrect(dead, actor=Actor("alice"))
    entry = store.list_audit(job_id=dead).items[0]
    assert isinstance(entry, AuditEntry) and (entry.actor, entry.action, entry.count) == (
        "alice",
        "resurrect",
        1,
    )
    assert isinstance(json.loads(entry.details or "{}"), dict)


def _record_classes() -> list[type]:
    from chokaq_ops import records

    return [
        c
        for c in vars(records).values()
        if isinstance(c, type) and issubclass(c, records.Record) and dataclasses.is_dataclass(c)
    ]


@pytest.mark.parametrize("cls", _record_classes(), ids=lambda c: c.__name__)
def test_from_row_builds_what_init_builds_without_calling_it(cls, monkeypatch) -> None:
    fields = dataclasses.fields(cls)
    full = {f.name: f"v-{i}" for i, f in enumerate(fields)}
    required = {f.name: f"r-{i}" for i, f in enumerate(fields) if f.default is dataclasses.MISSING}
    expected_full, expected_min = cls(**full), cls(**required)

    # The records' frozen __init__ stores field by field through object.__setattr__ (2.6 us for a claimed
    # job); from_row fills the slots itself, so a claim of 8 no longer pays it eight times.
    def no_init(self, *args, **kwargs):
        raise AssertionError("from_row called the dataclass __init__")

    monkeypatch.setattr(cls, "__init__", no_init)
    built, minimal = cls.from_row(full), cls.from_row(required)
    assert type(built) is cls and built == expected_full
    assert [getattr(built, f.name) for f in fields] == [f"v-{i}" for i in range(len(fields))]
    assert minimal == expected_min
    for f in fields:  # a column the row lacks takes the field's default
        if f.default is not dataclasses.MISSING:
            assert getattr(minimal, f.name) == f.default
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(built, fields[0].name, "changed")


def test_a_row_without_a_required_column_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match=r"ClaimedJob: row does not fit .*'due_at'"):
        ClaimedJob.from_row({"id": "a", "queue": "q", "type": "t", "status": "pending", "priority": 1})
    with pytest.raises(TypeError, match=r"unknown columns: \['surprise'\]"):
        Started.from_row({"id": "a", "attempt_count": 1, "surprise": 2})
