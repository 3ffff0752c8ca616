"""Bulk-decision plans: freeze a set of jobs, review it, execute it in chunks, resume it after a failure.

A plan is a resumable background-safe operation: its items and progress live in the database, each chunk
is one transaction that claims its items, acts on them and records the outcome, so a request, a client
or the server itself can die at any point and `POST /plans/{id}/execute` continues where it stopped
without touching a job twice. Every audit row carries the plan id and the executing token's name.
"""

from __future__ import annotations

import time
from typing import Any

from flask import g
from flask.views import MethodView

from chokaq_api.auth import actor
from chokaq_api.extensions import Blueprint, ctx, store
from chokaq_api.resources.plans.schemas import (
    CreatePlanSchema,
    ExecutedSchema,
    ExecuteSchema,
    LeaseSchema,
    NotedSchema,
    NoteSchema,
    OpenedSchema,
    OrphanSchema,
    OutcomesQuery,
    OutcomesSchema,
    PaceSchema,
    PlanItemSchema,
    PlanListQuery,
    PlanSchema,
    ReleasedSchema,
    ReleaseSchema,
)
from chokaq_ops import errors

URL = "/plans"
blp = Blueprint(
    "plans", __name__, description="Reviewed bulk decisions: resurrect, purge or cancel in chunks."
)

# Purging is an admin operation everywhere (POST /dlq/purge); a purge plan is too. The route table lets an
# operator reach these routes (resurrect and cancel plans), so the action decides the rest here.
_RANK = {"reader": 0, "operator": 1, "admin": 2}


def require_role_for(action: str) -> None:
    needed = "admin" if action == "purge" else "operator"
    principal = g.principal
    if _RANK[principal["role"]] < _RANK[needed]:
        raise errors.Forbidden(
            f"a {action} plan needs the {needed} role; token {principal['name']!r} is {principal['role']}"
        )


def require_approval(plan: dict[str, Any]) -> None:
    """Four-eyes (Api.PlanApprovalMinJobs): a large plan runs only once someone other than its creator
    approved it."""
    least = ctx().settings.api.plan_approval_min_jobs
    if least and plan["total"] >= least and not plan.get("approved_by") and plan["state"] != "done":
        raise errors.InvalidState(
            f"plan {plan['id']} freezes {plan['total']:,} jobs (Api.PlanApprovalMinJobs is {least:,}): a "
            f"second person must approve it first: POST /plans/{plan['id']}/approve with a token other "
            f"than {plan['actor']!r}"
        )


@blp.route("")
class Plans(MethodView):
    @blp.arguments(PlanListQuery, location="query")
    @blp.response(200, PlanSchema(many=True))
    @blp.paginate()
    def get(self, args: dict[str, Any], pagination_parameters: Any) -> Any:
        """Plans, newest first; filter by state, action and label"""
        rows, total = store().list_plans(
            **args, page=pagination_parameters.page, page_size=pagination_parameters.page_size
        )
        pagination_parameters.item_count = total
        return rows

    @blp.arguments(CreatePlanSchema)
    @blp.response(201, OpenedSchema, description="The frozen plan: a dry run until executed.")
    @blp.alt_response(200, schema=OpenedSchema, description="The label's unfinished plan, resumed.")
    @blp.alt_response(409, response="CONFLICT", description="The label is bound to another selection.")
    def post(self, body: dict[str, Any]) -> Any:
        """Freeze the jobs of a resurrect, purge or cancel plan (by `ids` or `filter`) and preview them;
        with a `label`, resume its unfinished plan instead"""
        require_role_for(body["action"])
        action = body.pop("action")
        label, spec, new = body.pop("label"), body.pop("spec"), body.pop("new")
        if body["ids"] is None and body["flt"] is None:
            body.pop("ids"), body.pop("flt")
        plan, resumed = store().open_plan(action, actor=actor(), label=label, spec=spec, new=new, **body)
        return plan | {"resumed": resumed}, 200 if resumed else 201


@blp.route("/<plan_id>")
class OnePlan(MethodView):
    @blp.response(200, PlanSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    def get(self, plan_id: str) -> Any:
        """One plan with its progress, its counts when frozen and a sample"""
        return store().get_plan(plan_id)


@blp.route("/<plan_id>/execute")
class Execute(MethodView):
    @blp.arguments(ExecuteSchema, required=False)
    @blp.response(200, ExecutedSchema, description="The plan after this request, and the chunks it ran.")
    @blp.alt_response(404, response="NOT_FOUND")
    @blp.alt_response(409, response="CONFLICT", description="The plan was discarded.")
    def post(self, body: dict[str, Any], plan_id: str) -> Any:
        """Run the plan's next chunks (each one transaction of at most 1000 jobs); call again to continue"""
        st = store()
        plan = st.get_plan(plan_id)
        require_role_for(plan["action"])
        if plan["state"] == "discarded":
            raise errors.InvalidState(f"plan {plan_id} was discarded")
        require_approval(plan)
        max_chunks = body.get("max_chunks")
        deadline = time.monotonic() + body.get("max_seconds", 30.0)
        executed: list[dict[str, Any]] = []
        wait = None
        while max_chunks is None or len(executed) < max_chunks:
            plan, chunk = st.execute_plan_chunk(
                plan_id, actor=actor(plan_id), spread=body.get("spread", 0.0), holder=body.get("holder")
            )
            if chunk is None:
                break
            if "wait" in chunk:
                # The plan's pace: a request never sleeps on it; the caller asks again after wait_s.
                wait = chunk["wait"]
                break
            executed.append(chunk)
            if time.monotonic() >= deadline:
                break
        return plan | {"executed": executed, "wait_s": wait}


@blp.route("/<plan_id>/approve")
class Approve(MethodView):
    @blp.response(200, PlanSchema, description="The plan with approved_by and approved_at.")
    @blp.alt_response(404, response="NOT_FOUND")
    @blp.alt_response(
        409, response="CONFLICT", description="The approver created the plan, or the plan is finished."
    )
    def post(self, plan_id: str) -> Any:
        """Approve a plan as a second person (four-eyes); the first approval stands"""
        st = store()
        require_role_for(st.get_plan(plan_id)["action"])
        return st.approve_plan(plan_id, actor=actor(plan_id))


@blp.route("/<plan_id>/discard")
class Discard(MethodView):
    @blp.response(200, PlanSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    @blp.alt_response(409, response="CONFLICT", description="The plan is done or already discarded.")
    def post(self, plan_id: str) -> Any:
        """Stop a plan for good: chunks not yet run never will be"""
        st = store()
        require_role_for(st.get_plan(plan_id)["action"])
        return st.discard_plan(plan_id, actor=actor(plan_id))


@blp.route("/<plan_id>/items")
class Items(MethodView):
    @blp.response(200, PlanItemSchema(many=True))
    @blp.alt_response(404, response="NOT_FOUND")
    @blp.paginate()
    def get(self, plan_id: str, pagination_parameters: Any) -> Any:
        """The plan's frozen jobs in plan order with their chunk and outcome"""
        plan = store().get_plan(plan_id)
        pagination_parameters.item_count = plan["total"]
        return store().plan_items(
            plan_id, page=pagination_parameters.page, page_size=pagination_parameters.page_size
        )


@blp.route("/<plan_id>/outcomes")
class Outcomes(MethodView):
    @blp.arguments(OutcomesQuery, location="query")
    @blp.response(200, OutcomesSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    @blp.alt_response(409, response="CONFLICT", description="Not a resurrect plan.")
    def get(self, args: dict[str, Any], plan_id: str) -> Any:
        """Where the jobs a resurrect plan moved are now: waiting, running, succeeded, failed again"""
        return store().plan_outcomes(plan_id, **args)


@blp.route("/<plan_id>/lease")
class Lease(MethodView):
    @blp.arguments(LeaseSchema)
    @blp.response(200, PlanSchema, description="The plan with lease_holder and lease_until.")
    @blp.alt_response(404, response="NOT_FOUND")
    @blp.alt_response(
        409, response="CONFLICT", description="Another run holds it (field lease), or it is finished."
    )
    def post(self, body: dict[str, Any], plan_id: str) -> Any:
        """Take or renew the plan's lease: one run at a time works a plan (a label's run holds it)"""
        st = store()
        require_role_for(st.get_plan(plan_id)["action"])
        return st.lease_plan(plan_id, actor=actor(plan_id), **body)


@blp.route("/<plan_id>/release")
class Release(MethodView):
    @blp.arguments(ReleaseSchema)
    @blp.response(200, ReleasedSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    def post(self, body: dict[str, Any], plan_id: str) -> Any:
        """Give the plan's lease back (a run that ends for any reason but a kill)"""
        st = store()
        require_role_for(st.get_plan(plan_id)["action"])
        return {"released": st.release_plan(plan_id, holder=body["holder"], actor=actor(plan_id))}


@blp.route("/<plan_id>/pace")
class Pace(MethodView):
    @blp.arguments(PaceSchema)
    @blp.response(200, PlanSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    def post(self, body: dict[str, Any], plan_id: str) -> Any:
        """Set the plan's pace (jobs per second; null: none), kept by every process working it; audited"""
        st = store()
        require_role_for(st.get_plan(plan_id)["action"])
        return st.pace_plan(plan_id, body["rate"], actor=actor(plan_id))


@blp.route("/<plan_id>/notes")
class Notes(MethodView):
    @blp.arguments(NoteSchema)
    @blp.response(200, NotedSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    def post(self, body: dict[str, Any], plan_id: str) -> Any:
        """Record how a run working the plan ended or began (plan_halt, plan_interrupt, plan_resume) in the
        audit log, as the CLI and the Python client do"""
        st = store()
        require_role_for(st.get_plan(plan_id)["action"])
        st.note_plan(plan_id, body["event"], actor=actor(plan_id), details=body["details"])
        return {"plan_id": plan_id, "event": body["event"]}


@blp.route("/orphans")
class Orphans(MethodView):
    @blp.response(200, OrphanSchema(many=True))
    def get(self) -> Any:
        """Plans being frozen, and abandoned freezes not reclaimed yet (their rows are reclaimed by the next
        plan creation or retention pass)"""
        return store().list_orphans()
