"""Reads (docs/api.md listings, reference §11.26, 28-29) over one dataset per dialect built once: filters
(each field), sorts (each key, both directions), paging totals, literal `%`/`_`, injection-looking input,
get_job, preview, summary, top errors, stats and queue lag."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from storage_factories import OPS, age, snapshot, sql

from chokaq_ops import errors
from chokaq_ops.models import ArchiveFilter, DlqFilter, FailureReason, HotFilter, NewJob, Status
from chokaq_ops.storage import Dead, Store
from chokaq_ops.storage.read_ops import ARCHIVE_SORTS, DLQ_SORTS, HOT_SORTS

H, D = 3600.0, 86400.0


def _dead(
    store: Store, job_id: str, queue: str, type_: str, reason: FailureReason, error: str, **kw: Any
) -> None:
    fingerprint = kw.pop("fingerprint", None)
    store.enqueue([NewJob(type=type_, id=job_id, queue=queue, **kw)])
    assert [r["id"] for r in store.fetch("wd", 1, [queue])] == [job_id]
    store.mark_processing("wd", [job_id])
    store.move_to_dlq("wd", [Dead(job_id, reason, error, fingerprint, 1.0)])


def _archived(store: Store, job_id: str, queue: str, type_: str, ms: float, **kw: Any) -> None:
    store.enqueue([NewJob(type=type_, id=job_id, queue=queue, **kw)])
    assert [r["id"] for r in store.fetch("wa", 1, [queue])] == [job_id]
    store.mark_processing("wa", [job_id])
    store.archive_succeeded("wa", [(job_id, ms)])


@pytest.fixture(scope="module")
def rs(module_store: Store) -> Store:
    """The shared dataset (read-only for every test of this module)."""
    s = module_store
    # Archive: alpha aa0-3, beta ab0-1; finished and created times in different orders.
    for i, (typ, ms) in enumerate([("t.a", 40.0), ("t.b", 10.0), ("t.a", 30.0), ("t.b", 20.0)]):
        _archived(s, f"aa{i}", "alpha", typ, ms, tags="red,blue" if i == 0 else "green")
    _archived(s, "ab0", "beta", "t.c", 5.0)
    _archived(s, "ab1", "beta", "t.c", 15.0, tags="a_b")
    _archived(s, "ab2", "beta", "t.c", 16.0, tags="axb")
    for job, fin, created in [
        ("aa0", 3 * D, 4 * D),
        ("aa1", 2 * D, 5 * D),
        ("aa2", D, 6 * D),
        ("aa3", H, 7 * D),
    ]:
        age(s, "jobs_archive", [job], fin, "finished_at")
        age(s, "jobs_archive", [job], created, "created_at")
    sql(s, "UPDATE jobs_archive SET attempt_count = 3 WHERE id = 'aa1'")

    # DLQ: alpha da0-2, beta db0-1, literal rows in litd.
    _dead(
        s,
        "da0",
        "alpha",
        "t.a",
        FailureReason.Fatal,
        "ValueError: bad input 1",
        fingerprint="f1",
        tags="red,blue",
    )
    _dead(
        s,
        "da1",
        "alpha",
        "t.b",
        FailureReason.Fatal,
        "ValueError: bad input 2",
        fingerprint="f1",
        tags="blue",
    )
    _dead(s, "da2", "alpha", "t.a", FailureReason.Timeout, "TimeoutError: slow", fingerprint="f2")
    _dead(
        s, "db0", "beta", "t.c", FailureReason.Zombie, "Zombie detected: heartbeat expired", fingerprint="f4"
    )
    _dead(
        s,
        "db1",
        "beta",
        "t.c",
        FailureReason.MaxRetriesExceeded,
        "ConnectionError: refused",
        fingerprint="f3",
    )
    _dead(s, "dl1", "litd", "x", FailureReason.Rejected, "50%_off", tags="a_b")
    _dead(s, "dl2", "litd", "x", FailureReason.Rejected, "50xxoff", tags="axb")
    times = [
        ("da0", 3 * D, D),
        ("da1", 2 * D, 2 * D),
        ("da2", D, 3 * D),
        ("db0", 12 * H, 4 * D),
        ("db1", H, 5 * D),
    ]
    for job, failed, created in times:
        age(s, "jobs_dlq", [job], failed, "failed_at")
        age(s, "jobs_dlq", [job], created, "created_at")
    sql(s, "UPDATE jobs_dlq SET attempt_count = 3 WHERE id = 'db1'")

    # Hot: alpha pending ha0-3 (priorities, types, tags), beta fetched/processing, literal rows in lit.
    s.enqueue(
        [
            NewJob(type="t.a" if i % 2 else "t.b", id=f"ha{i}", queue="alpha", priority=i, tags=tag)
            for i, tag in enumerate(["red,blue", "blue", "green", None])
        ]
    )
    for i, back in enumerate([40, 10, 30, 20]):
        age(s, "jobs_hot", [f"ha{i}"], back * 60, "created_at", "due_at")
    s.enqueue([NewJob(type="t.c", id=f"hb{i}", queue="beta") for i in range(3)])
    s.fetch("wb", 3, ["beta"])
    s.mark_processing("wb", ["hb0"])
    s.enqueue(
        [
            NewJob(type="pct%sign", id="lit1", queue="lit", tags="a_b"),
            NewJob(type="pctxsign", id="lit2", queue="lit", tags="axb"),
            NewJob(type="under_score", id="lit3", queue="lit"),
            NewJob(type="underxscore", id="lit4", queue="lit"),
        ]
    )
    return s


def ids(page) -> list[str]:
    return [r["id"] for r in page.items]


# ------------------------------------------------------------------------------------ get_job


def test_get_job_finds_a_job_in_each_table_with_its_location(rs):
    assert (rs.get_job("ha1")["location"], rs.get_job("ha1")["status"]) == ("hot", "pending")
    assert rs.get_job("hb0")["status"] == "processing" and rs.get_job("hb1")["status"] == "fetched"
    arch = rs.get_job("aa1")
    assert (arch["location"], arch["status"], arch["duration_ms"], arch["attempt_count"]) == (
        "archive",
        "succeeded",
        10.0,
        3,
    )
    dlq = rs.get_job("da2")
    assert (dlq["location"], dlq["status"], dlq["failure_reason"], dlq["error_details"]) == (
        "dlq",
        "dead",
        "Timeout",
        "TimeoutError: slow",
    )
    assert dlq["failed_at"].tzinfo is not None and dlq["created_at"].tzinfo is not None
    with pytest.raises(errors.JobNotFound):
        rs.get_job("nowhere")


# ------------------------------------------------------------------------------------ filters


def test_list_hot_filters_each_field(rs):
    assert sorted(ids(rs.list_hot(HotFilter(queue="alpha")))) == ["ha0", "ha1", "ha2", "ha3"]
    assert sorted(ids(rs.list_hot(HotFilter(status=Status.fetched)))) == ["hb1", "hb2"]
    assert ids(rs.list_hot(HotFilter(status=Status.processing))) == ["hb0"]
    assert sorted(ids(rs.list_hot(HotFilter(type="t.a")))) == ["ha1", "ha3"]
    assert sorted(ids(rs.list_hot(HotFilter(tag="blue")))) == ["ha0", "ha1"]
    assert ids(rs.list_hot(HotFilter(tag="red"))) == ["ha0"]
    assert sorted(ids(rs.list_hot(HotFilter(search="HB")))) == ["hb0", "hb1", "hb2"]  # case-insensitive id
    assert ids(rs.list_hot(HotFilter(queue="alpha", type="t.b", tag="green"))) == ["ha2"]
    assert rs.list_hot(HotFilter(queue="nope")).total == 0


def test_list_archive_filters_each_field(rs):
    now = rs.now()
    assert sorted(ids(rs.list_archive(ArchiveFilter(queue="beta")))) == ["ab0", "ab1", "ab2"]
    assert sorted(ids(rs.list_archive(ArchiveFilter(type="t.b")))) == ["aa1", "aa3"]
    assert ids(rs.list_archive(ArchiveFilter(tag="red"))) == ["aa0"]
    assert sorted(ids(rs.list_archive(ArchiveFilter(search="aa")))) == ["aa0", "aa1", "aa2", "aa3"]
    window = ArchiveFilter(finished_from=now - timedelta(days=2.5), finished_to=now - timedelta(hours=12))
    assert sorted(ids(rs.list_archive(window))) == ["aa1", "aa2"]
    created = ArchiveFilter(created_from=now - timedelta(days=5.5), created_to=now - timedelta(days=4.5))
    assert ids(rs.list_archive(created)) == ["aa1"]


def test_list_dlq_filters_each_field(rs):
    now = rs.now()
    cases = {
        DlqFilter(queue="alpha"): ["da0", "da1", "da2"],
        DlqFilter(type="t.b"): ["da1"],
        DlqFilter(reason=FailureReason.Fatal): ["da0", "da1"],
        DlqFilter(queue="alpha", reason=FailureReason.Fatal): ["da0", "da1"],
        DlqFilter(fingerprint="f1"): ["da0", "da1"],
        DlqFilter(tag="blue"): ["da0", "da1"],
        DlqFilter(search="REFUSED"): ["db1"],  # error details, case-insensitive
        DlqFilter(search="db"): ["db0", "db1"],
        DlqFilter(failed_from=now - timedelta(days=2.5), failed_to=now - timedelta(hours=6)): [
            "da1",
            "da2",
            "db0",
        ],
        DlqFilter(created_from=now - timedelta(days=3.5), created_to=now - timedelta(days=1.5)): [
            "da1",
            "da2",
        ],
        DlqFilter(queue="beta", reason=FailureReason.Fatal): [],
    }
    for flt, expected in cases.items():
        page = rs.list_dlq(flt)
        assert (sorted(ids(page)), page.total) == (expected, len(expected)), flt
        assert rs.count_dlq(flt) == len(expected), flt


def test_percent_and_underscore_match_themselves(rs):
    assert ids(rs.list_hot(HotFilter(search="t%s"))) == ["lit1"]
    assert ids(rs.list_hot(HotFilter(search="r_s"))) == ["lit3"]
    assert ids(rs.list_hot(HotFilter(tag="a_b"))) == ["lit1"]
    assert ids(rs.list_dlq(DlqFilter(search="0%_o"))) == ["dl1"]
    assert ids(rs.list_dlq(DlqFilter(tag="a_b"))) == ["dl1"]
    assert ids(rs.list_archive(ArchiveFilter(tag="a_b"))) == ["ab1"]
    assert ids(rs.list_hot(HotFilter(search="%"))) == ["lit1"]
    assert sorted(ids(rs.list_hot(HotFilter(search="_")))) == ["lit1", "lit3"]  # tag a_b, type under_score
    assert rs.list_dlq(DlqFilter(search="\\")).total == 0


INJECTIONS = [
    "x' OR '1'='1",
    "'; DELETE FROM jobs_dlq; --",
    "%' OR 1=1 --",
    'alpha"; DROP TABLE jobs_hot; --',
]


def test_injection_looking_filters_return_nothing_and_change_nothing(rs):
    before = snapshot(rs)
    for bad in INJECTIONS:
        assert rs.list_hot(HotFilter(queue=bad, type=bad)).total == 0
        assert rs.list_hot(HotFilter(search=bad)).total == 0
        assert rs.list_archive(ArchiveFilter(queue=bad)).total == 0
        assert rs.list_archive(ArchiveFilter(search=bad, tag=bad.replace(",", ""))).total == 0
        assert rs.list_dlq(DlqFilter(queue=bad)).total == 0
        assert rs.list_dlq(DlqFilter(type=bad, search=bad, fingerprint=bad[:60])).total == 0
        assert rs.preview_dlq(flt=DlqFilter(search=bad))["matched"] == 0
        with pytest.raises(errors.ValidationError) as exc:
            rs.list_dlq(sort=f"failed_at{bad}")
        assert exc.value.field == "sort"
        with pytest.raises(errors.JobNotFound):
            rs.get_job(bad)
    assert rs.purge_dlq(flt=DlqFilter(queue=INJECTIONS[0]), actor=OPS).count == 0
    assert rs.resurrect_many(flt=DlqFilter(search=INJECTIONS[1]), actor=OPS).count == 0
    after = snapshot(rs)
    assert after == before


# ------------------------------------------------------------------------------------ sorts and paging

_HOT_KEYS = {
    "created_at": ("created_at", "id"),
    "priority": ("priority", "due_at", "id"),
    "due_at": ("due_at", "id"),
    "id": ("id",),
    "queue": ("queue", "created_at", "id"),
    "type": ("type", "created_at", "id"),
    "status": ("status", "created_at", "id"),
}
_ARCHIVE_KEYS = {
    "finished_at": ("finished_at", "id"),
    "created_at": ("created_at", "id"),
    "duration_ms": ("duration_ms", "id"),
    "queue": ("queue", "finished_at", "id"),
    "type": ("type", "finished_at", "id"),
    "attempt_count": ("attempt_count", "finished_at", "id"),
    "id": ("id",),
}
_DLQ_KEYS = {
    "failed_at": ("failed_at", "id"),
    "created_at": ("created_at", "id"),
    "queue": ("queue", "failed_at", "id"),
    "type": ("type", "failed_at", "id"),
    "reason": ("failure_reason_n", "failed_at", "id"),
    "attempt_count": ("attempt_count", "failed_at", "id"),
    "id": ("id",),
}
_STATUS_N = {s.name: int(s) for s in Status}


def _check_sorts(rs: Store, lister, flt, keys: dict[str, tuple[str, ...]], allowed) -> None:
    assert set(keys) == set(allowed)  # every whitelisted key is tested
    rows = [r.to_dict() for r in lister(flt, page_size=1000).items]
    for r in rows:
        r["failure_reason_n"] = int(FailureReason[r["failure_reason"]]) if r.get("failure_reason") else None
        if r["location"] == "hot":
            r["status"] = _STATUS_N[r["status"]]
    assert len(rows) >= 4
    for key, cols in keys.items():
        expected = [r["id"] for r in sorted(rows, key=lambda r: tuple(r[c] for c in cols))]
        assert ids(lister(flt, sort=key, descending=False, page_size=1000)) == expected, key
        assert ids(lister(flt, sort=key, descending=True, page_size=1000)) == expected[::-1], key
        # Paged walk in the same order: same rows, same total on every page, nothing twice.
        walked, page = [], 1
        while True:
            p = lister(flt, sort=key, descending=False, page=page, page_size=3)
            assert p.total == len(rows) and (p.page, p.page_size) == (page, 3)
            if not p.items:
                break
            walked += ids(p)
            page += 1
        assert walked == expected, key


def test_list_hot_sorts_by_every_key_both_ways_and_pages(rs):
    _check_sorts(rs, rs.list_hot, HotFilter(), _HOT_KEYS, HOT_SORTS)


def test_list_archive_sorts_by_every_key_both_ways_and_pages(rs):
    _check_sorts(rs, rs.list_archive, ArchiveFilter(), _ARCHIVE_KEYS, ARCHIVE_SORTS)


def test_list_dlq_sorts_by_every_key_both_ways_and_pages(rs):
    _check_sorts(rs, rs.list_dlq, DlqFilter(), _DLQ_KEYS, DLQ_SORTS)
    # A filtered listing (no trigger-kept count) pages with the same totals.
    _check_sorts(rs, rs.list_dlq, DlqFilter(search="d"), _DLQ_KEYS, DLQ_SORTS)


def test_default_sorts_are_newest_first_and_a_page_past_the_end_is_empty(rs):
    assert ids(rs.list_dlq(DlqFilter(queue="alpha"))) == ["da2", "da1", "da0"]
    assert ids(rs.list_archive(ArchiveFilter(queue="alpha")))[0] == "aa3"
    assert ids(rs.list_hot(HotFilter(queue="alpha"))) == ["ha1", "ha3", "ha2", "ha0"]
    p = rs.list_dlq(DlqFilter(queue="alpha"), page=9, page_size=2)
    assert (p.items, p.total) == ([], 3)


# ------------------------------------------------------------------------------------ preview, summary


def test_preview_by_filter_and_by_ids_counts_samples_newest_first_and_changes_nothing(rs):
    before = snapshot(rs)
    p = rs.preview_dlq(flt=DlqFilter(queue="alpha"), sample=2)
    assert (p["matched"], p["sample_ids"]) == (3, ["da2", "da1"])
    assert p["by_reason"] == {"Fatal": 2, "Timeout": 1}
    assert p["by_queue"] == {"alpha": 3} and p["by_type"] == {"t.a": 2, "t.b": 1}
    p = rs.preview_dlq(ids=["db1", "da0", "ha0", "ghost", "da0"])
    assert (p["matched"], p["sample_ids"]) == (2, ["db1", "da0"])
    assert p["by_reason"] == {"Fatal": 1, "MaxRetriesExceeded": 1} and p["by_queue"] == {
        "alpha": 1,
        "beta": 1,
    }
    with pytest.raises(errors.ValidationError):
        rs.preview_dlq()
    assert snapshot(rs) == before


def test_dlq_summary_counts_by_reason_queue_and_type_with_first_and_last_failure(rs):
    s = rs.dlq_summary()
    assert s["total"] == 7
    by_reason = {e["value"]: e["count"] for e in s["by_reason"]}
    assert by_reason == {"Fatal": 2, "Timeout": 1, "Zombie": 1, "MaxRetriesExceeded": 1, "Rejected": 2}
    assert [e["count"] for e in s["by_queue"]] == [3, 2, 2]  # largest first
    alpha = next(e for e in s["by_queue"] if e["value"] == "alpha")
    assert alpha["first_failed_at"] < alpha["last_failed_at"]
    assert rs.get_job("da0")["failed_at"] == alpha["first_failed_at"]
    assert rs.dlq_summary(DlqFilter(queue="beta"))["total"] == 2


def test_top_errors_groups_by_fingerprint_largest_first_with_an_example(rs):
    top = rs.top_errors(DlqFilter(queue="alpha"))
    assert [(t["fingerprint"], t["count"], t["failure_reason"]) for t in top] == [
        ("f1", 2, "Fatal"),
        ("f2", 1, "Timeout"),
    ]
    f1 = top[0]
    assert f1["example_id"] == "da1" and f1["exception_type"] == "ValueError"  # newest of the group
    assert f1["first_seen"] < f1["last_seen"] and f1["example_queue"] == "alpha"
    assert len(rs.top_errors(limit=2)) == 2
    assert [t["count"] for t in rs.top_errors()] == sorted(
        (t["count"] for t in rs.top_errors()), reverse=True
    )


def test_stats_and_queue_stats_with_lag(rs):
    s = rs.stats()
    assert (s["hot"], s["archive"], s["dlq"]) == (11, 7, 7)
    assert (s["pending"], s["fetched"], s["processing"]) == (8, 2, 1)
    assert (s["enqueued_total"], s["succeeded_total"], s["failed_total"]) == (25, 7, 7)
    assert s["processed_5m"] == 14 and s["failed_5m"] == 7 and s["failure_rate_5m"] == pytest.approx(50.0)
    by_name = {q["name"]: q for q in rs.queue_stats()}
    alpha = by_name["alpha"]
    assert (alpha["pending"], alpha["due_pending"], alpha["enqueued_total"], alpha["failed_total"]) == (
        4,
        4,
        11,
        3,
    )
    # ha0 has waited 40 minutes on the database clock; the average over 40, 10, 30, 20 is 25.
    assert 40 * 60 - 5 <= alpha["max_lag_seconds"] <= 40 * 60 + 60
    assert 25 * 60 - 5 <= alpha["avg_lag_seconds"] <= 25 * 60 + 60
    beta = by_name["beta"]
    assert (beta["fetched"], beta["processing"], beta["due_pending"], beta["max_lag_seconds"]) == (
        2,
        1,
        0,
        0.0,
    )
    assert rs.queue_stats("beta")[0]["name"] == "beta"
    with pytest.raises(errors.JobNotFound):
        rs.queue_stats("no-such-queue")


def test_jobs_without_a_duration_sort_the_same_way_on_both_databases(store):
    for job_id, ms in (("slow", 5.0), ("unknown", None), ("fast", 1.0)):
        _archived(store, job_id, "q", "t", ms)  # type: ignore[arg-type]
    # Unknown durations last ascending, first descending (PostgreSQL's default; SQLite's is the reverse).
    assert ids(store.list_archive(sort="duration_ms", descending=False)) == ["fast", "slow", "unknown"]
    assert ids(store.list_archive(sort="duration_ms", descending=True)) == ["unknown", "slow", "fast"]
