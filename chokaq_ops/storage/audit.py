"""Who an operator action is audited as, and the audit row written inside the action's transaction."""

from __future__ import annotations

from typing import Any

from chokaq_ops import validation
from chokaq_ops.models import Actor
from chokaq_ops.storage.inputs import required_text


def checked_actor(actor: Actor) -> Actor:
    """The actor validated (a bare name is accepted), plan id kept: plan operations audit under it."""
    name = required_text(
        actor.name if isinstance(actor, Actor) else actor, "actor", max_len=validation.MAX_ACTOR
    )
    plan = validation.text(
        getattr(actor, "plan_id", None), "plan_id", max_len=validation.MAX_ID, required=False
    )
    return Actor(name=name, plan_id=plan)


def person(actor: Actor) -> Actor:
    """The actor of a direct (non-plan) operation. A plan id on an audit row must name one of the server's
    own plans, and only the plan executor (PlanOps) writes those; a caller-supplied one is dropped here."""
    return Actor(name=checked_actor(actor).name, plan_id=None)


def audit_in(
    tx: Any, actor: Actor, action: str, *, job_id: str | None = None, count: int = 1, details: Any = None
) -> None:
    """One audit row inside the caller's transaction `tx`, so it commits or rolls back with the change."""
    tx.run(
        "audit_one",
        actor=actor.name,
        action=action,
        job_id=job_id,
        plan_id=actor.plan_id,
        count=count,
        details=details,
    )
