"""Freezes of plans in the making, and the reclaim of the ones whose process died (no orphan plan rows).

Freezing a large plan writes its items in many short transactions before the plan row exists (so no one
sees a half-frozen plan). A `plan_freezes` row says those items belong to a plan in the making: it is
written before the first batch, beaten before every batch, and deleted in the transaction that creates
the plan. A freeze not beaten for ORPHAN_GRACE_S is abandoned (its process was killed, or lost its
database): `reclaim_orphans` takes it (state `reclaiming`, so a late freezer can no longer seal it),
deletes its items in batches and audits what it removed (`plan_reclaim`). Every plan creation and every
retention pass reclaims; `chokaq plans ls --orphans` (GET /plans/orphans) lists what is left.
"""

from __future__ import annotations

import logging
from typing import Any

from chokaq_ops import errors
from chokaq_ops.storage.database import Database

log = logging.getLogger("chokaq.plans")

# A freeze beats before each batch (a batch takes well under a second); silent this long, it is dead.
ORPHAN_GRACE_S = 600.0
RECLAIM_ACTOR = "chokaq:reclaim"


class PlanFreezes:
    def __init__(self, db: Database) -> None:
        self.db = db

    def begin(self, plan_id: str, actor: str) -> None:
        self.db.run("plan_freeze_begin", plan_id=plan_id, actor=actor)

    def beat(self, plan_id: str) -> None:
        """Called before each batch: raises when the freeze was reclaimed meanwhile (the caller stops)."""
        if not self.db.run("plan_freeze_beat", plan_id=plan_id):
            raise errors.InvalidState(
                f"plan {plan_id} was silent for more than {ORPHAN_GRACE_S:g}s while freezing and its items "
                "were reclaimed; freeze it again"
            )

    def list_orphans(self, *, grace_s: float = ORPHAN_GRACE_S) -> list[dict[str, Any]]:
        """Freezes in progress and abandoned ones not reclaimed yet: plan_id, actor, state (freezing or
        reclaiming), started_at, beat_at, items (rows held), abandoned (bool)."""
        rows = self.db.run("plan_freezes", write=False, grace_s=float(grace_s))
        return [{**r, "items": int(r["items"]), "abandoned": bool(r["abandoned"])} for r in rows]

    def reclaim_orphans(self, *, grace_s: float = ORPHAN_GRACE_S) -> list[dict[str, Any]]:
        """Reclaim every abandoned freeze: [{plan_id, actor, items}] of what was removed."""
        out = []
        for freeze in self.list_orphans(grace_s=grace_s):
            if freeze["abandoned"]:
                done = self.reclaim(freeze["plan_id"], grace_s=grace_s, why="abandoned")
                if done is not None:
                    out.append(done)
        return out

    def reclaim(self, plan_id: str, *, grace_s: float, why: str) -> dict[str, Any] | None:
        """Take one freeze (when silent for `grace_s`; 0 for a freeze of this process that failed) and
        delete its items in batches. None when it is not reclaimable (sealed, alive, or taken by another)."""
        taken = self.db.run("plan_freeze_reclaim", plan_id=plan_id, grace_s=float(grace_s))
        if not taken:
            return None
        removed = 0
        for rows in self.db.run_batches("plan_drop_items", count=_dropped, plan_id=plan_id):
            removed += _dropped(rows)
        started = taken[0]["started_at"]
        details = {
            "why": why,
            "items": removed,
            "freeze_actor": taken[0]["actor"],
            "started_at": started.isoformat() if hasattr(started, "isoformat") else started,
        }
        self.db.run("plan_freeze_end", plan_id=plan_id, actor=RECLAIM_ACTOR, count=removed, details=details)
        if removed:
            log.warning(
                "plan %s: reclaimed %d item(s) of a freeze that never finished (%s)", plan_id, removed, why
            )
        return {"plan_id": plan_id, "actor": taken[0]["actor"], "items": removed}


def _dropped(rows: list[dict[str, Any]]) -> int:
    return int(rows[0]["n"]) if rows else 0
