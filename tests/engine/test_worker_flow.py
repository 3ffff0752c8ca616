"""Claiming and stopping: paused queues, max_workers, queue filters, graceful shutdown."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import replace

from worker_support import enqueue, fast_settings, hosted, settled, wait_for

from chokaq_ops import errors
from chokaq_ops.engine.execution import RETRY
from chokaq_ops.engine.handlers import Registry
from chokaq_ops.engine.worker import Worker
from chokaq_ops.models import Actor
from chokaq_ops.records import ClaimedJob, Started
from chokaq_ops.storage import Store

OPS = Actor("test-operator")


def _blocking_registry(gate: threading.Event, started: list[str] | None = None) -> Registry:
    reg = Registry()

    @reg.job("block")
    def block(payload, ctx):
        if started is not None:
            started.append(ctx.job_id)
        gate.wait(10)

    @reg.job("quick")
    def quick(payload, ctx):
        if started is not None:
            started.append(ctx.job_id)

    return reg


def test_paused_queue_releases_prefetched_jobs(store):
    gate = threading.Event()
    started: list[str] = []
    reg = _blocking_registry(gate, started)
    first = enqueue(store, "block", queue="q", priority=50)
    rest = [enqueue(store, "quick", queue="q") for _ in range(3)]
    with hosted(store, fast_settings(store), reg, concurrency=1) as host:
        wait_for(lambda: started == [first], what="the first job running")
        wait_for(lambda: all(store.get_job(j)["status"] == "fetched" for j in rest), what="prefetch")
        store.set_queue("q", actor=OPS, paused=True)
        wait_for(lambda: all(store.get_job(j)["status"] == "pending" for j in rest), what="release")
        for j in rest:
            row = store.get_job(j)
            assert row["worker_id"] is None and row["attempt_count"] == 0
        # The worker counts a release after its statement returns: a moment after the rows read pending.
        wait_for(lambda: host.worker.counts["released"] == 3, what="the releases counted")
        gate.set()  # the running job finishes although its queue is paused
        settled(store, first, "archive")
        time.sleep(0.2)
        assert started == [first]  # nothing new starts from a paused queue
        store.set_queue("q", actor=OPS, paused=False)
        for j in rest:
            settled(store, j, "archive")


def test_a_release_that_fails_is_tried_again(store, monkeypatch):
    """The worker releases a paused queue's buffered jobs; the first release fails (the connection died
    in it). The jobs are released at the next queue refresh, not left fetched until the rescue sweep's
    FetchedJobTimeout (a buffered job whose start may have committed, processing under this worker, was
    never returned at all and became a false zombie: tests/crash/test_faults.py found it)."""
    gate = threading.Event()
    started: list[str] = []
    reg = _blocking_registry(gate, started)
    first = enqueue(store, "block", queue="q", priority=50)
    rest = [enqueue(store, "quick", queue="q") for _ in range(3)]
    real = store.release
    calls: list[list[str]] = []

    def flaky_release(worker_id, job_ids):
        calls.append(list(job_ids))
        if len(calls) == 1:
            raise errors.TransientStorageError("postgresql: the connection was lost")
        return real(worker_id, job_ids)

    monkeypatch.setattr(store, "release", flaky_release)
    settings = fast_settings(store, recovery__fetched_job_timeout=600)
    with hosted(store, settings, reg, concurrency=1) as host:
        wait_for(lambda: started == [first], what="the first job running")
        wait_for(lambda: all(store.get_job(j)["status"] == "fetched" for j in rest), what="prefetch")
        store.set_queue("q", actor=OPS, paused=True)
        wait_for(
            lambda: all(store.get_job(j)["status"] == "pending" for j in rest), 5, "release, tried again"
        )
        assert len(calls) >= 2 and sorted(calls[1]) == sorted(calls[0]) == sorted(rest)
        wait_for(lambda: host.worker.counts["released"] == 3, what="the releases counted")
        gate.set()


def test_max_workers_caps_a_queue_across_the_worker(store):
    reg = Registry()
    lock = threading.Lock()
    live: Counter[str] = Counter()
    peak: Counter[str] = Counter()

    @reg.job("capped")
    def capped(payload, ctx):
        with lock:
            live[ctx.queue] += 1
            live["all"] += 1
            peak[ctx.queue] = max(peak[ctx.queue], live[ctx.queue])
            peak["all"] = max(peak["all"], live["all"])
        time.sleep(0.05)
        with lock:
            live[ctx.queue] -= 1
            live["all"] -= 1

    store.set_queue("narrow", actor=OPS, max_workers=2)
    ids = [enqueue(store, "capped", queue="narrow") for _ in range(10)]
    free = [enqueue(store, "capped", queue="wide") for _ in range(4)]
    with hosted(store, fast_settings(store), reg, concurrency=8):
        for j in ids + free:
            settled(store, j, "archive")
    assert peak["all"] >= 3  # the uncapped queue ran alongside
    # A capped job counts against the cap from its claim until its outcome is written, after its handler
    # returned: so never more than two of its handlers run at once. (Database timestamps cannot show it:
    # a claim's now() is its transaction's start, which may precede the finish it waited for.)
    assert 1 <= peak["narrow"] <= 2, peak


def test_queue_filter_claims_only_named_queues(store):
    reg = Registry()
    reg.job("t")(lambda p, ctx: None)
    mine = [enqueue(store, "t", queue="alpha") for _ in range(3)]
    other = enqueue(store, "t", queue="beta")
    with hosted(store, fast_settings(store), reg, queues=["alpha"]):
        for j in mine:
            settled(store, j, "archive")
        time.sleep(0.2)
        assert store.get_job(other)["status"] == "pending"


def test_shutdown_releases_prefetched_and_waits_for_running(store):
    gate = threading.Event()
    started: list[str] = []
    reg = _blocking_registry(gate, started)
    running = enqueue(store, "block", priority=50)
    waiting = [enqueue(store, "quick") for _ in range(4)]
    host_cm = hosted(store, fast_settings(store), reg, concurrency=1)
    host = host_cm.__enter__()
    wait_for(lambda: started == [running])
    wait_for(lambda: all(store.get_job(j)["status"] == "fetched" for j in waiting))
    threading.Timer(0.3, gate.set).start()  # finishes well inside the 3 s grace period
    t = time.monotonic()
    host_cm.__exit__(None, None, None)
    assert time.monotonic() - t >= 0.25  # it waited for the handler
    assert store.get_job(running)["location"] == "archive"
    for j in waiting:
        row = store.get_job(j)
        assert (row["status"], row["worker_id"], row["attempt_count"]) == ("pending", None, 0)
    assert started == [running] and not host.worker.running


def test_shutdown_reschedules_handlers_still_running_after_the_grace_period(store):
    reg = Registry()
    saw_cancel = threading.Event()
    running = threading.Event()

    @reg.job("endless")
    def endless(payload, ctx):
        running.set()
        if ctx.cancelled.wait(10):
            saw_cancel.set()

    job_id = enqueue(store, "endless")
    with hosted(store, fast_settings(store), reg, grace=0.3):
        running.wait(10)
    assert saw_cancel.is_set()
    row = store.get_job(job_id)
    assert (row["location"], row["status"], row["worker_id"]) == ("hot", "pending", None)
    assert row["attempt_count"] == 1  # the interrupted execution counts
    assert store.stats()["retried_total"] == 1


class StartRecorder(Store):
    """The real store, checking every start statement as it returns: the jobs it moved to processing
    plus those already in user code never exceed the worker's slots (processing means user code is
    running or about to, for a slot that was free)."""

    def __init__(self, *args, concurrency: int, **kw):
        super().__init__(*args, **kw)
        self.concurrency = concurrency
        self.lock = threading.Lock()
        self.started = 0  # jobs the store moved to processing for the worker
        self.finished = 0  # handlers that returned (counted before their slot frees)
        self.claim_started = 0  # of them, started by the claim statement itself
        self.excess: list[int] = []

    def _started(self, n: int) -> None:
        with self.lock:
            self.started += n
            if self.started - self.finished > self.concurrency:
                self.excess.append(self.started - self.finished)

    def fetch(self, worker_id, limit, queues=None, **kw):
        rows = super().fetch(worker_id, limit, queues, **kw)
        n = sum(1 for r in rows if r["status"] == "processing")
        self.claim_started += n
        self._started(n)
        return rows

    def mark_processing(self, worker_id, job_ids):
        marked = super().mark_processing(worker_id, job_ids)
        self._started(len(marked))
        return marked

    def done(self) -> None:
        with self.lock:
            self.finished += 1


def test_jobs_become_processing_only_for_free_slots(store):
    """Fast jobs start by claim-and-start; whatever the mix, no more jobs are ever processing than
    there are slots, and jobs queued behind busy slots stay fetched (or pending)."""
    reg = Registry()
    gate = threading.Event()
    recording = StartRecorder(store.url, pool_size=8, concurrency=2)
    reg.job("fast")(lambda p, ctx: recording.done())

    @reg.job("slow")
    def slow(payload, ctx):
        gate.wait(10)
        recording.done()

    try:
        fast = [enqueue(store, "fast") for _ in range(80)]
        with hosted(recording, fast_settings(store), reg, concurrency=2):
            for j in fast:
                settled(store, j, "archive")
            assert recording.claim_started > 0  # fast jobs went from pending straight to processing
            slow_ids = [enqueue(store, "slow", priority=20) for _ in range(2)]
            more = [enqueue(store, "fast") for _ in range(3)]
            wait_for(lambda: all(store.get_job(j)["status"] == "processing" for j in slow_ids))
            time.sleep(0.3)
            # Both slots hold a running job: nothing else is processing.
            assert {store.get_job(j)["status"] for j in more} <= {"pending", "fetched"}
            gate.set()
            for j in more:
                settled(store, j, "archive")
        assert recording.excess == []
    finally:
        recording.close()


class LostStartReplies(Store):
    """The first start statement commits but its reply is lost: the connection dies after the commit,
    which the caller sees as a transient error."""

    lost = False

    def __init__(self, url, **options):
        super().__init__(url, **options)
        run = self.db.run  # the Store's parts run their statements through its Database

        def lossy(name, /, **params):
            rows = run(name, **params)
            if name == "mark_processing" and rows and not self.lost:
                self.lost = True
                raise errors.TransientStorageError("connection lost after the commit")
            return rows

        self.db.run = lossy


def test_a_start_that_committed_unseen_is_adopted_not_left_as_a_zombie(store):
    reg = Registry()
    ran = []
    gate = threading.Event()
    reg.job("block")(lambda p, ctx: gate.wait(10))
    reg.job("t")(lambda p, ctx: ran.append((ctx.job_id, ctx.attempt)))
    blocker = enqueue(store, "block")
    lossy = LostStartReplies(store.url, pool_size=8)
    try:
        with hosted(lossy, fast_settings(store, worker__concurrency=1), reg) as host:
            wait_for(lambda: store.get_job(blocker)["status"] == "processing", what="the blocker running")
            # The only slot is busy, so this job is claimed into the prefetch buffer and later started
            # by mark_processing, whose first reply is lost.
            job_id = enqueue(store, "t")
            wait_for(lambda: store.get_job(job_id)["status"] == "fetched", what="the job buffered")
            gate.set()
            row = settled(store, job_id, "archive")
            assert lossy.lost, "the start went another way"
            assert host.worker.counts["conflicts"] == 0
    finally:
        gate.set()
        lossy.close()
    assert ran == [(job_id, 1)] and row["attempt_count"] == 1


def test_a_retry_claimed_again_at_once_by_the_same_worker_keeps_its_bookkeeping(store):
    """Attempt 1 fails, its retry is due at once and this worker claims and starts attempt 2 before the
    bookkeeping of attempt 1 ends: that bookkeeping must forget attempt 1's run, not the job's id, or
    attempt 2 would lose its heartbeats (and be taken for a zombie)."""
    reg = Registry()
    second, release, forgotten = threading.Event(), threading.Event(), threading.Event()

    @reg.job("flaky")
    def flaky(payload, ctx):
        if ctx.attempt == 1:
            raise RuntimeError("first attempt fails")
        second.set()
        release.wait(10)

    settings = fast_settings(store, retry__base_delay=0.001, retry__jitter_max_delay=0)
    with hosted(store, settings, reg) as host:
        w = host.worker
        original = w.finished

        def late_finished(kind, items, applied):
            if kind == RETRY:
                second.wait(10)  # attempt 2 is running before attempt 1's bookkeeping ends
            original(kind, items, applied)
            if kind == RETRY:
                forgotten.set()

        w.finished = late_finished
        job_id = enqueue(store, "flaky")
        assert forgotten.wait(10) and second.is_set()
        run = w.state.owned.get(job_id)
        assert run is not None and run.attempt == 2
        before = store.get_job(job_id)["heartbeat_at"]
        wait_for(lambda: store.get_job(job_id)["heartbeat_at"] > before, 3, "attempt 2 heartbeating")
        release.set()
        row = settled(store, job_id, "archive")
    assert row["attempt_count"] == 2


def test_a_job_claimed_again_while_buffered_is_started_once(store):
    w = Worker(store, fast_settings(store), registry=Registry(), concurrency=4)
    row = ClaimedJob(
        id="j1", priority=0, due_at=store.now(), queue="default", type="t", payload="{}", status="fetched"
    )
    w.fetcher.buffered([row])
    w.fetcher.buffered([replace(row)])
    w.fetcher.buffered([replace(row), replace(row)])
    assert [e.job.id for e in w.state.buffer] == ["j1"]
    w.state.free -= 2  # two slots held for a start set that names the job twice
    w.launcher.launch(
        [row, replace(row)], {"j1": Started(id="j1", attempt_count=1, started_at=store.now())}, 2
    )
    assert [r.id for r in w.state.running] == ["j1"] and w.state.free == 3
