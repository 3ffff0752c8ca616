"""One run of a bulk plan, the same from a notebook, a script (`chokaq dlq resurrect`) and both transports.

A run finds or freezes its plan (a label resumes the unfinished plan it is bound to), takes the plan's
lease (one run at a time), sets the plan's pace, executes the chunks (canary and failure guard for
resurrects), and audits how it ended: `plan_halt`, `plan_interrupt` (SIGINT/SIGTERM, KeyboardInterrupt)
and `plan_resume` rows are written by the run, wherever it runs, through the client's transport (the
store, or the API). It reports what happens as events (dicts with `event`), the same ones the CLI prints
as JSON lines (docs/cli-json.md): `plan` first, `chunk` per chunk, and one final `finished`, `halted`
or `interrupted`.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import secrets
import socket
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from chokaq_ops import errors

if TYPE_CHECKING:
    from chokaq_ops.analysis.plans import Plan


class RunClient(Protocol):
    """What a run needs of its client (BaseClient provides it; the client module imports this one)."""

    def plan(self, plan_id: str) -> Plan: ...

    def preview(self, ids: Any = None, **kw: Any) -> dict[str, Any]: ...

    def _resolve(
        self,
        action: str,
        selection: Any,
        filters: Mapping[str, Any],
        *,
        label: str | None,
        new: bool,
        edits: Any,
        max_jobs: int | None,
        chunk_size: int,
        renew: bool,
        safe_only: bool,
        rate: float | None,
    ) -> tuple[Plan, bool] | None: ...

    def _selection(
        self, action: str, selection: Any, filters: Mapping[str, Any], *, safe_only: bool
    ) -> Any: ...

    def _labelled_plan(self, action: str, label: str) -> Plan | None: ...

    def _plan_note(self, plan_id: str, event: str, details: dict[str, Any]) -> None: ...

    def _plan_lease(self, plan_id: str, holder: str, ttl: float, take_from: str | None) -> dict[str, Any]: ...

    def _plan_release(self, plan_id: str, holder: str) -> None: ...


Event = dict[str, Any]
DONE_KEY = {"resurrect": "resurrected", "purge": "purged", "cancel": "cancelled"}
LEASE_TTL_S = 60.0  # the plan's lease; renewed by every chunk and while a run waits


def new_holder() -> str:
    """Who holds a plan's lease: `user@host:pid:random`. A later run on the same host whose holder's
    process is gone takes the lease over at once (a run killed by SIGKILL does not block the next)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def dead_local_holder(holder: str | None) -> str | None:
    """`holder` when it names a process on this host that no longer exists, else None."""
    if not holder or "@" not in holder:
        return None
    try:
        host, pid_text = holder.split("@", 1)[1].split(":")[:2]
        pid = int(pid_text)
    except ValueError:
        return None
    if host != socket.gethostname() or pid == os.getpid():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return holder
    except PermissionError:
        return None
    return None


def counts(plan: Plan, before_done: int, before_chunks: int) -> Event:
    """A run's numbers: the plan's totals and, apart, what this run did (a resumed plan did some before)."""
    key = DONE_KEY[plan.action]
    return {
        "plan_id": plan.id,
        "action": plan.action,
        "state": plan.state,
        key: plan.done,
        f"{key}_this_run": plan.done - before_done,
        "batches": plan.chunks_done,
        "batches_this_run": plan.chunks_done - before_chunks,
        "skipped": plan.skipped,
        "remaining": plan.remaining,
    }


def run_plan(
    client: RunClient,
    action: str,
    selection: Any = None,
    *,
    label: str | None = None,
    new: bool = False,
    plan_id: str | None = None,
    edits: Any = None,
    max_jobs: int | None = None,
    chunk_size: int = 1000,
    renew: bool = True,
    safe_only: bool = False,
    rate: float | None = None,
    canary: int = 0,
    watch: float = 300.0,
    max_failure_rate: float | None = None,
    spread: float = 0.0,
    poll: float = 1.0,
    wait: float = 0.0,
    lease_ttl: float = LEASE_TTL_S,
    progress: bool | None = None,
    on_event: Callable[[Event], None] | None = None,
    interrupted: Callable[[], str] | None = None,
    **filters: Any,
) -> Event:
    """Run a bulk plan to its end, a halt or an interrupt, and return the final event.

    The plan is `plan_id`, else the unfinished plan bound to `label` (resumed: the selection given must
    be the one it froze, else `errors.LabelMismatch`; `new=True` discards it and starts over), else a
    new plan frozen from `selection` / `filters` (nothing matching: a final event with `matched: 0` and
    no plan). `safe_only`: only job types workers declared idempotent. The run holds the plan's lease
    (`errors.PlanBusy` when another run holds it: `wait` seconds for it first); `rate` sets the plan's
    pace (shared by every process working it). Events go to `on_event`: `plan`, `chunk`..., then the
    final one, also returned: `finished` (exit 0), `halted` (a canary or guard stopped it, 1) or
    `interrupted` (KeyboardInterrupt, SIGINT/SIGTERM in the CLI, 3), each with the plan's counts.
    `interrupted()` names the signal for the interrupt's event and audit row (default SIGINT)."""
    emit = on_event or (lambda _event: None)
    if plan_id is not None:
        if selection is not None or filters or label or new or edits or max_jobs:
            raise errors.ValidationError("a resume by plan id takes no selection or label", field="plan_id")
        plan = client.plan(plan_id)
        if plan.action != action:
            raise errors.ValidationError(
                f"plan {plan.id} is a {plan.action} plan, not {action}", field="plan_id"
            )
        client._plan_note(plan.id, "plan_resume", {"by": "run"})
        resumed = True
    else:
        found = client._resolve(
            action,
            selection,
            filters,
            label=label,
            new=new,
            edits=edits,
            max_jobs=max_jobs,
            chunk_size=chunk_size,
            renew=renew,
            safe_only=safe_only,
            rate=rate,
        )
        if found is None:
            final = {"event": "finished", "action": action, "matched": 0, "plan_id": None, "label": label}
            final |= {"reason": "nothing_matched", "exit_code": 0}
            emit(final)
            return final
        plan, resumed = found
    head: Event = {"event": "plan", "plan_id": plan.id, "action": plan.action, "label": plan.label}
    head |= {"resumed": resumed, "total": plan.total, "remaining": plan.remaining, "dry_run": False}
    head |= {"rate": rate if rate is not None else plan.rate}
    if plan.action == "resurrect":
        head["renew"] = plan.renew
    emit(head)
    holder = new_holder()
    take(client, plan, holder, wait=wait, ttl=lease_ttl)
    before_done, before_chunks = plan.done, plan.chunks_done
    pacing: dict[str, Any] = {"rate": rate}
    if plan.action == "resurrect":
        pacing |= {"canary": canary, "watch": watch, "max_failure_rate": max_failure_rate, "spread": spread}
        pacing["poll"] = poll

    def on_chunk(chunk: Mapping[str, Any]) -> None:
        emit({"event": "chunk", "plan_id": plan.id, **chunk, "remaining": plan.remaining})

    try:
        # The plan writes plan_halt and plan_interrupt to the audit log itself (Plan.execute).
        plan.execute(
            progress=progress,
            on_chunk=on_chunk,
            holder=holder,
            lease_ttl=lease_ttl,
            interrupted=interrupted,
            **pacing,
        )
    except errors.PlanHalted as halted:
        final = counts(plan.refresh(), before_done, before_chunks)
        final |= {"event": "halted", "reason": "halted", "exit_code": 1, "message": str(halted)}
        final["outcomes"] = halted.outcomes
        emit(final)
        return final
    except KeyboardInterrupt:
        signame = interrupted() if interrupted is not None else "SIGINT"
        final = counts(plan.refresh(), before_done, before_chunks)
        final |= {"event": "interrupted", "reason": "interrupted", "exit_code": 3, "signal": signame}
        emit(final)
        return final
    finally:
        # The lease expires by itself: the run's outcome matters more than its release.
        with contextlib.suppress(errors.ChokaqError):
            client._plan_release(plan.id, holder)
    final = counts(plan, before_done, before_chunks)
    final |= {"event": "finished", "reason": "done" if plan.state == "done" else plan.state, "exit_code": 0}
    emit(final)
    return final


def take(client: RunClient, plan: Plan, holder: str, *, wait: float, ttl: float) -> None:
    """Take the plan's lease for this run, waiting up to `wait` seconds for another run to finish; a
    holder that was a process of this host and is gone is taken over at once."""
    deadline = time.monotonic() + max(0.0, wait)
    while True:
        try:
            client._plan_lease(plan.id, holder, ttl, None)
            return
        except errors.InvalidState:
            return  # finished meanwhile (by the run we waited for): nothing is left to hold or to do
        except errors.PlanBusy as busy:
            dead = dead_local_holder(busy.holder)
            if dead is not None:
                client._plan_lease(plan.id, holder, ttl, dead)
                return
            if time.monotonic() >= deadline:
                raise
            time.sleep(min(1.0, max(0.05, deadline - time.monotonic())))


def dry_run(
    client: RunClient,
    action: str,
    selection: Any = None,
    *,
    label: str | None = None,
    plan_id: str | None = None,
    max_jobs: int | None = None,
    renew: bool = True,
    safe_only: bool = False,
    on_event: Callable[[Event], None] | None = None,
    **filters: Any,
) -> Event:
    """What a run would do, changing nothing: the same events with `dry_run: true` (`plan` with the
    preview, then `finished`). A label or plan id shows the unfinished plan a run would resume."""
    emit = on_event or (lambda _event: None)
    existing = None
    if plan_id is not None:
        existing = client.plan(plan_id)
    elif label is not None:
        existing = client._labelled_plan(action, label)
    if existing is not None:
        head: Event = {"event": "plan", "dry_run": True, "plan_id": existing.id, "action": existing.action}
        head |= {"label": existing.label, "resumed": True, "state": existing.state}
        head |= {"total": existing.total, "remaining": existing.remaining, "matched": existing.remaining}
        emit(head)
        final = {"event": "finished", "dry_run": True, "plan_id": existing.id, "matched": existing.remaining}
        final |= {"reason": "dry_run", "exit_code": 0}
        emit(final)
        return final
    ids, _, narrowed = client._selection(action, selection, filters, safe_only=safe_only)
    if narrowed is None:
        preview: dict[str, Any] = {
            "matched": 0,
            "sample_ids": [],
            "by_reason": {},
            "by_queue": {},
            "by_type": {},
        }
    else:
        preview = client.preview(ids, max_jobs=max_jobs, renew=renew, **({} if ids is not None else narrowed))
    head = {"event": "plan", "dry_run": True, "plan_id": None, "action": action, "label": label}
    head |= {"resumed": False, **preview}
    emit(head)
    final = {"event": "finished", "dry_run": True, "plan_id": None, "matched": preview["matched"]}
    final |= {"reason": "dry_run", "exit_code": 0}
    emit(final)
    return final
