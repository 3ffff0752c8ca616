"""Recurring schedules (docs/schedules.md): their definitions (created, changed, paused, triggered and
deleted by operators, each audited in its transaction, or written from code declarations), the tick
ledger, and firing: a tick's job, its ledger row and the schedule's advanced next_run_at in one
transaction.

Why a tick runs once however many processes race for it: `fire_schedule` moves next_run_at from the
value the process read (compare-and-set; on PostgreSQL the UPDATE's row lock orders the racers, on
SQLite the one writer does), so only one process goes on to enqueue; and the ledger's primary key
(schedule, tick_at, kind) refuses a second row for a tick even if next_run_at were ever moved back (an
operator's change, a clock jump), which the job's idempotency key alone could not: it dedupes only
against hot jobs, and a tick's job may have finished long ago.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from chokaq_ops import cron, errors
from chokaq_ops.models import Actor, NewJob, Page
from chokaq_ops.records import ScheduleRecord, ScheduleRun
from chokaq_ops.schedules import (
    Schedule,
    TickPlan,
    check_definition,
    check_name,
    schedule_tag,
    tick_key,
)
from chokaq_ops.storage import signals
from chokaq_ops.storage.audit import audit_in, checked_actor, person
from chokaq_ops.storage.database import Database, Tx
from chokaq_ops.storage.inputs import paging
from chokaq_ops.storage.producer import Producer

log = logging.getLogger("chokaq.schedules")

# The stored definition: what a schedule is made of (its state, next_run_at and the counters, is not).
DEFINITION = (
    "type",
    "cron",
    "tz",
    "payload",
    "queue",
    "priority",
    "tags",
    "misfire",
    "catch_up_max",
    "misfire_grace_seconds",
)
DEFAULTS: Mapping[str, Any] = {
    "tz": "UTC",
    "payload": None,
    "queue": "default",
    "priority": 10,
    "tags": None,
    "misfire": "once",
    "catch_up_max": 1,
    "misfire_grace_seconds": None,
    "paused": False,
}
# Fields PATCH may change: the definition (name is the identity; pause and resume have their own calls).
EDITABLE = frozenset(DEFINITION)
# Ledger keys a trigger tries (a millisecond apart) when triggers of one schedule meet in an instant.
MANUAL_SLOTS = 50


class ScheduleNotFound(errors.JobNotFound):
    """No such schedule."""


@dataclass(frozen=True)
class Fired:
    """A tick (or trigger) that enqueued a job."""

    tick_at: datetime
    job_id: str
    late: bool = False


class ScheduleOps:
    def __init__(self, db: Database, producer: Producer) -> None:
        self.db = db
        self.producer = producer

    # ------------------------------------------------------------------ reads

    def get_schedule(self, name: str) -> ScheduleRecord:
        rows = self.db.run("schedule_get", write=False, name=check_name(name))
        if not rows:
            raise ScheduleNotFound(f"no schedule named {name!r}", field="name")
        return ScheduleRecord.from_stored(rows[0])

    def list_schedules(
        self,
        *,
        type: str | None = None,
        paused: bool | None = None,
        source: str | None = None,
        page: int = 1,
        page_size: int = 100,
    ) -> Page[ScheduleRecord]:
        """Schedules by name; filters by job type, paused, source (api or code)."""
        params = {"type": type, "paused": paused, "source": source}
        window = paging(page, page_size)
        total = int(self.db.run("schedule_count", write=False, **params)[0]["n"])
        rows = (
            self.db.run("schedule_list", write=False, **params, **window) if window["offset"] < total else []
        )
        return Page([ScheduleRecord.from_stored(r) for r in rows], total, page, page_size)

    def schedule_runs(self, name: str, *, page: int = 1, page_size: int = 100) -> Page[ScheduleRun]:
        """A schedule's ledger, newest tick first: every tick that ran and every trigger, with its job and
        where that job is now."""
        self.get_schedule(name)  # 404 for an unknown name, not an empty page
        window = paging(page, page_size)
        total = int(self.db.run("schedule_runs_count", write=False, name=name)[0]["n"])
        rows = (
            self.db.run("schedule_runs", write=False, name=name, **window) if window["offset"] < total else []
        )
        return Page([ScheduleRun.from_stored(r) for r in rows], total, page, page_size)

    def due_schedules(self, limit: int = 100) -> list[dict[str, Any]]:
        """Schedules due on the database clock (each row carries that clock's `now_at`), oldest first."""
        return self.db.run("schedules_due", write=False, limit=int(limit))

    # ------------------------------------------------------------------ definition changes (audited)

    def create_schedule(
        self, definition: Mapping[str, Any], *, actor: Actor, source: str = "api"
    ) -> ScheduleRecord:
        """A new schedule (`name`, `type` and `cron` required); a taken name is a Conflict. Its first tick
        is the first at or after now (database clock); a paused one has none until resumed."""
        actor = person(actor)
        missing = [f for f in ("name", "type", "cron") if definition.get(f) is None]
        if missing:
            raise errors.ValidationError(f"{missing[0]} is required", field=missing[0])
        unknown = sorted(set(definition) - {"name", "paused", *DEFINITION})
        if unknown:
            raise errors.ValidationError(f"unknown schedule field {unknown[0]!r}", field=unknown[0])
        values = {**DEFAULTS, **self._checked(definition)}

        def create(tx: Tx) -> None:
            self._insert(tx, values, source=source, actor=actor)

        retries = self.db.thread_retries()
        try:
            self.db.transaction(create)
        except errors.Conflict:
            # A retried create whose first attempt committed unseen finds its own row: that is success.
            if self.db.thread_retries() == retries or not self._is_own(values, actor):
                raise
        return self.get_schedule(values["name"])

    def update_schedule(self, name: str, changes: Mapping[str, Any], *, actor: Actor) -> ScheduleRecord:
        """Change a schedule's definition. A schedule declared in code is changed in the code (InvalidState
        here): the next process to start would write the declaration back. A new cron or time zone
        starts the ticks again from now; other changes apply from the next tick on."""
        actor = person(actor)
        name = check_name(name)
        unknown = sorted(set(changes) - EDITABLE)
        if unknown:
            raise errors.ValidationError(
                f"{unknown[0]} cannot be changed here (PATCH changes {', '.join(sorted(EDITABLE))}; pause "
                "and resume have their own calls)",
                field=unknown[0],
            )
        if not changes:
            raise errors.ValidationError("nothing to change: give at least one field", field="body")

        def update(tx: Tx) -> None:
            row = self._lock(tx, name)
            if row["source"] == "code":
                raise errors.InvalidState(
                    f"schedule {name!r} is declared in code (@job(schedule=...) or schedules=[...]): change "
                    "the declaration and restart, or pause it here",
                )
            before = _definition(row)
            merged = {**before, **changes}
            if "cron" in changes or "tz" in changes:
                changed = self._checked({**{k: merged[k] for k in ("cron", "tz")}, **changes})
            else:
                changed = self._checked(changes)
            after = {**before, **changed}
            if after == before:
                return
            diff = self._replace(tx, row, before, after, actor=actor)
            _event(tx, f"Schedule {name} changed by {actor.name}: {', '.join(diff)}", name)

        self.db.transaction(update)
        return self.get_schedule(name)

    def delete_schedule(self, name: str, *, actor: Actor) -> None:
        """Delete a schedule (audited with its definition), then its ledger in bounded batches. A
        schedule declared in code comes back when a process that declares it starts."""
        actor = person(actor)
        name = check_name(name)

        def delete(tx: Tx) -> None:
            row = self._lock(tx, name)
            tx.run("schedule_delete", name=name)
            definition = _definition(row)
            audit_in(
                tx,
                actor,
                "schedule_delete",
                details={"schedule": name, "source": row["source"], **definition},
            )
            _event(tx, f"Schedule {name} deleted by {actor.name}", name)

        self.db.transaction(delete)
        for _ in self.db.run_batches("schedule_runs_delete", count=lambda rows: int(rows[0]["n"]), name=name):
            pass

    def pause_schedule(self, name: str, *, actor: Actor) -> ScheduleRecord:
        """No ticks run until resumed (a trigger still does). Pausing a paused schedule changes nothing."""
        return self._set_paused(name, True, actor)

    def resume_schedule(self, name: str, *, actor: Actor) -> ScheduleRecord:
        """Ticks run again from the first at or after now: the ones that fell in the pause never run."""
        return self._set_paused(name, False, actor)

    def trigger_schedule(self, name: str, *, actor: Actor) -> ScheduleRun:
        """Enqueue the schedule's job now, outside its ticks (paused or not): a ledger row of kind manual,
        the job and the audit row in one transaction."""
        actor = person(actor)
        name = check_name(name)

        def trigger(tx: Tx) -> ScheduleRun:
            row = self._lock(tx, name)
            now = row["now_at"]
            # A trigger's row is keyed by when it was asked for; two in the same millisecond (SQLite's
            # clock resolution) take the next free one.
            for step in range(MANUAL_SLOTS):
                at = now + timedelta(milliseconds=step)
                items = [{"tick_at": self.db.format_time(at), "late": False}]
                inserted = tx.run(
                    "schedule_ledger_insert", name=name, kind="manual", items=items, fired_by=actor.name
                )
                if inserted:
                    break
            else:
                raise errors.Conflict(f"schedule {name!r} is being triggered too often; try again")
            job = self._job(row, name, created_by=actor.name)
            result = self.producer.enqueue_in(tx, [job])[0]
            tx.run(
                "schedule_ledger_jobs",
                name=name,
                kind="manual",
                items=[{"tick_at": self.db.format_time(at), "job_id": result.id}],
            )
            tx.run("schedule_fired", name=name, job_id=result.id, tick_at=None, runs=1)
            audit_in(tx, actor, "schedule_trigger", job_id=result.id, details={"schedule": name})
            _event(tx, f"Schedule {name} triggered by {actor.name}: job {result.id}", name, job_id=result.id)
            return ScheduleRun(
                schedule=name,
                tick_at=inserted[0]["tick_at"],
                kind="manual",
                job_id=result.id,
                fired_at=now,
                fired_by=actor.name,
                outcome="pending",
            )

        run = self.db.transaction(trigger)
        signals.publish(self.db.dialect.url)
        return run

    def sync_schedules(self, declared: Sequence[Schedule], *, actor: Actor) -> dict[str, list[str]]:
        """Write code declarations to the table: a new name is created (source code), a changed
        declaration replaces the stored definition (paused state, counters and ledger kept; a new cron or
        time zone starts its ticks from now), an unchanged one is left alone. Each write is audited under
        `actor`. A name created over the API is taken over by the code (logged). Returns the names per
        outcome: created, updated, unchanged."""
        actor = checked_actor(actor)
        done: dict[str, list[str]] = {"created": [], "updated": [], "unchanged": []}
        for decl in declared:
            if decl.name is None or decl.type is None:
                raise errors.ConfigError(f"schedule {decl.cron!r} has no name or type", field="name")
            values = {
                **DEFAULTS,
                **self._checked({"name": decl.name, "type": decl.type, **decl.definition()}),
            }
            values.pop("paused")
            outcome = self.db.transaction(functools.partial(self._sync_one, values=values, actor=actor))
            done[outcome].append(decl.name)
        return done

    # ------------------------------------------------------------------ firing (the engine's)

    def fire_schedule(
        self, name: str, *, expected: datetime, plan: TickPlan, fired_by: str
    ) -> list[Fired] | None:
        """Run a check's plan for one schedule: advance next_run_at from `expected` (what the check read)
        to the plan's, then enqueue a job per planned tick the ledger did not hold, each with its ledger
        row, all in one transaction. Returns the ticks that enqueued a job; None when another process
        (or an operator) moved the schedule first, or it was paused meanwhile."""

        def fire(tx: Tx) -> list[Fired] | None:
            advanced = tx.run(
                "schedule_advance",
                name=name,
                expected=expected,
                next_run_at=plan.next_run_at,
                missed=plan.missed,
            )
            if not advanced:
                return None
            if plan.missed:
                late = f"; the misfire policy ran {len(plan.late)}" if plan.late else ""
                _event(
                    tx,
                    f"Schedule {name}: {plan.missed:,} tick(s) missed while no process could run them{late}",
                    name,
                    missed=plan.missed,
                )
            if not plan.fire:
                return []
            items = [{"tick_at": self.db.format_time(t), "late": t in plan.late} for t in plan.fire]
            inserted = tx.run(
                "schedule_ledger_insert", name=name, kind="cron", items=items, fired_by=fired_by
            )
            if len(inserted) < len(items):
                log.warning(
                    "schedule %s: %d tick(s) already in the ledger; not run again",
                    name,
                    len(items) - len(inserted),
                )
            if not inserted:
                return []
            ticks = sorted((r["tick_at"], bool(r["late"])) for r in inserted)
            definition = advanced[0]
            jobs = [self._job(definition, name, tick=t) for t, _ in ticks]
            results = self.producer.enqueue_in(tx, jobs)
            fired = [Fired(t, r.id, late) for (t, late), r in zip(ticks, results, strict=True)]
            tx.run(
                "schedule_ledger_jobs",
                name=name,
                kind="cron",
                items=[{"tick_at": self.db.format_time(f.tick_at), "job_id": f.job_id} for f in fired],
            )
            tx.run(
                "schedule_fired",
                name=name,
                job_id=fired[-1].job_id,
                tick_at=fired[-1].tick_at,
                runs=len(fired),
            )
            return fired

        fired = self.db.transaction(fire)
        if fired:
            signals.publish(self.db.dialect.url)
        return fired

    # ------------------------------------------------------------------ helpers

    def _checked(self, values: Mapping[str, Any]) -> dict[str, Any]:
        return check_definition(values, max_payload_bytes=self.db.max_payload_bytes)

    def _lock(self, tx: Tx, name: str) -> dict[str, Any]:
        rows = tx.run("schedule_lock", name=name)
        if not rows:
            raise ScheduleNotFound(f"no schedule named {name!r}", field="name")
        return rows[0]

    def _insert(self, tx: Tx, values: Mapping[str, Any], *, source: str, actor: Actor) -> None:
        now = tx.run("schedule_now")[0]["now_at"]
        parsed = cron.parse(values["cron"], values["tz"])
        next_run = None if values.get("paused") else parsed.at_or_after(now)
        params = {k: values[k] for k in DEFINITION}
        rows = tx.run(
            "schedule_insert",
            name=values["name"],
            **params,
            paused=bool(values.get("paused")),
            source=source,
            next_run_at=next_run,
            actor=actor.name,
        )
        if not rows:
            raise errors.Conflict(f"a schedule named {values['name']!r} exists already", field="name")
        audit_in(
            tx, actor, "schedule_create", details={"schedule": values["name"], "source": source, **params}
        )
        _event(
            tx,
            f"Schedule {values['name']} created by {actor.name} ({values['cron']} {values['tz']})",
            values["name"],
        )

    def _write(
        self,
        tx: Tx,
        row: Mapping[str, Any],
        definition: Mapping[str, Any],
        *,
        actor: Actor,
        restart: bool,
        paused: bool | None = None,
        source: str | None = None,
    ) -> None:
        """Store a locked schedule's definition and state; `restart`: its ticks start again from now."""
        paused = bool(row["paused"]) if paused is None else paused
        if paused:
            next_run = None
        elif restart or row["next_run_at"] is None:
            next_run = cron.parse(definition["cron"], definition["tz"]).at_or_after(row["now_at"])
        else:
            next_run = row["next_run_at"]
        tx.run(
            "schedule_update",
            name=row["name"],
            **{k: definition[k] for k in DEFINITION},
            paused=paused,
            source=source or row["source"],
            next_run_at=next_run,
            actor=actor.name,
        )

    def _replace(
        self,
        tx: Tx,
        row: Mapping[str, Any],
        before: Mapping[str, Any],
        after: Mapping[str, Any],
        *,
        actor: Actor,
        source: str | None = None,
    ) -> list[str]:
        """Store a locked schedule's new definition (a new cron or zone restarts its ticks from now) and
        audit the fields that changed, before and after. Returns their names."""
        restart = (after["cron"], after["tz"]) != (before["cron"], before["tz"])
        self._write(tx, row, after, actor=actor, restart=restart, source=source)
        diff = [k for k in DEFINITION if after[k] != before[k]]
        details: dict[str, Any] = {"schedule": row["name"]}
        if source is not None:
            details["source"] = source
        details |= {"before": {k: before[k] for k in diff}, "after": {k: after[k] for k in diff}}
        audit_in(tx, actor, "schedule_update", details=details)
        return diff

    def _set_paused(self, name: str, paused: bool, actor: Actor) -> ScheduleRecord:
        actor = person(actor)
        name = check_name(name)

        def change(tx: Tx) -> None:
            row = self._lock(tx, name)
            if bool(row["paused"]) == paused:
                return
            self._write(tx, row, _definition(row), actor=actor, restart=not paused, paused=paused)
            verb = "pause" if paused else "resume"
            audit_in(tx, actor, f"schedule_{verb}", details={"schedule": name})
            _event(tx, f"Schedule {name} {verb}d by {actor.name}", name)

        self.db.transaction(change)
        return self.get_schedule(name)

    def _sync_one(self, tx: Tx, values: Mapping[str, Any], actor: Actor) -> str:
        name = values["name"]
        rows = tx.run("schedule_lock", name=name)
        if not rows:
            try:
                self._insert(tx, {**values, "paused": False}, source="code", actor=actor)
            except errors.Conflict:
                # Another process inserted it between our look and our insert (PostgreSQL): a retry
                # of this transaction finds the row and compares.
                raise errors.TransientStorageError(f"schedule {name!r} was declared concurrently") from None
            return "created"
        row = rows[0]
        before = _definition(row)
        after = {k: values[k] for k in DEFINITION}
        if after == before and row["source"] == "code":
            return "unchanged"
        if row["source"] != "code":
            log.warning("schedule %s was created over the API; its declaration in code replaces it", name)
        self._replace(tx, row, before, after, actor=actor, source="code")
        return "updated"

    def _is_own(self, values: Mapping[str, Any], actor: Actor) -> bool:
        rows = self.db.run("schedule_get", write=False, name=values["name"])
        if not rows:
            return False
        row = rows[0]
        return row["created_by"] == actor.name and all(row[k] == values[k] for k in DEFINITION)

    def _job(
        self,
        definition: Mapping[str, Any],
        name: str,
        *,
        tick: datetime | None = None,
        created_by: str | None = None,
    ) -> NewJob:
        """The job of a tick (keyed by the tick, scheduled at it) or of a trigger (due now)."""
        tags = ",".join(t for t in (definition["tags"], schedule_tag(name)) if t)
        return NewJob(
            type=definition["type"],
            payload=definition["payload"] if definition["payload"] is not None else "{}",
            queue=definition["queue"],
            priority=int(definition["priority"]),
            tags=tags[:1000],
            idempotency_key=tick_key(name, tick) if tick is not None else None,
            scheduled_at=tick,
            created_by=created_by or f"schedule:{name}",
        )


def _definition(row: Mapping[str, Any]) -> dict[str, Any]:
    """A stored row's definition, normalised as check_definition normalises (booleans, floats)."""
    out = {k: row[k] for k in DEFINITION}
    out["priority"] = int(out["priority"])
    out["catch_up_max"] = int(out["catch_up_max"])
    grace = out["misfire_grace_seconds"]
    out["misfire_grace_seconds"] = None if grace is None else float(grace)
    return out


def _event(tx: Tx, message: str, name: str, **data: Any) -> None:
    tx.run("add_event", kind="schedule", message=message, data=json.dumps({"schedule": name, **data}))
