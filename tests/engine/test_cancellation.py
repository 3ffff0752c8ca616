"""JobContext.cancelled (chokaq_ops/engine/cancellation.py): a threading.Event to handlers, made without a
lock or condition unless a thread waits on it."""

from __future__ import annotations

import threading
import time

from chokaq_ops.engine.cancellation import Cancellation
from chokaq_ops.engine.handlers import JobContext


def _ctx() -> JobContext:
    return JobContext(job_id="j", attempt=1, queue="q", type="t")


def test_a_context_is_made_without_the_events_lock_until_someone_waits() -> None:
    ctx = _ctx()
    assert isinstance(ctx.cancelled, threading.Event) and isinstance(ctx.cancelled, Cancellation)
    assert not ctx.cancelled.is_set() and ctx.cancelled._event is None
    ctx.cancel("timeout")
    assert ctx.cancelled.is_set() and ctx.cancelled.isSet() and ctx.cancelled._event is None
    assert ctx.cancelled.wait(0) is True and ctx.cancel_reason == "timeout"


def test_a_waiting_handler_wakes_when_the_job_is_cancelled() -> None:
    ctx = _ctx()
    assert ctx.cancelled.wait(0.01) is False  # times out like Event.wait
    threading.Timer(0.05, ctx.cancel, args=("lost",)).start()
    began = time.monotonic()
    assert ctx.cancelled.wait(5) is True
    assert time.monotonic() - began < 2


def test_a_cancel_racing_the_first_wait_is_never_missed() -> None:
    for _ in range(300):
        flag = Cancellation()
        setter = threading.Thread(target=flag.set)
        setter.start()
        assert flag.wait(5) is True
        setter.join()


def test_clear_resets_the_flag_and_a_made_event() -> None:
    flag = Cancellation()
    assert flag.wait(0) is False  # makes the event
    flag.set()
    flag.clear()
    assert not flag.is_set() and flag.wait(0) is False
    flag.set()
    assert flag.wait(0) is True
