"""Loaded (via PYTHONPATH) only into workers started under faketime by the clock-skew tests.

libfaketime 0.9.10 with FAKETIME_DONT_FAKE_MONOTONIC=1 (a skewed wall clock, real monotonic timers - what a
host with a wrong clock has) breaks one call: clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME), which
CPython's time.sleep uses, fails with EINVAL because the library shifts the absolute deadline by the fake
offset. Condition-variable waits are not affected, so time.sleep waits on an Event instead. Everything
else, the wall clock included, is left to libfaketime.
"""

import threading
import time


def _sleep(seconds: float) -> None:
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    threading.Event().wait(seconds)


time.sleep = _sleep
