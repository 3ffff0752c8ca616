"""Releases of buffered jobs that failed and are tried again (engine/releasing.py)."""

from __future__ import annotations

import time

from chokaq_ops import errors
from chokaq_ops.engine.releasing import Releaser
from chokaq_ops.engine.serial_writes import SerialWrites
from chokaq_ops.engine.worker_state import Entry, WorkerState
from chokaq_ops.models import NewJob

WORKER = "w-release"


class LostReplyOnce:
    """SerialWrites whose first call runs (and commits) and then fails as a lost reply would."""

    def __init__(self, inner: SerialWrites) -> None:
        self.inner = inner
        self.lost = False

    def call(self, fn, *args, **kwargs):
        result = self.inner.call(fn, *args, **kwargs)
        if not self.lost:
            self.lost = True
            raise errors.TransientStorageError("the reply was lost after the commit")
        return result


def test_a_retried_release_leaves_a_job_the_worker_claimed_again(store):
    """A release commits but its reply is lost, so the releaser keeps it to try again; meanwhile the same
    worker claims the job again into its buffer. The retry must not hand that newer claim back: its
    start would then find the job no longer fetched by this worker (a state-transition conflict)."""
    (job,) = store.enqueue([NewJob(type="t", queue="q")])
    (first,) = store.fetch(WORKER, 1)
    state = WorkerState(concurrency=1, prefetch=1)
    releaser = Releaser(state, store, LostReplyOnce(SerialWrites(store)), WORKER)

    assert releaser.release([first], why="waited too long in the prefetch buffer", keep=True) == 0
    assert store.get_job(job.id).status == "pending"  # the lost-reply release did commit
    (again,) = store.fetch(WORKER, 1)  # the worker's next claim takes it back
    with state.lock:
        state.buffer.append(Entry(-again.priority, again.due_at, next(state.seq), again, time.monotonic()))

    assert releaser.retry() == 0
    held = store.get_job(job.id)
    assert (held.status, held.worker_id) == ("fetched", WORKER)


def test_a_retried_release_still_hands_back_a_job_the_worker_no_longer_knows(store):
    (job,) = store.enqueue([NewJob(type="t", queue="q")])
    (first,) = store.fetch(WORKER, 1)
    inner = SerialWrites(store)

    class FailsOnce:
        failed = False

        def call(self, fn, *args, **kwargs):
            if not self.failed:
                self.failed = True
                raise errors.TransientStorageError("the server went away before the release ran")
            return inner.call(fn, *args, **kwargs)

    releaser = Releaser(WorkerState(concurrency=1, prefetch=1), store, FailsOnce(), WORKER)
    assert releaser.release([first], why="queue paused", keep=True) == 0
    assert store.get_job(job.id).status == "fetched"
    assert releaser.retry() == 1
    assert store.get_job(job.id).status == "pending"
