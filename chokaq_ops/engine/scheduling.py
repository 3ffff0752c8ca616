"""The schedule check every hosting process runs (docs/schedules.md): every Schedules.CheckInterval it reads
the schedules due on the database clock, plans their ticks (chokaq_ops.schedules.plan_ticks: the
misfire policy for ticks past their grace) and fires each plan in one transaction
(Store.fire_schedule). Processes race freely: the one whose compare-and-set moves next_run_at enqueues,
the others find it moved and do nothing, and the tick ledger refuses any tick a second time. There is
no leader to elect or lose, so killing any process (kill -9 included) loses no tick while another runs.

At start the check writes the schedules declared in code (`@job(schedule=...)`) to the table, audited
as `code:<holder>`; a failure there (the database away) is retried at each check until it succeeds.
A check never raises: a failing one is logged and the next runs on time.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from chokaq_ops import cron
from chokaq_ops.models import Actor
from chokaq_ops.schedules import Schedule, plan_ticks

if TYPE_CHECKING:
    from chokaq_ops.engine.metrics import Metrics
    from chokaq_ops.settings import Settings
    from chokaq_ops.storage import Store

log = logging.getLogger("chokaq.schedules")

# Due schedules one check reads at most; more wait for the next check (oldest first).
DUE_BATCH = 100


@dataclass
class CheckResult:
    """What one check did: jobs enqueued (and how many of them late), ticks missed, schedules another
    process fired first, and errors (one per schedule that failed)."""

    enqueued: int = 0
    late: int = 0
    missed: int = 0
    lost_races: int = 0
    errors: list[str] = field(default_factory=list)


class ScheduleChecker:
    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        declared: Sequence[Schedule] = (),
        metrics: Metrics | None = None,
        holder: str | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.declared = list(declared)
        self.metrics = metrics
        self.holder = (holder or f"{socket.gethostname()}:{os.getpid()}")[:100]
        self.synced = not self.declared
        self.checks = 0
        self.last_error: str | None = None
        self._failing: dict[str, str] = {}  # schedule -> the error its last check failed with
        self._lock = threading.Lock()  # one check at a time in this process (a manual one and the timer)

    def sync(self) -> bool:
        """Write the code declarations to the table; False (logged) when the database could not be
        reached, and the next check tries again."""
        try:
            done = self.store.sync_schedules(self.declared, actor=Actor(f"code:{self.holder}"[:100]))
        except Exception as exc:
            self.last_error = f"sync: {exc}"
            log.error("schedules: cannot write the declared schedules yet: %s", exc)
            return False
        self.synced = True
        changed = {k: v for k, v in done.items() if v and k != "unchanged"}
        if changed:
            log.info("schedules declared in code: %s", changed)
        return True

    def check(self, now: datetime | None = None) -> CheckResult:
        """One pass: fire every due schedule. `now` replaces the database clock in the plan (tests that
        freeze time); the due schedules are still those the database finds due."""
        result = CheckResult()
        with self._lock:
            if not self.synced and not self.sync():
                result.errors.append(self.last_error or "sync failed")
                return result
            try:
                due = self.store.due_schedules(DUE_BATCH)
            except Exception as exc:
                self.last_error = str(exc)
                log.error("schedules: cannot read the due schedules; the next check runs on time: %s", exc)
                result.errors.append(str(exc))
                return result
            for row in due:
                name = row["name"]
                try:
                    self._fire(row, now or row["now_at"], result)
                except Exception as exc:
                    self.last_error = f"{name}: {exc}"
                    result.errors.append(self.last_error)
                    # Once per schedule and error, not at every check (a stored zone tzdata dropped, say).
                    level = logging.DEBUG if self._failing.get(name) == str(exc) else logging.ERROR
                    log.log(level, "schedule %s: this check failed; the next one retries it: %s", name, exc)
                    self._failing[name] = str(exc)
                else:
                    if self._failing.pop(name, None) is not None:
                        log.info("schedule %s: fires again", name)
            self.checks += 1
        return result

    def _fire(self, row: dict[str, Any], now: datetime, result: CheckResult) -> None:
        expression = cron.parse(row["cron"], row["tz"])
        grace = row["misfire_grace_seconds"] or self.settings.schedules.misfire_grace
        plan = plan_ticks(
            expression,
            row["next_run_at"],
            now,
            misfire=row["misfire"],
            catch_up_max=int(row["catch_up_max"]),
            grace_s=float(grace),
        )
        if not plan.fire and not plan.missed and plan.next_run_at == row["next_run_at"]:
            return  # not due yet on the clock the plan was made with
        fired = self.store.fire_schedule(
            row["name"], expected=row["next_run_at"], plan=plan, fired_by=self.holder
        )
        if fired is None:
            result.lost_races += 1
            return
        late = sum(1 for f in fired if f.late)
        result.enqueued += len(fired)
        result.late += late
        result.missed += plan.missed
        if plan.missed:
            log.warning(
                "schedule %s: %d tick(s) missed while no process ran them (misfire %s: %d run late)",
                row["name"],
                plan.missed,
                row["misfire"],
                late,
            )
        if self.metrics is not None:
            self.metrics.schedule_fired(row["name"], on_time=len(fired) - late, late=late, missed=plan.missed)
