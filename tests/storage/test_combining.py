"""The Combiner (storage/combining.py): calls that arrive while the leaders are busy go out together,
each caller with its own result or the group's error. Pure threads, no database: the producer's use of it
is tested in test_enqueue_fetch.py."""

from __future__ import annotations

import threading
import time

import pytest

from chokaq_ops.storage.combining import Combiner


def _until(cond, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.001)


class Gate:
    """run_group that records each group and holds the first one until released."""

    def __init__(self, fail_on: object = None) -> None:
        self.groups: list[list[int]] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.fail_on = fail_on

    def __call__(self, items: list[int]) -> list[int]:
        self.groups.append(list(items))
        if len(self.groups) == 1:
            self.entered.set()
            assert self.release.wait(5)
        if self.fail_on in items:
            raise ValueError(f"group {items} failed")
        return [i * 10 for i in items]


def _start(comb: Combiner, items: list[int], out: dict) -> list[threading.Thread]:
    def call(i: int) -> None:
        try:
            out[i] = comb.submit(i)
        except BaseException as exc:  # the test inspects what each caller got
            out[i] = exc

    threads = [threading.Thread(target=call, args=(i,)) for i in items]
    for t in threads:
        t.start()
    return threads


def _held(gate: Gate, comb: Combiner, later: list[int]) -> dict:
    """Call 1, then `later` while 1's group is held in flight; release once all of them wait. What each
    caller got."""
    out: dict = {}
    threads = _start(comb, [1], out)
    assert gate.entered.wait(5)
    threads += _start(comb, later, out)
    _until(lambda: comb.waiting() == len(later))
    gate.release.set()
    for t in threads:
        t.join(5)
    return out


def test_a_lone_caller_runs_at_once_and_gets_its_result():
    gate = Gate()
    gate.release.set()
    comb = Combiner(gate, leaders=1, max_group=10)
    assert [comb.submit(i) for i in (1, 2, 3)] == [10, 20, 30]
    assert gate.groups == [[1], [2], [3]]


def test_callers_arriving_while_the_leader_runs_go_out_as_one_group_each_with_its_own_result():
    gate = Gate()
    comb = Combiner(gate, leaders=1, max_group=10)
    out = _held(gate, comb, [2, 3, 4, 5])
    assert out == {1: 10, 2: 20, 3: 30, 4: 40, 5: 50}
    assert gate.groups[0] == [1] and sorted(gate.groups[1]) == [2, 3, 4, 5] and len(gate.groups) == 2
    assert comb.waiting() == 0


def test_groups_are_at_most_max_group_and_leadership_passes_on():
    gate = Gate()
    comb = Combiner(gate, leaders=1, max_group=2)
    out = _held(gate, comb, [2, 3, 4, 5, 6])
    assert out == {i: i * 10 for i in range(1, 7)}
    assert [len(g) for g in gate.groups] == [1, 2, 2, 1]


def test_every_caller_of_a_failed_group_gets_its_error_and_later_calls_still_run():
    gate = Gate(fail_on=3)
    comb = Combiner(gate, leaders=1, max_group=10)
    out = _held(gate, comb, [2, 3])
    assert out[1] == 10
    assert isinstance(out[2], ValueError) and out[2] is out[3]
    # The failed group's leader gave its place back: a next call leads at once.
    assert comb.submit(7) == 70


def test_several_leaders_run_at_once_before_anyone_waits():
    started = threading.Barrier(3, timeout=5)

    def run(items: list[int]) -> list[int]:
        started.wait()  # three single calls in flight together, or this times out
        return items

    comb = Combiner(run, leaders=3, max_group=10)
    out: dict = {}
    for t in _start(comb, [1, 2, 3], out):
        t.join(5)
    assert out == {1: 1, 2: 2, 3: 3}


def test_a_group_answering_with_the_wrong_number_of_results_fails_its_callers():
    comb = Combiner(lambda items: [], leaders=1, max_group=10)
    with pytest.raises(RuntimeError, match="returned 0 results"):
        comb.submit(1)


def test_leaders_and_group_size_must_be_positive():
    with pytest.raises(ValueError):
        Combiner(lambda items: items, leaders=0, max_group=1)


def test_a_caller_interrupted_while_it_waits_withdraws_and_the_others_go_on():
    """Ctrl-C in the main thread while its enqueue waits for a leader: that call raises and its item
    never runs; the call queued behind it is handed the lead and gets its result."""
    import signal

    gate = Gate()
    comb = Combiner(gate, leaders=1, max_group=10)
    out: dict = {}
    threads = _start(comb, [1], out)
    assert gate.entered.wait(5)

    def interrupt_main_when_both_wait() -> None:
        _until(lambda: comb.waiting() == 1)
        threads.extend(_start(comb, [3], out))
        _until(lambda: comb.waiting() == 2)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    helper = threading.Thread(target=interrupt_main_when_both_wait)
    helper.start()
    with pytest.raises(KeyboardInterrupt):
        comb.submit(2)  # waits behind 1, then the interrupt
    helper.join(5)
    assert comb.waiting() == 1  # only 3 waits now
    gate.release.set()
    for t in threads:
        t.join(5)
    assert out == {1: 10, 3: 30}
    assert gate.groups == [[1], [3]]


def test_a_group_stops_before_its_weight_passes_the_limit_but_a_heavy_call_goes_alone():
    gate = Gate()
    comb = Combiner(gate, leaders=1, max_group=10, weight=lambda i: i, max_weight=5)
    out: dict = {}
    threads = _start(comb, [1], out)
    assert gate.entered.wait(5)
    for n, item in enumerate([2, 3, 4, 1, 9], start=1):  # one by one: the waiting order is known
        threads += _start(comb, [item * 100 if item == 9 else item], out)
        _until(lambda n=n: comb.waiting() == n)
    gate.release.set()
    for t in threads:
        t.join(5)
    assert gate.groups == [[1], [2, 3], [4, 1], [900]]
    assert out[900] == 9000
