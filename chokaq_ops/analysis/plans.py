"""Plan: a reviewed bulk decision (resurrect / purge / cancel) over a frozen set of jobs.

    plan = client.plan_resurrect(zombies)      # frozen now; nothing has moved (a dry run)
    plan                                        # counts by reason, queue, type and a sample
    plan.execute()                              # chunks of 1000, a progress bar, audit rows with plan.id
    client.plan(plan_id).execute()              # after an interruption: resumes, never touches a job twice
    plan.execute(canary=1, rate=200)            # one chunk first, watched; then 200 jobs/s, guarded

A paced execution (`canary`, `max_failure_rate`, `rate`) is for a downstream that may still be sick:
the canary chunks run first and their jobs are watched until they succeed or die again; the plan halts
(PlanHalted, resumable) when too many die again, and keeps checking the latest chunks as it goes on.

The plan lives in the database (tables `plans` and `plan_items`), so it survives the process that made
it: a notebook kernel that died mid-plan, or a scheduled script that was killed.
"""

from __future__ import annotations

import html
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import pandas as pd

from chokaq_ops import errors
from chokaq_ops.analysis import columns as C

# A canary or guard without an explicit max_failure_rate halts when more than this share of settled jobs
# failed again.
DEFAULT_MAX_FAILURE_RATE = 0.1
# The guard decides on at least this many settled jobs (half its window's jobs when they are fewer).
GUARD_MIN_SETTLED = 20

SAMPLE_COLUMNS = ("id", "queue", "type", "failure_reason", "status", "attempt_count", "failed_at", "error")


class PlanBackend(Protocol):
    """What a client provides to a plan (DbClient and HttpClient both do)."""

    def _plan_get(self, plan_id: str) -> dict[str, Any]: ...

    def _plan_chunk(
        self, plan_id: str, spread: float = 0.0, holder: str | None = None
    ) -> tuple[dict[str, Any], dict[str, Any] | None]: ...

    def _plan_pace(self, plan_id: str, rate: float | None) -> dict[str, Any]: ...

    def _plan_lease(self, plan_id: str, holder: str, ttl: float, take_from: str | None) -> dict[str, Any]: ...

    def _plan_note(self, plan_id: str, event: str, details: dict[str, Any]) -> None: ...

    def _plan_items(self, plan_id: str) -> list[dict[str, Any]]: ...

    def _plan_discard(self, plan_id: str) -> dict[str, Any]: ...

    def _plan_approve(self, plan_id: str) -> dict[str, Any]: ...

    def _plan_outcomes(
        self, plan_id: str, from_chunk: int | None, to_chunk: int | None
    ) -> dict[str, Any]: ...

    def audit(self, *, plan_id: str | None = None) -> pd.DataFrame: ...

    def locate(self, ids: Any) -> pd.DataFrame: ...


def interactive() -> bool:
    """True on a terminal or in a Jupyter kernel: where a progress bar is read by someone."""
    if "ipykernel" in sys.modules:
        try:
            from IPython import get_ipython

            shell = get_ipython()
        except ImportError:  # pragma: no cover - ipykernel without IPython does not exist
            shell = None
        if shell is not None and type(shell).__name__ == "ZMQInteractiveShell":
            return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def progress_bar(total: int, initial: int, desc: str, *, delay: float = 0.0) -> Any:
    """A tqdm bar on stderr (a widget in Jupyter when ipywidgets is installed); `delay` hides it for work
    that finishes sooner."""
    try:
        import ipywidgets  # noqa: F401
        from tqdm.auto import tqdm
    except ImportError:
        from tqdm import tqdm
    return tqdm(total=total, initial=initial, desc=desc, unit="job", file=sys.stderr, leave=True, delay=delay)


class Plan:
    """A bulk decision frozen in the database. Build one with ``client.plan_resurrect / plan_purge /
    plan_cancel``; load one by id with ``client.plan(plan_id)``.

    Attributes mirror the stored plan: ``id``, ``action``, ``actor`` (who created it), ``state``
    (ready = a dry run, running, done, discarded), ``total``, ``done`` (acted on), ``skipped`` (no longer
    where the plan found them when their chunk ran), ``remaining``, ``chunks``, ``chunks_done``,
    ``chunk_size``, ``created_at``, ``finished_at``, ``by_reason`` / ``by_status``, ``by_queue``,
    ``by_type`` (counts when it was frozen) and ``filter``."""

    def __init__(self, backend: PlanBackend, data: dict[str, Any]) -> None:
        self._backend = backend
        self._data: dict[str, Any] = {}
        self._update(data)

    def _update(self, data: dict[str, Any]) -> None:
        data = dict(data)
        for key in ("created_at", "updated_at", "finished_at", "approved_at"):
            value = data.get(key)
            if isinstance(value, str):
                data[key] = datetime.fromisoformat(value.replace("Z", "+00:00"))
        self._data = data

    def __getattr__(self, name: str) -> Any:
        data = self.__dict__.get("_data", {})
        if name in data:
            return data[name]
        raise AttributeError(f"Plan has no attribute {name!r}")

    def as_dict(self) -> dict[str, Any]:
        return dict(self._data)

    @property
    def is_dry_run(self) -> bool:
        """True until the first chunk runs."""
        return self.state == "ready"

    @property
    def counts(self) -> pd.DataFrame:
        """Counts when the plan was frozen. Columns: ``dimension`` (reason, status, queue, type), ``value``,
        ``count`` (int64)."""
        rows = [
            {"dimension": dim, "value": value, C.COUNT: n}
            for dim in ("reason", "status", "queue", "type")
            for value, n in (self._data.get(f"by_{dim}") or {}).items()
        ]
        return pd.DataFrame(rows, columns=["dimension", "value", C.COUNT]).astype({C.COUNT: "int64"})

    @property
    def sample(self) -> pd.DataFrame:
        """Up to 10 of the plan's jobs as they were when it was frozen: id, queue, type, failure_reason or
        status, attempt_count, failed_at (UTC), the error line, and new_payload / new_tags / new_priority
        for edited resurrect plans."""
        frame = pd.DataFrame(self._data.get("sample") or [])
        for col in ("failed_at", "created_at", "scheduled_at"):
            if col in frame.columns:
                frame[col] = pd.to_datetime(frame[col], utc=True, format="ISO8601")
        return frame

    # ------------------------------------------------------------------ actions

    def refresh(self) -> Plan:
        self._update(self._backend._plan_get(self.id))
        return self

    def execute(
        self,
        *,
        progress: bool | None = None,
        max_chunks: int | None = None,
        on_chunk: Callable[[dict[str, Any]], None] | None = None,
        canary: int = 0,
        watch: float = 300.0,
        max_failure_rate: float | None = None,
        rate: float | None = None,
        guard_window: int = 5,
        poll: float = 1.0,
        spread: float = 0.0,
        holder: str | None = None,
        lease_ttl: float = 60.0,
        interrupted: Callable[[], str] | None = None,
    ) -> Plan:
        """Run the remaining chunks (all of them, or `max_chunks`), each in its own transaction.

        Safe to call again after an interruption or on another machine: chunks already done are never run
        again. `progress` shows a tqdm bar (default: only on a terminal or in a notebook). `on_chunk` is
        called after each committed chunk with {chunk, claimed, done, skipped}. Returns the plan.

        Paced execution, resurrect plans only (each call paces itself; a resumed call starts afresh):

        - `canary=k`: run k chunks, then watch their jobs (every `poll` s, up to `watch` s) until each has
          succeeded or failed again; halt when the share that failed again is above `max_failure_rate`,
          or when none of them finished within `watch` (no worker for their queue?).
        - `max_failure_rate` (default 0.1 with a canary): after every later chunk, read the outcomes of the
          last `guard_window` chunks this call ran and halt once at least 20 of their jobs (or half,
          when fewer) have settled and too many failed again.
        - `rate`: the plan's pace, at most this many jobs per second (any plan). The pace is stored with
          the plan and kept by the database: every process working the plan waits its turn, so two of
          them together still keep to it, and a resumed run keeps it unless given another.
        - `spread`: seconds over which each chunk's resurrected jobs' due times are jittered, so jobs that
          still fail do not retry in one synchronized wave.

        `holder`: the run holding the plan's lease (see ``client.run_plan``), renewed as it goes.

        Halting raises `errors.PlanHalted` with the outcomes it decided on; the plan stays `running`, so
        `execute()` resumes it (after a fix) and `discard()` drops the rest. A halt and an interrupt
        (KeyboardInterrupt; `interrupted()` names the signal, default SIGINT) are written to the audit log
        (`plan_halt`, `plan_interrupt`) before they are raised, from a notebook as from the CLI."""
        if self.state == "discarded":
            raise errors.InvalidState(f"plan {self.id} was discarded; make a new one")
        checked = _Pacing(self, canary, watch, max_failure_rate, rate, guard_window, poll)
        pacing = checked if checked.active else None
        if rate is not None and rate != self._data.get("rate"):
            self._update(self._backend._plan_pace(self.id, rate))
        keep = _Keepalive(self._backend, self.id, holder, lease_ttl)
        checked.keepalive = keep
        show = interactive() if progress is None else progress
        bar = (
            progress_bar(self.total, self.total - self.remaining, f"{self.action} {self.id}")
            if show
            else None
        )
        ran: list[int] = []
        try:
            self._run_chunks(ran, max_chunks, spread, holder, keep, bar, on_chunk, pacing)
        except errors.PlanHalted as halted:
            self._backend._plan_note(self.id, "plan_halt", {"reason": str(halted)})
            raise
        except KeyboardInterrupt:
            signame = interrupted() if interrupted is not None else "SIGINT"
            self._backend._plan_note(self.id, "plan_interrupt", {"signal": signame})
            raise
        finally:
            if bar is not None:
                bar.close()
        return self

    def _run_chunks(
        self,
        ran: list[int],
        max_chunks: int | None,
        spread: float,
        holder: str | None,
        keep: _Keepalive,
        bar: Any,
        on_chunk: Callable[[dict[str, Any]], None] | None,
        pacing: _Pacing | None,
    ) -> None:
        while max_chunks is None or len(ran) < max_chunks:
            data, chunk = self._backend._plan_chunk(self.id, spread, holder)
            self._update(data)
            if chunk is None:
                break
            if "wait" in chunk:  # the plan's pace: its next chunk may not start yet
                keep.sleep(float(chunk["wait"]))
                continue
            keep.renewed()
            ran.append(int(chunk["chunk"]))
            if bar is not None:
                bar.update(chunk["claimed"])
            if on_chunk is not None:
                on_chunk(chunk)
            if pacing is not None and self.remaining:
                pacing.after_chunk(ran, chunk["done"])

    def outcomes(
        self, from_chunk: int | None = None, to_chunk: int | None = None, *, per_job: bool = False
    ) -> Any:
        """Where the jobs this resurrect plan moved are now (chunks `from_chunk`..`to_chunk`, default all):
        {acted, waiting, retrying, running, succeeded, failed, gone, failed_by_reason, settled,
        failure_rate}. `failed` = back in the DLQ; `failure_rate` = failed / (succeeded + failed).

        With ``per_job=True``: a DataFrame, one row per job the plan acted on, in plan order, with the
        columns of ``client.locate`` (id, location, status, failure_reason, finished_at) plus ``chunk``:
        the same `id` column as every other frame, so it joins them directly."""
        if not per_job:
            return self._backend._plan_outcomes(self.id, from_chunk, to_chunk)
        items = self.items()
        acted = items[items["outcome"] == "done"]
        if from_chunk is not None:
            acted = acted[acted["chunk"] >= from_chunk]
        if to_chunk is not None:
            acted = acted[acted["chunk"] <= to_chunk]
        where = self._backend.locate(acted["id"].tolist())
        where["chunk"] = acted["chunk"].to_numpy()
        return where

    resume = execute

    def approve(self) -> Plan:
        """Approve the plan as a second person (four-eyes; see Api.PlanApprovalMinJobs). The creator
        cannot approve their own plan (errors.Conflict). Audited; the first approval stands."""
        self._update(self._backend._plan_approve(self.id))
        return self

    def discard(self) -> Plan:
        """Stop the plan for good: chunks not yet run never will be. Audited."""
        self._update(self._backend._plan_discard(self.id))
        return self

    def items(self) -> pd.DataFrame:
        """The frozen jobs in plan order. Columns: ``id`` (str, the job's id: the same column as every
        other frame, so it joins them), ``chunk`` (int64), ``ord`` (int64), ``done_at`` (datetime64[us,
        UTC], NaT until its chunk ran), ``outcome`` (done, skipped or NaN), ``payload``, ``tags`` (str),
        ``priority`` (float64): the edits of a resurrect plan."""
        frame = pd.DataFrame(
            self._backend._plan_items(self.id),
            columns=["id", "chunk", "ord", "done_at", "outcome", "payload", "tags", "priority"],
        )
        frame["done_at"] = pd.to_datetime(frame["done_at"], utc=True, format="ISO8601").astype(C.TIME_DTYPE)
        frame["priority"] = pd.to_numeric(frame["priority"]).astype("float64")
        return frame.astype({"chunk": "int64", "ord": "int64"})

    def audit(self) -> pd.DataFrame:
        """The audit rows carrying this plan's id: one per job acted on, and the plan's own (`plan_create`,
        `plan_approve`, `plan_discard`); see ``client.audit``."""
        return self._backend.audit(plan_id=self.id)

    # ------------------------------------------------------------------ display

    def _headline(self) -> str:
        state = {"ready": "ready — a dry run, nothing has changed", "running": "running (interrupted?)"}.get(
            self.state, self.state
        )
        return (
            f"Plan {self.id}: {self.action} {self.total:,} job(s) in {self.chunks} chunk(s) of "
            f"≤ {self.chunk_size} — {state}"
        )

    def _progress_line(self) -> str:
        approved = f"; approved by {self._data['approved_by']}" if self._data.get("approved_by") else ""
        return (
            f"done {self.done:,}, skipped {self.skipped:,}, remaining {self.remaining:,}; chunks "
            f"{self.chunks_done}/{self.chunks}; frozen {self.created_at:%Y-%m-%d %H:%M:%S} UTC "
            f"by {self.actor}{approved}"
        )

    def _breakdowns(self) -> list[tuple[str, dict[str, int]]]:
        out = []
        for dim in ("reason", "status", "queue", "type"):
            counts = self._data.get(f"by_{dim}") or {}
            if counts:
                out.append((dim, counts))
        return out

    def __repr__(self) -> str:
        lines = [self._headline(), "  " + self._progress_line()]
        if self._data.get("filter"):
            lines.append(f"  filter: {self.filter}")
        if self._data.get("edited"):
            lines.append(f"  edits: {self.edited:,} job(s) get a new payload, tags or priority")
        for dim, counts in self._breakdowns():
            shown = ", ".join(f"{k} {v:,}" for k, v in list(counts.items())[:8])
            more = f" (+{len(counts) - 8} more)" if len(counts) > 8 else ""
            lines.append(f"  by {dim}: {shown}{more}")
        sample = self.sample
        if not sample.empty:
            cols = [c for c in SAMPLE_COLUMNS if c in sample.columns]
            lines.append("  sample:")
            text = sample[cols].to_string(index=False, max_colwidth=60)
            lines.extend("    " + ln for ln in text.splitlines())
        if self.state in ("ready", "running"):
            lines.append("  run it with plan.execute()")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        esc = html.escape
        parts = [
            f"<div><b>{esc(self._headline())}</b><br><small>{esc(self._progress_line())}</small>",
        ]
        if self._data.get("filter"):
            parts.append(f"<br><small>filter: <code>{esc(str(self.filter))}</code></small>")
        if self._data.get("edited"):
            parts.append(
                f"<br><small>edits: {self.edited:,} job(s) get a new payload, tags or priority</small>"
            )
        tables = []
        for dim, counts in self._breakdowns():
            rows = "".join(
                f"<tr><td>{esc(str(k))}</td><td>{v:,}</td></tr>" for k, v in list(counts.items())[:12]
            )
            tables.append(
                f"<table style='display:inline-block;vertical-align:top;margin-right:1em'>"
                f"<thead><tr><th>{esc(dim)}</th><th>jobs</th></tr></thead><tbody>{rows}</tbody></table>"
            )
        parts.append("<div>" + "".join(tables) + "</div>")
        sample = self.sample
        if not sample.empty:
            cols = [c for c in SAMPLE_COLUMNS if c in sample.columns]
            parts.append(
                "<details open><summary>sample</summary>" + sample[cols].to_html(index=False) + "</details>"
            )
        if self.state in ("ready", "running"):
            parts.append("<small>Run it with <code>plan.execute()</code>.</small>")
        parts.append("</div>")
        return "".join(parts)


def unfinished_canary(got: dict[str, Any], watch: float) -> str:
    """Why a canary none of whose jobs finished within its watch halts the plan, told by where they are:
    still running (slow handlers: a longer watch would do), or never picked up (no worker for them)."""
    acted, running = got["acted"], got["running"]
    waiting = got["waiting"] + got["retrying"]
    if running:
        return (
            f"none of the {acted:,} canary jobs finished within {watch:g}s: {running:,} are still running "
            f"(picked up by workers, heartbeating) and {waiting:,} waiting; the handlers take longer than "
            "the watch: watch longer (watch=, --watch) to judge them"
        )
    return (
        f"none of the {acted:,} canary jobs finished within {watch:g}s and none was picked up by a worker: "
        "is a worker running for their queue (or is the queue paused)?"
    )


class _Keepalive:
    """Keeps a run's lease on its plan while it waits (pace, canary watch): renewed at least every third
    of its time to live. Without a holder it only sleeps."""

    def __init__(self, backend: PlanBackend, plan_id: str, holder: str | None, ttl: float) -> None:
        self.backend, self.plan_id, self.holder, self.ttl = backend, plan_id, holder, ttl
        self.last = time.monotonic()

    def renewed(self) -> None:
        self.last = time.monotonic()

    def sleep(self, seconds: float) -> None:
        end = time.monotonic() + max(0.0, seconds)
        while True:
            now = time.monotonic()
            if self.holder is not None and now - self.last >= self.ttl / 3:
                self.backend._plan_lease(self.plan_id, self.holder, self.ttl, None)
                self.last = now
            left = end - now
            if left <= 0:
                return
            time.sleep(min(left, self.ttl / 3 if self.holder is not None else left, 1.0))


@dataclass
class _Pacing:
    """The canary, failure guard and rate limit of one paced `Plan.execute` call (validated on creation;
    `active` is False for a plain execution)."""

    plan: Plan
    canary: int
    watch: float
    max_failure_rate: float | None
    rate: float | None
    guard_window: int
    poll: float
    keepalive: _Keepalive | None = None

    def __post_init__(self) -> None:
        canary, max_failure_rate, rate = self.canary, self.max_failure_rate, self.rate
        if not isinstance(canary, int) or isinstance(canary, bool) or canary < 0:
            raise errors.ValidationError("canary must be a number of chunks (0 or more)", field="canary")
        if max_failure_rate is not None and not 0 <= max_failure_rate <= 1:
            raise errors.ValidationError("max_failure_rate must be between 0 and 1", field="max_failure_rate")
        if rate is not None and not rate > 0:
            raise errors.ValidationError("rate must be above 0 jobs per second", field="rate")
        if not self.watch > 0:
            raise errors.ValidationError("watch must be above 0 seconds", field="watch")
        if not self.poll > 0:
            raise errors.ValidationError("poll must be above 0 seconds", field="poll")
        if not isinstance(self.guard_window, int) or self.guard_window < 1:
            raise errors.ValidationError("guard_window must be 1 or more chunks", field="guard_window")
        if (canary or max_failure_rate is not None) and self.plan.action != "resurrect":
            field_name = "canary" if canary else "max_failure_rate"
            raise errors.ValidationError(
                f"a {self.plan.action} plan has no outcomes to watch; canary and max_failure_rate are for "
                "resurrect plans",
                field=field_name,
            )
        if canary and max_failure_rate is None:
            self.max_failure_rate = DEFAULT_MAX_FAILURE_RATE

    @property
    def active(self) -> bool:
        return bool(self.canary or self.max_failure_rate is not None or self.rate is not None)

    def after_chunk(self, ran: list[int], done: int) -> None:
        """Called after each chunk this call ran (while more remain): watch the canary or run the guard.
        The rate is the plan's own and kept by the database (the next chunk waits its turn)."""
        if self.canary and len(ran) == self.canary:
            self._watch_canary(ran)
        elif self.max_failure_rate is not None and len(ran) > self.canary:
            window = ran[self.canary :][-self.guard_window :]
            self._guard(min(window), max(window))

    def _watch_canary(self, ran: list[int]) -> None:
        lo, hi = min(ran), max(ran)
        deadline = time.monotonic() + self.watch
        while True:
            got = self.plan.outcomes(lo, hi)
            unsettled = got["waiting"] + got["retrying"] + got["running"]
            if not unsettled or time.monotonic() >= deadline:
                break
            pause = min(self.poll, max(0.0, deadline - time.monotonic()))
            if self.keepalive is not None:
                self.keepalive.sleep(pause)
            else:
                time.sleep(pause)
        if not got["settled"] and got["acted"]:
            self._halt(got, unfinished_canary(got, self.watch))
        self._judge(got, "canary")

    def _guard(self, lo: int, hi: int) -> None:
        got = self.plan.outcomes(lo, hi)
        # The newest chunk of the window has had little time; half the window settled is enough to judge.
        if got["settled"] and got["settled"] >= min(GUARD_MIN_SETTLED, got["acted"] // 2):
            self._judge(got, "guard")

    def _judge(self, got: dict[str, Any], what: str) -> None:
        assert self.max_failure_rate is not None
        rate = got["failure_rate"]
        if rate is not None and rate > self.max_failure_rate:
            reasons = ", ".join(f"{k} {v:,}" for k, v in got["failed_by_reason"].items())
            self._halt(
                got,
                f"{what}: {got['failed']:,} of {got['settled']:,} finished jobs of chunks "
                f"{got['from_chunk']}-{got['to_chunk']} failed again ({rate:.0%} > "
                f"{self.max_failure_rate:.0%}; {reasons})",
            )

    def _halt(self, got: dict[str, Any], why: str) -> None:
        plan = self.plan.refresh()
        raise errors.PlanHalted(
            f"plan {plan.id} halted after {plan.chunks_done} of {plan.chunks} chunk(s): {why}. "
            f"{plan.remaining:,} job(s) were not touched; look at plan.outcomes(), then resume with "
            "plan.execute() or drop the rest with plan.discard()",
            plan=plan,
            outcomes=got,
        )
