"""The circuit breaker's shared state (docs/circuits.md): its policy in SQL, on both dialects."""

from __future__ import annotations

import time

import pytest

from chokaq_ops import errors
from chokaq_ops.models import Actor
from chokaq_ops.storage import Store
from tests.storage.storage_factories import audit
from tests.support import dbprobe


def fail(store: Store, type_: str, n: int, *, threshold: int = 3, window: float = 60.0, brk: float = 0.4):
    item = {"type": type_, "n": n, "threshold": threshold, "window_s": window, "break_s": brk, "half_open": 1}
    (row,) = store.circuit_failures([item])
    return row


def test_threshold_opens_then_one_probe_and_its_success_closes(store: Store) -> None:
    assert fail(store, "pay", 2)["state"] == "closed"
    row = fail(store, "pay", 1)
    assert (row["prev_state"], row["state"], row["failures"], row["transitions"]) == ("closed", "open", 3, 1)
    assert 0 < row["open_for_s"] <= 0.4
    assert [c["type"] for c in store.circuit_states()] == ["pay"]
    probe = [{"type": "pay", "probe_timeout_s": 30}]
    assert store.circuit_probe(probe) == set()  # still within the break
    time.sleep(0.5)
    assert store.circuit_probe(probe) == {"pay"}
    assert store.circuit_probe(probe) == set()  # HalfOpenMaxCalls 1: one probe at a time
    (row,) = store.circuit_successes([{"type": "pay", "n": 1}])
    assert (row["prev_state"], row["state"], row["failures"], row["transitions"]) == (
        "half_open",
        "closed",
        0,
        3,
    )
    assert store.circuit_states() == []
    kinds = [e["data"]["state"] for e in dbprobe.events(store, "circuit")]
    assert kinds == ["open", "half_open", "closed"]


def test_a_failed_probe_reopens(store: Store) -> None:
    fail(store, "pay", 3)
    time.sleep(0.5)
    assert store.circuit_probe([{"type": "pay", "probe_timeout_s": 30}]) == {"pay"}
    row = fail(store, "pay", 1)
    assert (row["prev_state"], row["state"]) == ("half_open", "open")
    assert store.circuit_probe([{"type": "pay", "probe_timeout_s": 30}]) == set()


def test_failures_further_apart_than_the_window_do_not_add_up(store: Store) -> None:
    fail(store, "pay", 2, window=0.3)
    time.sleep(0.4)
    row = fail(store, "pay", 2, window=0.3)
    assert (row["state"], row["failures"]) == ("closed", 2)
    assert fail(store, "pay", 1, window=0.3)["state"] == "open"


def test_types_are_independent_and_successes_of_closed_circuits_change_nothing(store: Store) -> None:
    fail(store, "a", 3)
    assert fail(store, "b", 1)["state"] == "closed"
    assert {c["type"] for c in store.circuit_states()} == {"a"}
    (row,) = store.circuit_successes([{"type": "b", "n": 5}])
    assert (row["state"], row["failures"], row["successes"]) == ("closed", 1, 0)


def test_forced_open_lets_no_probe_through_until_closed_and_both_are_audited(store: Store) -> None:
    row = store.set_circuit("mail", "open", actor=Actor("ops"))
    assert (row["state"], row["forced"]) == ("open", True)
    fail(store, "mail", 10, brk=0.01)
    time.sleep(0.05)
    assert store.circuit_probe([{"type": "mail", "probe_timeout_s": 30}]) == set()
    row = store.set_circuit("mail", "closed", actor=Actor("ops"))
    assert (row["state"], row["forced"], row["failures"]) == ("closed", False, 0)
    rows = audit(store, "set_circuit")
    assert [(r["actor"], r["details"]["after"]["state"]) for r in rows] == [("ops", 1), ("ops", 0)]
    assert rows[0]["details"]["before"] is None and rows[1]["details"]["before"]["state"] == 1


def test_a_bad_state_is_refused_and_changes_nothing(store: Store) -> None:
    with pytest.raises(errors.ValidationError) as e:
        store.set_circuit("mail", "half_open", actor=Actor("ops"))
    assert e.value.field == "state"
    assert store.list_circuits() == [] and audit(store, "set_circuit") == []


def test_defer_gives_back_the_attempt_and_delays_the_job(store: Store) -> None:
    ids = dbprobe.processing(store, "w1", 3)
    assert sorted(store.defer("w1", ids[:2], 5.0)) == sorted(ids[:2])
    assert store.defer("w2", ids[2:], 5.0) == []  # fenced by the worker id
    for job_id in ids[:2]:
        job = store.get_job(job_id)
        assert (job["status"], job["attempt_count"], job["worker_id"]) == ("pending", 0, None)
    assert store.fetch("w3", 10, ["default"]) == []  # not due for 5 s
    (ev,) = dbprobe.events(store, "circuit")
    assert ev["data"]["deferred"] == 2 and ev["data"]["type"] == "t"
