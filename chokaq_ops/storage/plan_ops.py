"""Bulk-decision plans: a frozen set of jobs for one resurrect / purge / cancel, executed in chunks.

A plan is created from ids (optionally with per-job edits) or a filter; its items are frozen in the
`plan_items` table at once, so later arrivals never join it. Executing claims the lowest unfinished chunk,
acts on exactly those jobs and records the outcome, all in one transaction: a process killed mid-plan
leaves every chunk either wholly done or wholly untouched, and a resumed plan never touches a job twice,
even one that has re-entered the dead-letter queue since. Every audit row carries the plan id.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from chokaq_ops import errors, validation
from chokaq_ops.fingerprint import fingerprint_text
from chokaq_ops.models import Actor, DlqFilter, FailureReason, HotFilter, Status
from chokaq_ops.storage.admin_ops import CANCELLED_FINGERPRINT, resurrected
from chokaq_ops.storage.audit import audit_in, checked_actor
from chokaq_ops.storage.database import Database
from chokaq_ops.storage.filters import dlq_filter_params, filter_json
from chokaq_ops.storage.inputs import edit_payload, required_text
from chokaq_ops.storage.plan_freezes import PlanFreezes
from chokaq_ops.storage.worker_ops import report_twins

log = logging.getLogger("chokaq.plans")

ACTIONS = ("resurrect", "purge", "cancel")
PLAN_CHUNK = 1000  # the rule for bulk moves (docs/api.md): at most 1000 jobs per transaction
SAMPLE_SIZE = 10
MAX_PLAN_JOBS = 10_000_000
# Where a resurrected job can be now (plan_outcomes), in the order a report lists them.
OUTCOME_STATES = ("waiting", "retrying", "running", "succeeded", "failed", "gone")
# A run's lease on a plan lasts this long unless renewed (every chunk it runs renews it; a run that waits
# for its pace or watches a canary renews it as it goes). A run killed by SIGKILL frees it after this.
LEASE_TTL_S = 60.0
MAX_RATE = 1_000_000.0


def new_plan_id() -> str:
    """Sortable and unguessable: creation time, then randomness."""
    return "plan-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(4)


class PlanNotFound(errors.JobNotFound):
    """No such plan."""


class PlanOps:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.freezes = PlanFreezes(db)

    # ------------------------------------------------------------------ creation

    def create_plan(
        self,
        action: str,
        *,
        actor: Actor,
        ids: Sequence[str] | None = None,
        flt: DlqFilter | HotFilter | None = None,
        edits: Mapping[str, Mapping[str, Any]] | None = None,
        max_jobs: int | None = None,
        chunk_size: int = PLAN_CHUNK,
        label: str | None = None,
        spec: Mapping[str, Any] | None = None,
        renew: bool = True,
        rate: float | None = None,
    ) -> dict[str, Any]:
        """Freeze the jobs of a plan and return it (a dry run: nothing moves until it is executed).

        `ids` or `flt` chooses the jobs: dead jobs for resurrect and purge (a `DlqFilter`), pending or
        fetched hot jobs for cancel (a `HotFilter`). Ids not found there now are left out. `edits` maps a
        job id to replacement `payload`/`tags`/`priority` (resurrect only); they are validated here.
        `spec` is the selection as its caller gave it (`selection_spec`): what a label is bound to.
        `renew` (resurrect plans): restart each job's lifetime clock when it is resurrected. `rate`: the
        plan's pace in jobs per second, shared by every process working it."""
        actor = checked_actor(actor)
        renew = _checked_bool(renew, "renew")
        rate = checked_rate(rate)
        if action not in ACTIONS:
            raise errors.ValidationError(f"action must be one of {', '.join(ACTIONS)}", field="action")
        if (ids is None) == (flt is None):
            raise errors.ValidationError("give either ids or a filter", field="ids")
        if max_jobs is not None and (
            isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or not 1 <= max_jobs <= MAX_PLAN_JOBS
        ):
            raise errors.ValidationError(
                f"max_jobs must be a whole number between 1 and {MAX_PLAN_JOBS}", field="max_jobs"
            )
        if not isinstance(chunk_size, int) or not 1 <= chunk_size <= PLAN_CHUNK:
            raise errors.ValidationError(f"chunk_size must be between 1 and {PLAN_CHUNK}", field="chunk_size")
        if edits and action != "resurrect":
            raise errors.ValidationError("only resurrect plans take edits", field="edits")
        label = validation.text(label, "label", max_len=200, required=False)
        hot = action == "cancel"
        if flt is not None and not isinstance(flt, HotFilter if hot else DlqFilter):
            want = "HotFilter" if hot else "DlqFilter"
            raise errors.ValidationError(f"a {action} plan takes a {want}", field="filter")
        items = self._plan_items(ids, edits or {}, max_jobs) if ids is not None else None
        self.freezes.reclaim_orphans()  # a freeze killed earlier leaves nothing behind for long
        plan_id = new_plan_id()
        # The check above made `flt` a HotFilter exactly when the plan is a cancel.
        params: dict[str, Any] = {}
        if isinstance(flt, HotFilter):
            params = self._hot_params(flt)
        elif flt is not None:
            params = dlq_filter_params(flt)
        self.freezes.begin(plan_id, actor.name)
        try:
            total = self._freeze(plan_id, hot, chunk_size, items, params, max_jobs or MAX_PLAN_JOBS)
            details = self.db.transaction(lambda tx: self._preview(tx, plan_id, hot), write=False)
            details["filter"] = filter_json(flt) if flt is not None else None
            details["max_jobs"] = max_jobs
            details["edited"] = sum(1 for i in items or () if _has_edit(i))
            details["spec"] = dict(spec) if spec is not None else None
            if action == "resurrect":
                details["renew"] = renew
            chunks = -(-total // chunk_size)
            seal = {"action": action, "actor": actor.name, "chunk_size": chunk_size, "chunks": chunks}
            what = {"action": action, "filter": details["filter"], "max_jobs": max_jobs, "total": total}
            what |= {
                k: v
                for k, v in (("label", label), ("renew", details.get("renew")), ("rate", rate))
                if v is not None
            }

            def create(tx: Any) -> list[dict[str, Any]]:
                rows = tx.run(
                    "plan_create", id=plan_id, total=total, details=details, label=label, rate=rate, **seal
                )
                if rows:
                    audit_in(tx, Actor(actor.name, plan_id), "plan_create", count=total, details=what)
                return rows

            try:
                plan = self.db.transaction(create)
            except errors.Conflict:
                # The id is new and random: only an attempt of ours whose reply was lost can hold it.
                # Otherwise it is the label: another run sealed an unfinished plan with it meanwhile.
                plan = self.db.run("plan_get", write=False, id=plan_id)
                if not plan:
                    raise LabelTaken(f"an unfinished {action} plan labelled {label!r} exists") from None
            if not plan:
                # No freeze to seal: our own earlier attempt sealed it (its reply was lost), or a reclaim
                # took the freeze (this process was silent too long).
                plan = self.db.run("plan_get", write=False, id=plan_id)
                if not plan:
                    self.freezes.beat(plan_id)  # raises the reclaim's message
                    raise errors.InvalidState(f"plan {plan_id} could not be sealed")
            return _decode(plan[0])
        except BaseException:
            self._drop_unsealed(plan_id)
            raise

    def _freeze(
        self,
        plan_id: str,
        hot: bool,
        chunk_size: int,
        items: list[dict[str, Any]] | None,
        params: dict[str, Any],
        limit: int,
    ) -> int:
        """Write the plan's items in CleanupBatchSize batches, each read and written in short transactions
        of its own: a freeze never holds one snapshot for its whole length, which would keep vacuum (and on
        SQLite the log's checkpoint) back for as long (docs/endurance.md). A filter takes the jobs that
        matched at the freeze's start (`as_of`: failed, or created, by then), walked by a keyset cursor;
        a job that leaves meanwhile is left out. Returns how many were frozen. The plan row does not exist
        yet: nothing can see, approve or run a plan half frozen (docs/maintenance.md)."""
        batch = self.db.cleanup_batch_size
        frozen = seen = 0
        after: dict[str, Any] = {"after_at": None, "after_id": None, "as_of": self.db.now()}
        for start in range(0, len(items) if items is not None else limit, batch):
            started = time.monotonic()
            self.freezes.beat(plan_id)
            if items is not None:
                found = self.db.run(
                    "plan_scan_hot_ids" if hot else "plan_scan_dlq_ids",
                    write=False,
                    items=items[start : start + batch],
                    as_of=after["as_of"],
                )
            else:
                want = min(batch, limit - seen)
                found = self.db.run(
                    "plan_scan_hot_filter" if hot else "plan_scan_dlq_filter",
                    write=False,
                    limit=want,
                    **after,
                    **params,
                )
                if found:
                    after |= {"after_at": found[-1]["key_at"], "after_id": found[-1]["id"]}
            rows = [
                {
                    "ord": seen + n,
                    "id": r["id"],
                    "payload": r.get("payload"),
                    "tags": r.get("tags"),
                    "priority": r.get("priority"),
                }
                for n, r in enumerate(found)
            ]
            seen += len(rows)
            if rows:
                written = self.db.run("plan_add_items", plan_id=plan_id, chunk_size=chunk_size, items=rows)
                frozen += int(written[0]["n"])
            if items is None and len(found) < want:
                break
            self.db.let_writers_in(time.monotonic() - started)
        return frozen

    def _drop_unsealed(self, plan_id: str) -> None:
        """The items a failed freeze wrote, in batches (best effort: what this misses, the freeze's row
        makes an orphan that the next reclaim removes). Never those of a sealed plan (no freeze row)."""
        try:
            self.freezes.reclaim(plan_id, grace_s=0.0, why="the freeze failed")
        except Exception as exc:
            log.error("plan %s: could not remove the items of a failed freeze: %s", plan_id, exc)

    def _plan_items(
        self, ids: Sequence[str], edits: Mapping[str, Mapping[str, Any]], max_jobs: int | None
    ) -> list[dict[str, Any]]:
        wanted = validation.ids(ids, max_count=MAX_PLAN_JOBS)[: max_jobs or None]
        unknown = set(edits) - set(wanted)
        if unknown:
            raise errors.ValidationError(
                f"edits name {len(unknown)} job(s) that are not in the plan, e.g. {sorted(unknown)[0]}",
                field="edits",
            )
        out = []
        for ord_, job_id in enumerate(wanted):
            e = edits.get(job_id) or {}
            bad = set(e) - {"payload", "tags", "priority"}
            if bad:
                raise errors.ValidationError(
                    f"edits for {job_id} may only set payload, tags, priority (not {sorted(bad)[0]})",
                    field="edits",
                )
            out.append(
                {
                    "ord": ord_,
                    "id": job_id,
                    "payload": edit_payload(e.get("payload"), self.db.max_payload_bytes),
                    "tags": validation.tags(e.get("tags")),
                    "priority": validation.priority(e.get("priority")),
                }
            )
        return out

    def _hot_params(self, flt: HotFilter) -> dict[str, Any]:
        if flt.status is not None and flt.status not in (Status.pending, Status.fetched):
            raise errors.ValidationError("only pending or fetched jobs can be cancelled", field="status")
        return {
            "status": int(flt.status) if flt.status is not None else None,
            "queue": validation.text(flt.queue, "queue", max_len=validation.MAX_QUEUE, required=False),
            "type": validation.text(flt.type, "type", max_len=validation.MAX_TYPE, required=False),
            "tag_like": validation.tag_pattern(flt.tag),
            "search_like": validation.like_pattern(flt.search),
        }

    def _preview(self, tx: Any, plan_id: str, hot: bool) -> dict[str, Any]:
        """Counts by reason (or status), queue and type and a sample, taken while the set is frozen."""
        out: dict[str, Any] = {"by_queue": {}, "by_type": {}}
        out["by_status" if hot else "by_reason"] = {}
        for r in tx.run("plan_breakdown_hot" if hot else "plan_breakdown_dlq", plan_id=plan_id):
            value = r["value"]
            if r["dimension"] == "reason":
                value = FailureReason(int(value)).name
            elif r["dimension"] == "status":
                value = Status(int(value)).name
            out[f"by_{r['dimension']}"][value] = int(r["n"])
        for key in list(out):
            out[key] = dict(sorted(out[key].items(), key=lambda kv: (-kv[1], str(kv[0]))))
        sample = []
        for r in tx.run("plan_sample_hot" if hot else "plan_sample_dlq", plan_id=plan_id, limit=SAMPLE_SIZE):
            row = {k: v for k, v in r.items() if k != "error_details"}
            if not hot:
                row["failure_reason"] = FailureReason(int(r["failure_reason"])).name
                row["error"] = error_line(r.get("error_details"))
            else:
                row["status"] = Status(int(r["status"])).name
            sample.append({k: v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()})
        out["sample"] = sample
        return out

    # ------------------------------------------------------------------ reading

    def get_plan(self, plan_id: str) -> dict[str, Any]:
        plan_id = required_text(plan_id, "plan_id", max_len=validation.MAX_ID)
        rows = self.db.run("plan_get", write=False, id=plan_id)
        if not rows:
            raise PlanNotFound(f"no plan with id {plan_id}")
        return _decode(rows[0])

    def list_plans(
        self,
        *,
        state: str | None = None,
        action: str | None = None,
        label: str | None = None,
        page: int = 1,
        page_size: int = 100,
    ) -> tuple[list[dict[str, Any]], int]:
        """Plans, newest first, and how many match."""
        if not isinstance(page, int) or page < 1:
            raise errors.ValidationError("page must be 1 or more", field="page")
        if not isinstance(page_size, int) or not 1 <= page_size <= 1000:
            raise errors.ValidationError("page_size must be between 1 and 1000", field="page_size")
        label = validation.text(label, "label", max_len=200, required=False)
        params = {"state": state, "action": action, "label": label}
        total = int(self.db.run("plan_count", write=False, **params)[0]["n"])
        rows = self.db.run("plan_list", write=False, limit=page_size, offset=(page - 1) * page_size, **params)
        return [_decode(r) for r in rows], total

    def plan_items(self, plan_id: str, *, page: int = 1, page_size: int = 1000) -> list[dict[str, Any]]:
        """The frozen items of a plan in plan order: id (the job id), chunk, ord, done_at, outcome, edits."""
        self.get_plan(plan_id)
        if not isinstance(page_size, int) or not 1 <= page_size <= 100_000:
            raise errors.ValidationError("page_size must be between 1 and 100000", field="page_size")
        return self.db.run(
            "plan_items", write=False, plan_id=plan_id, limit=page_size, offset=(page - 1) * page_size
        )

    def plan_outcomes(
        self, plan_id: str, *, from_chunk: int | None = None, to_chunk: int | None = None
    ) -> dict[str, Any]:
        """Where the jobs a resurrect plan moved (chunks `from_chunk`..`to_chunk`, default all) are now.

        Returns {plan_id, from_chunk, to_chunk, acted, waiting, retrying, running, succeeded, failed,
        gone, failed_by_reason, settled, failure_rate}: `settled` = succeeded + failed, `failure_rate` =
        failed / settled (None before any settled). What a canary and the failure guard of a paced
        execution read; one grouped statement over the plan-order index."""
        plan = self.get_plan(plan_id)
        if plan["action"] != "resurrect":
            raise errors.InvalidState(
                f"plan {plan_id} is a {plan['action']} plan; outcomes are tracked for resurrect plans"
            )
        last = max(plan["chunks"] - 1, 0)
        lo = _chunk_bound(from_chunk, "from_chunk", 0)
        hi = _chunk_bound(to_chunk, "to_chunk", last)
        size = plan["chunk_size"]
        out: dict[str, Any] = {"plan_id": plan_id, "from_chunk": lo, "to_chunk": hi}
        out |= dict.fromkeys(OUTCOME_STATES, 0)
        by_reason: dict[str, int] = {}
        if lo <= hi:
            rows = self.db.run(
                "plan_outcomes",
                write=False,
                plan_id=plan_id,
                from_chunk=lo,
                to_chunk=hi,
                ord_from=lo * size,
                ord_to=(hi + 1) * size - 1,
            )
            for r in rows:
                n = int(r["n"])
                out[r["state"]] += n
                if r["state"] == "failed" and r["reason"] is not None:
                    name = FailureReason(int(r["reason"])).name
                    by_reason[name] = by_reason.get(name, 0) + n
        out["acted"] = sum(out[k] for k in OUTCOME_STATES)
        out["failed_by_reason"] = dict(sorted(by_reason.items(), key=lambda kv: (-kv[1], kv[0])))
        out["settled"] = out["succeeded"] + out["failed"]
        out["failure_rate"] = round(out["failed"] / out["settled"], 4) if out["settled"] else None
        return out

    # ------------------------------------------------------------------ execution

    def execute_plan_chunk(
        self,
        plan_id: str,
        *,
        actor: Actor,
        spread: float = 0.0,
        holder: str | None = None,
        lease_ttl: float = LEASE_TTL_S,
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Run the plan's next chunk in one transaction: claim its items, act on them, record the outcome.

        Returns (plan, chunk) where chunk is {chunk, claimed, done, skipped}, or None when nothing was left
        to run (the plan is then done, or discarded), or {wait: seconds} when the plan's pace (`rate`) does
        not let the next chunk start yet: the caller waits and asks again. The audit rows carry `actor`
        and the plan id. `spread` (seconds): a resurrect plan's jobs are due at times jittered over that
        window. `holder`: the run holding the plan's lease (renewed for `lease_ttl`); a chunk asked for
        while another run holds a live lease raises PlanBusy."""
        actor = checked_actor(actor)
        actor = Actor(actor.name, plan_id)

        def step(tx: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
            rows = tx.run("plan_lock", id=plan_id)
            if not rows:
                raise PlanNotFound(f"no plan with id {plan_id}")
            plan = _decode(rows[0])
            if plan["state"] in ("done", "discarded"):
                return plan, None
            clock = tx.run("plan_clock", id=plan_id)[0]
            left = clock["lease_left_s"]
            if plan["lease_holder"] not in (None, holder) and left is not None and float(left) > 0:
                raise busy(plan, float(left))
            wait = float(clock["wait_s"] or 0.0)
            if plan["rate"] and wait > 0.001:
                return plan, {"wait": round(wait, 3)}
            took = self._claim_and_act(tx, plan, actor, spread)
            if took is None:
                done = tx.run("plan_finish", plan_id=plan_id)
                if done:
                    finished = _decode(done[0])
                    audit_in(
                        tx, actor, "plan_finish", count=int(finished["done"]), details=_progress(finished)
                    )
                return (_decode(done[0]) if done else plan), None
            chunk, size, ord_from, ord_to, moved = took
            paced = len(moved) / float(plan["rate"]) if plan["rate"] else 0.0
            tx.run("plan_paced", id=plan_id, seconds=paced, holder=holder, ttl_s=float(lease_ttl))
            after = _decode(
                tx.run(
                    "plan_chunk_done",
                    plan_id=plan_id,
                    chunk=chunk,
                    moved=moved,
                    ord_from=ord_from,
                    ord_to=ord_to,
                )[0]
            )
            if after["state"] == "done":  # the last chunk: the plan's end is audited with it
                audit_in(tx, actor, "plan_finish", count=int(after["done"]), details=_progress(after))
            return after, {
                "chunk": chunk,
                "claimed": size,
                "done": len(moved),
                "skipped": size - len(moved),
            }

        return self.db.transaction(step)

    def _claim_and_act(
        self, tx: Any, plan: dict[str, Any], actor: Actor, spread: float
    ) -> tuple[int, int, int, int, list[str]] | None:
        """Claim the plan's next chunk and act on its jobs: (chunk, items claimed, their first and last
        order numbers, the ids moved), or None when no chunk was left. A plan that starts here is
        audited as started before its first chunk's jobs."""
        starts = plan["state"] == "ready"
        in_one = _IN_ONE.get(plan["action"]) if self.db.dialect.name == "postgresql" else None
        if in_one is not None:
            if starts and int(plan["total"]) > 0:
                audit_in(tx, actor, "plan_start", count=int(plan["total"]), details=_progress(plan))
            rows = tx.run(in_one, from_chunk=int(plan["chunks_done"]), **_act_params(plan, actor, spread))
            if not rows:
                return None
            head = rows[0]
            # Jobs already back in hot: resurrect's warning for each displaced copy, as in two statements.
            resurrected([{"id": i, "twin": "hot"} for i in json.loads(head["twins"] or "[]")])
            moved = json.loads(head["moved"] or "[]")
            return int(head["chunk"]), int(head["claimed"]), int(head["ord_from"]), int(head["ord_to"]), moved
        claimed = tx.run("plan_claim_chunk", plan_id=plan["id"], from_chunk=int(plan["chunks_done"]))
        if not claimed:
            return None
        if starts:
            audit_in(tx, actor, "plan_start", count=int(plan["total"]), details=_progress(plan))
        ords = [int(r["ord"]) for r in claimed]
        moved = self._act(tx, plan, claimed, actor, spread)
        return int(claimed[0]["chunk"]), len(claimed), min(ords), max(ords), moved

    def _act(
        self, tx: Any, plan: dict[str, Any], claimed: list[dict[str, Any]], actor: Actor, spread: float = 0.0
    ) -> list[str]:
        claimed = sorted(claimed, key=lambda r: r["ord"])
        ids = [r["job_id"] for r in claimed]
        params = _act_params(plan, actor, spread)
        if plan["action"] == "resurrect":
            items = [
                {"id": r["job_id"], "payload": r["payload"], "tags": r["tags"], "priority": r["priority"]}
                for r in claimed
            ]
            return resurrected(tx.run("resurrect", items=items, **params))
        elif plan["action"] == "purge":
            rows = tx.run("purge_dlq", ids=ids, batch=len(ids), **params)
        else:
            rows = tx.run("cancel", ids=ids, fingerprint=CANCELLED_FINGERPRINT, **params)
            report_twins("cancel", rows)
        return [r["id"] for r in rows]

    def approve_plan(self, plan_id: str, *, actor: Actor) -> dict[str, Any]:
        """Four-eyes: record that `actor`, who did not create the plan, approves it. Audited. Approving a
        plan twice (or by a second approver) returns it unchanged; the first approval stands."""
        actor = checked_actor(actor)

        def approve(tx: Any) -> dict[str, Any]:
            rows = tx.run("plan_approve", id=plan_id, actor=actor.name)
            if rows:
                plan = _decode(rows[0])
                what = {"plan_id": plan_id, "action": plan["action"], "total": plan["total"]}
                tx.run(
                    "audit_one",
                    actor=actor.name,
                    action="plan_approve",
                    job_id=None,
                    plan_id=plan_id,
                    count=plan["total"],
                    details=what,
                )
                tx.run(
                    "add_event",
                    kind="plan_approved",
                    message=f"{actor.name} approved plan {plan_id} ({plan['action']} {plan['total']} jobs)",
                    data=what | {"actor": actor.name},
                )
                return plan
            found = tx.run("plan_get", id=plan_id)
            if not found:
                raise PlanNotFound(f"no plan with id {plan_id}")
            plan = _decode(found[0])
            if plan["actor"] == actor.name:
                raise errors.Conflict(
                    f"{actor.name} created plan {plan_id}; a second person must approve it", field="actor"
                )
            if plan["state"] not in ("ready", "running"):
                raise errors.InvalidState(f"plan {plan_id} is {plan['state']}; there is nothing to approve")
            return plan

        return self.db.transaction(approve)

    def plan_by_label(self, action: str, label: str) -> dict[str, Any] | None:
        """The newest unfinished (ready or running) plan of `action` with `label`, or None."""
        label = required_text(label, "label", max_len=200)
        rows = self.db.run("plan_by_label", write=False, action=action, label=label)
        return _decode(rows[0]) if rows else None

    def open_plan(
        self,
        action: str,
        *,
        actor: Actor,
        label: str | None = None,
        spec: Mapping[str, Any] | None = None,
        new: bool = False,
        **create: Any,
    ) -> tuple[dict[str, Any], bool]:
        """The plan a (labelled) run works: `(plan, resumed)`.

        With a `label` that names an unfinished plan of `action`: that plan (`resumed` True, audited
        `plan_resume`), provided the run asks for the selection the label froze (`spec`, as given): a
        different one raises LabelMismatch naming both, unless `new`, which discards the old plan
        (audited) and freezes a new one. A label is bound to its plan until the plan is done or
        discarded. Without a label, or when none is unfinished: a new plan (`create_plan(**create)`)."""
        actor = checked_actor(actor)
        new = _checked_bool(new, "new")
        if action not in ACTIONS:
            raise errors.ValidationError(f"action must be one of {', '.join(ACTIONS)}", field="action")
        if label is None:
            if new:
                raise errors.ValidationError("new goes with a label", field="new")
            return self.create_plan(action, actor=actor, spec=spec, **create), False
        for _ in range(3):
            found = self.plan_by_label(action, label)
            if found is not None:
                if new:
                    self._discard(found["id"], actor, {"replaced": True, "label": label})
                else:
                    bound = found.get("spec")
                    if spec is not None and bound is not None and dict(spec) != bound:
                        raise errors.LabelMismatch(
                            f"label {label!r} is bound to plan {found['id']}, frozen with the selection "
                            f"{describe_spec(bound)}; this run asks for {describe_spec(spec)}. Finish it "
                            f"with the same selection (or none: --label alone resumes it), or start over "
                            f"with --new (discards it)",
                            bound=bound,
                            asked=dict(spec),
                        )
                    self.note_plan(found["id"], "plan_resume", actor=actor, details={"label": label})
                    return self.get_plan(found["id"]), True
            if spec is None:
                raise errors.ValidationError(
                    f"no unfinished {action} plan is labelled {label!r}: give a selection to start one",
                    field="label",
                )
            try:
                return self.create_plan(action, actor=actor, label=label, spec=spec, **create), False
            except LabelTaken:
                continue  # another run sealed one meanwhile: take it as found
        raise errors.Conflict(f"label {label!r} keeps changing hands; try again", field="label")

    # ------------------------------------------------------------------ leases and pace

    def lease_plan(
        self,
        plan_id: str,
        *,
        holder: str,
        actor: Actor,
        ttl: float = LEASE_TTL_S,
        take_from: str | None = None,
    ) -> dict[str, Any]:
        """Take or renew the plan's lease for `holder` (one run at a time works a plan); `take_from`: a
        holder the caller knows is dead (its process is gone) whose lease it may take before it expires.
        Raises PlanBusy when another run holds a live lease, InvalidState when the plan is finished."""
        holder = required_text(holder, "holder", max_len=200)
        who = Actor(checked_actor(actor).name, plan_id)
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 1 <= ttl <= 3600:
            raise errors.ValidationError("ttl must be 1 to 3600 seconds", field="ttl")

        def lease(tx: Any) -> list[dict[str, Any]]:
            before = tx.run("plan_lock", id=plan_id)
            rows = tx.run("plan_lease", id=plan_id, holder=holder, ttl_s=float(ttl), take_from=take_from)
            if rows and before and before[0]["lease_holder"] != holder:
                # Taken, not renewed: who works the plan now is audited (a renewal is not news).
                what = {"holder": holder, "from": before[0]["lease_holder"], "ttl_s": float(ttl)}
                audit_in(tx, who, "plan_lease", count=int(rows[0]["done"]), details=what)
            return rows

        rows = self.db.transaction(lease)
        if rows:
            return _decode(rows[0])
        plan = self.get_plan(plan_id)
        if plan["state"] not in ("ready", "running"):
            raise errors.InvalidState(f"plan {plan_id} is {plan['state']}; there is nothing to work")
        left = self.db.transaction(lambda tx: tx.run("plan_clock", id=plan_id), write=False)[0][
            "lease_left_s"
        ]
        raise busy(plan, float(left or 0.0))

    def release_plan(self, plan_id: str, *, holder: str, actor: Actor) -> bool:
        """Give the lease back (a run ending for any reason but a kill); False when it was not held.
        Audited (`plan_release`) when it was."""
        holder = required_text(holder, "holder", max_len=200)
        who = Actor(checked_actor(actor).name, plan_id)

        def release(tx: Any) -> bool:
            rows = tx.run("plan_release", id=plan_id, holder=holder)
            if rows:
                audit_in(tx, who, "plan_release", count=0, details={"holder": holder})
            return bool(rows)

        return bool(self.db.transaction(release))

    def pace_plan(self, plan_id: str, rate: float | None, *, actor: Actor) -> dict[str, Any]:
        """Set the plan's pace in jobs per second (None: unpaced). The pace belongs to the plan: every
        process working it follows it, so two of them together keep to it. Audited (`plan_pace`) when it
        changes."""
        actor = checked_actor(actor)
        rate = checked_rate(rate)
        before = self.get_plan(plan_id)
        if before["rate"] == rate:
            return before

        def pace(tx: Any) -> dict[str, Any]:
            rows = tx.run("plan_pace", id=plan_id, rate=rate)
            audit_in(
                tx,
                Actor(actor.name, plan_id),
                "plan_pace",
                count=int(before["done"]),
                details={"before": before["rate"], "after": rate},
            )
            return _decode(rows[0])

        return self.db.transaction(pace)

    def note_plan(
        self, plan_id: str, event: str, *, actor: Actor, details: Mapping[str, Any] | None = None
    ) -> None:
        """An audit row for what happened to a plan outside its chunk transactions: `plan_resume` (a run
        picked it up again), `plan_interrupt` (SIGINT/SIGTERM stopped a run between chunks), `plan_halt`
        (a paced run's canary or guard stopped it)."""
        if event not in PLAN_EVENTS:
            raise errors.ValidationError(f"event must be one of {', '.join(PLAN_EVENTS)}", field="event")
        plan = self.get_plan(plan_id)
        actor = Actor(checked_actor(actor).name, plan["id"])
        info = {**_progress(plan), **(details or {})}
        self.db.transaction(lambda tx: audit_in(tx, actor, event, count=int(plan["done"]), details=info))

    def discard_plan(self, plan_id: str, *, actor: Actor) -> dict[str, Any]:
        """Stop a plan for good: its unexecuted chunks will never run. Audited. Idempotent: a discarded
        plan is returned as it is (no second audit row); a done plan cannot be discarded (InvalidState)."""
        actor = checked_actor(actor)
        discarded = self._discard(plan_id, actor, {"plan_id": plan_id})
        if discarded is None:
            plan = self.get_plan(plan_id)
            if plan["state"] == "discarded":
                return plan
            raise errors.InvalidState(
                f"plan {plan_id} is {plan['state']}; only ready or running plans can be discarded"
            )
        return discarded

    def _discard(self, plan_id: str, actor: Actor, details: dict[str, Any]) -> dict[str, Any] | None:
        def discard(tx: Any) -> dict[str, Any] | None:
            rows = tx.run("plan_discard", id=plan_id)
            if rows:
                audit_in(tx, Actor(actor.name, plan_id), "plan_discard", details=details)
            return _decode(rows[0]) if rows else None

        return self.db.transaction(discard)


class LabelTaken(errors.Conflict):
    """Another run sealed an unfinished plan with this label while ours was freezing."""


# PostgreSQL claims a DLQ plan's chunk and acts on it in one statement (sql/postgresql/queries.sql).
_IN_ONE = {"resurrect": "plan_resurrect_chunk", "purge": "plan_purge_chunk"}


def _act_params(plan: Mapping[str, Any], actor: Actor, spread: float) -> dict[str, Any]:
    """The parameters of a chunk's action (resurrect, purge, cancel) beside its jobs: the audit rows'
    actor, plan and details (the plan's filter), and a resurrect's spread and renewal."""
    params: dict[str, Any] = {
        "actor": actor.name,
        "plan_id": actor.plan_id,
        "details": {"filter": plan["filter"]} if plan.get("filter") else None,
    }
    if plan["action"] == "resurrect":
        params.update(spread_s=spread, renew=int(bool(plan.get("renew", True))))
    else:
        params["action"] = "purge_dlq" if plan["action"] == "purge" else "cancel"
    return params


def busy(plan: Mapping[str, Any], seconds_left: float) -> errors.PlanBusy:
    holder = plan.get("lease_holder")
    return errors.PlanBusy(
        f"plan {plan['id']}{_labelled(plan)} is being worked by {holder} (its lease runs {seconds_left:.0f}s "
        "more unless renewed): one run at a time; try again later, or wait for it",
        holder=holder,
        seconds_left=round(seconds_left, 3),
    )


def _labelled(plan: Mapping[str, Any]) -> str:
    return f" (label {plan['label']!r})" if plan.get("label") else ""


def describe_spec(spec: Mapping[str, Any] | None) -> str:
    """A selection as given, for messages: `{queue=billing, reason=Zombie}`."""
    if not spec:
        return "{}"
    return "{" + ", ".join(f"{k}={v}" for k, v in sorted(spec.items())) + "}"


def checked_rate(rate: Any) -> float | None:
    if rate is None:
        return None
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 < rate <= MAX_RATE:
        raise errors.ValidationError(
            f"rate must be above 0 and at most {MAX_RATE:g} jobs per second", field="rate"
        )
    return float(rate)


def _checked_bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise errors.ValidationError(f"{field} must be true or false", field=field)
    return value


def _chunk_bound(value: int | None, field: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise errors.ValidationError(f"{field} must be a chunk number (0 or more)", field=field)
    return value


def _has_edit(item: Mapping[str, Any]) -> bool:
    return any(item.get(k) is not None for k in ("payload", "tags", "priority"))


def error_line(text: str | None) -> str | None:
    """The exception line of stored error text, for a one-line sample."""
    if not text:
        return None
    fp = fingerprint_text(text)
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if fp.exception_type != "Error":
        for line in reversed(lines):
            if line.startswith(fp.exception_type):
                return line[:200]
    return lines[-1][:200] if lines else None


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    """A plan row with its JSON details spread into the plan."""
    out = {k: v for k, v in row.items() if k != "details"}
    details = row.get("details")
    extra = json.loads(details) if isinstance(details, str) and details else {}
    out.update(
        {
            "by_reason": extra.get("by_reason", {}),
            "by_status": extra.get("by_status", {}),
            "by_queue": extra.get("by_queue", {}),
            "by_type": extra.get("by_type", {}),
            "sample": extra.get("sample", []),
            "filter": extra.get("filter"),
            "max_jobs": extra.get("max_jobs"),
            "edited": extra.get("edited", 0),
            "spec": extra.get("spec"),
        }
    )
    if out.get("action") == "resurrect":
        out["renew"] = bool(extra.get("renew", True))
    out["rate"] = float(out["rate"]) if out.get("rate") is not None else None
    for key in ("total", "chunks", "chunks_done", "done", "skipped", "chunk_size"):
        out[key] = int(out.get(key) or 0)
    out["remaining"] = out["total"] - out["done"] - out["skipped"]
    return out


PLAN_EVENTS = ("plan_resume", "plan_interrupt", "plan_halt")


def _progress(plan: Mapping[str, Any]) -> dict[str, Any]:
    """Where a plan stood, for its lifecycle audit rows."""
    return {k: plan.get(k) for k in ("state", "total", "done", "skipped", "chunks", "chunks_done", "label")}
