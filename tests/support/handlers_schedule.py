"""The handler and schedule the schedule kill test (tests/crash/test_schedules_kill.py) runs inside real
`chokaq serve` processes (`--handlers tests.support.handlers_schedule`).

The schedule is declared in code, so every process writes it at start (the first creates it, the others
find it unchanged): a tick every second, the misfire policy and grace from the environment the test
sets, identical in every process."""

from __future__ import annotations

import os

from chokaq_ops import JobContext, Schedule, job

SCHEDULE = "soak.every-second"


@job(
    "soak.tick.v1",
    schedules=[
        Schedule(
            "* * * * * *",
            name=SCHEDULE,
            queue="soak",
            misfire=os.environ.get("CHOKAQ_TEST_MISFIRE", "catch_up"),
            catch_up_max=int(os.environ.get("CHOKAQ_TEST_CATCH_UP", "3")),
            misfire_grace_seconds=float(os.environ.get("CHOKAQ_TEST_GRACE", "4")),
        )
    ],
)
def tick(payload: object, ctx: JobContext) -> None:
    """Nothing to do: the test counts ticks, ledger rows and jobs, not work."""
