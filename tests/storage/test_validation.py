"""Bad input (docs/storage-contract.md limits): a ValidationError naming the field, raised
before anything is written, so every table is exactly as it was."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from storage_factories import OPS, dead, enqueue, fetched, processing, snapshot

from chokaq_ops import errors
from chokaq_ops.models import Actor, ArchiveFilter, DlqFilter, FailureReason, HotFilter, NewJob
from chokaq_ops.storage import Dead, admin_ops

BIG = "x" * 1_000_001
BIG_UTF8 = "é" * 500_001  # 500,001 characters, 1,000,002 bytes: the limit counts bytes


@pytest.fixture
def seeded(store):
    """A few rows in every table so that a stray write anywhere would show in the snapshot."""
    enqueue(store, 2, prefix="hot")
    fetched(store, "w", 1, prefix="fet", queue="qf")
    dead(store, 3, prefix="dead", queue="qd")
    store.create_token("t", "reader", actor=OPS)
    return store


def expect_invalid(store, field: str, call: Callable[[], Any]) -> None:
    before = snapshot(store)
    with pytest.raises(errors.ValidationError) as exc:
        call()
    assert exc.value.field == field, (field, exc.value.field, str(exc.value))
    assert str(exc.value)
    assert snapshot(store) == before


def test_enqueue_envelope_limits(seeded):
    s = seeded
    good = NewJob(type="t", id="good-one")
    cases: list[tuple[str, NewJob]] = [
        ("id", NewJob(type="t", id="i" * 51)),
        ("id", NewJob(type="t", id="   ")),
        ("queue", NewJob(type="t", queue="q" * 256)),
        ("queue", NewJob(type="t", queue="")),
        ("type", NewJob(type="t" * 256)),
        ("type", NewJob(type=" ")),
        ("tags", NewJob(type="t", tags="a" * 1001)),
        ("payload", NewJob(type="t", payload=BIG)),
        ("payload", NewJob(type="t", payload=BIG_UTF8)),
        ("idempotency_key", NewJob(type="t", idempotency_key="k" * 256)),
        ("created_by", NewJob(type="t", created_by="c" * 101)),
        ("priority", NewJob(type="t", priority=-1)),
        ("priority", NewJob(type="t", priority=1_000_001)),
        ("priority", NewJob(type="t", priority="5")),  # type: ignore[arg-type]
        ("delay_seconds", NewJob(type="t", delay_seconds=-1)),
        ("delay_seconds", NewJob(type="t", delay_seconds=5, scheduled_at=datetime(2030, 1, 1).astimezone())),
        ("scheduled_at", NewJob(type="t", scheduled_at=datetime(2030, 1, 1))),  # no time zone
    ]
    for field, bad in cases:
        # One bad item rejects the whole batch: the good one beside it is not inserted either.
        expect_invalid(s, field, lambda bad=bad: s.enqueue([good, bad]))
    expect_invalid(s, "id", lambda: s.enqueue([NewJob(type="t", id="same"), NewJob(type="t", id="same")]))
    # At the limit is fine.
    [ok] = s.enqueue(
        [NewJob(type="t" * 255, id="i" * 50, queue="q" * 255, tags="a" * 1000, payload="x" * 1_000_000)]
    )
    assert ok.status == "new"


def test_operator_edits_reject_bad_payload_tags_and_priority(seeded):
    s = seeded
    hot, dlq = "hot00000", "dead00000"
    for target, edit in ((hot, s.edit_pending), (dlq, s.edit_dlq)):
        expect_invalid(s, "payload", lambda e=edit, t=target: e(t, actor=OPS, payload="{not json"))
        expect_invalid(s, "payload", lambda e=edit, t=target: e(t, actor=OPS, payload=BIG))
        expect_invalid(s, "payload", lambda e=edit, t=target: e(t, actor=OPS))  # nothing to change
        expect_invalid(s, "tags", lambda e=edit, t=target: e(t, actor=OPS, tags="a" * 1001))
        expect_invalid(s, "id", lambda e=edit: e("i" * 51, actor=OPS, payload={}))
        expect_invalid(s, "actor", lambda e=edit, t=target: e(t, actor=Actor("a" * 101), payload={}))
        expect_invalid(s, "plan_id", lambda e=edit, t=target: e(t, actor=Actor("a", "p" * 51), payload={}))
    expect_invalid(s, "priority", lambda: s.edit_pending(hot, actor=OPS, priority=2_000_000))
    expect_invalid(s, "payload", lambda: s.resurrect(dlq, actor=OPS, payload="[1,"))
    expect_invalid(s, "priority", lambda: s.resurrect(dlq, actor=OPS, priority=-5))
    expect_invalid(s, "tags", lambda: s.resurrect(dlq, actor=OPS, tags="t" * 1001))


def test_bulk_operations_reject_bad_ids_and_arguments(seeded):
    s = seeded
    dlq = ["dead00000", "dead00001"]
    expect_invalid(s, "ids[1]", lambda: s.cancel_many(["hot00000", "x" * 51], actor=OPS))
    expect_invalid(s, "ids", lambda: s.cancel_many([], actor=OPS))
    expect_invalid(s, "ids", lambda: s.cancel_many("hot00000", actor=OPS))  # type: ignore[arg-type]
    expect_invalid(s, "ids", lambda: s.cancel_many([f"id{i}" for i in range(1001)], actor=OPS))
    expect_invalid(s, "ids[2]", lambda: s.purge_dlq(ids=[*dlq, ""], actor=OPS))
    expect_invalid(s, "ids[0]", lambda: s.resurrect_many(ids=["y" * 51, *dlq], actor=OPS))
    expect_invalid(s, "ids", lambda: s.purge_dlq(actor=OPS))
    expect_invalid(s, "ids", lambda: s.resurrect_many(ids=dlq, flt=DlqFilter(), actor=OPS))
    expect_invalid(s, "max_jobs", lambda: s.purge_dlq(flt=DlqFilter(), max_jobs=0, actor=OPS))
    expect_invalid(s, "older_than", lambda: s.purge_archive(datetime(2020, 1, 1), actor=OPS))
    expect_invalid(s, "actor", lambda: s.purge_dlq(ids=dlq, actor=Actor("")))


def test_a_bad_edit_late_in_a_bulk_resurrect_rejects_it_before_the_first_chunk(seeded, monkeypatch):
    s = seeded
    monkeypatch.setattr(admin_ops, "RESURRECT_CHUNK", 2)
    ids = ["dead00000", "dead00001", "dead00002"]
    expect_invalid(
        s, "payload", lambda: s.resurrect_many(ids=ids, edits={ids[2]: {"payload": "{"}}, actor=OPS)
    )
    expect_invalid(
        s, "priority", lambda: s.resurrect_many(ids=ids, edits={ids[2]: {"priority": -1}}, actor=OPS)
    )


def test_filters_sorts_and_pages_are_checked(seeded):
    s = seeded
    for field, flt in [
        ("queue", DlqFilter(queue="q" * 256)),
        ("type", DlqFilter(type="t" * 256)),
        ("tag", DlqFilter(tag="a,b")),
        ("search", DlqFilter(search="s" * 1001)),
        ("fingerprint", DlqFilter(fingerprint="f" * 65)),
    ]:
        expect_invalid(s, field, lambda flt=flt: s.list_dlq(flt))
        expect_invalid(s, field, lambda flt=flt: s.purge_dlq(flt=flt, actor=OPS))
        expect_invalid(s, field, lambda flt=flt: s.resurrect_many(flt=flt, actor=OPS))
        expect_invalid(s, field, lambda flt=flt: s.preview_dlq(flt=flt))
    expect_invalid(s, "queue", lambda: s.list_hot(HotFilter(queue="q" * 256)))
    expect_invalid(s, "tag", lambda: s.list_archive(ArchiveFilter(tag="x,y")))
    for lister in (s.list_hot, s.list_archive, s.list_dlq):
        expect_invalid(s, "sort", lambda lister=lister: lister(sort="payload"))
        expect_invalid(s, "sort", lambda lister=lister: lister(sort="id; DROP TABLE jobs_hot"))
        expect_invalid(s, "page", lambda lister=lister: lister(page=0))
        expect_invalid(s, "page_size", lambda lister=lister: lister(page_size=0))
        expect_invalid(s, "page_size", lambda lister=lister: lister(page_size=1001))
        expect_invalid(s, "page_size", lambda lister=lister: lister(page_size="10"))
    expect_invalid(s, "page", lambda: s.list_audit(page=-1))


def test_failure_reasons_are_parsed_strictly_and_unknown_ones_change_nothing(seeded):
    assert FailureReason.parse("zombie") is FailureReason.Zombie
    assert FailureReason.parse(" MaxRetriesExceeded ") is FailureReason.MaxRetriesExceeded
    assert (
        FailureReason.parse("7") is FailureReason.Timeout
        and FailureReason.parse(10) is FailureReason.RetryLifetimeExpired
    )
    for bad in ("Zombi", "", "11", 42, "-1", "Fatal,Zombie"):
        with pytest.raises(ValueError):
            FailureReason.parse(bad)
    s = seeded
    [run] = processing(s, "w2", 1, prefix="run", queue="qr")
    expect_invalid(s, "reason", lambda: s.move_to_dlq("w2", [Dead(run, 42, "e")]))  # type: ignore[arg-type]
    expect_invalid(s, "reason", lambda: s.move_to_dlq("w2", [Dead(run, "Nope", "e")]))  # type: ignore[arg-type]
    expect_invalid(s, "reason", lambda: s.list_dlq(DlqFilter(reason=99)))  # type: ignore[arg-type]
    expect_invalid(s, "reason", lambda: s.purge_dlq(flt=DlqFilter(reason=-3), actor=OPS))  # type: ignore[arg-type]


def test_queue_controls_are_checked(seeded):
    s = seeded
    expect_invalid(s, "name", lambda: s.set_queue("q" * 256, actor=OPS, paused=True))
    expect_invalid(
        s, "zombie_timeout_seconds", lambda: s.set_queue("qd", actor=OPS, zombie_timeout_seconds=0)
    )
    expect_invalid(
        s,
        "zombie_timeout_seconds",
        lambda: s.set_queue("qd", actor=OPS, zombie_timeout_seconds=30, min_zombie_timeout=36),
    )
    expect_invalid(s, "max_workers", lambda: s.set_queue("qd", actor=OPS, max_workers=0))
    expect_invalid(s, "max_workers", lambda: s.set_queue("qd", actor=OPS, max_workers=10_001))
    expect_invalid(s, "paused", lambda: s.set_queue("qd", actor=OPS, paused="yes"))  # type: ignore[arg-type]
    expect_invalid(s, "paused", lambda: s.set_queue("qd", actor=OPS))  # nothing to change


@pytest.mark.parametrize("field", ["payload", "queue", "type", "tags"])
def test_nul_characters_are_refused_on_both_databases(store, field):
    from chokaq_ops.errors import ValidationError
    from chokaq_ops.models import NewJob

    values = {"type": "t", "payload": "{}", "queue": "q", "tags": None}
    values[field] = "a\x00b" if field != "payload" else '{"a": "x\x00y"}'
    with pytest.raises(ValidationError) as err:
        store.enqueue([NewJob(**values)])
    assert err.value.field == field
    assert store.stats()["hot"] == 0
