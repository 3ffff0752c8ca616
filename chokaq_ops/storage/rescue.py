"""Rescue sweeps (docs/rescue.md): abandoned fetches and orphaned claims back to pending, expired
heartbeats to the DLQ as Zombie, each in CleanupBatchSize transactions."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from chokaq_ops.storage.database import Database, Tx
from chokaq_ops.storage.worker_ops import report_twins

AUDIT_MAX_IDS = 1000  # ids listed on one audit row of a sweep; `count` has the full number


@dataclass(frozen=True, slots=True)
class Audit:
    """Who asked for an operation that is otherwise unattended (a forced rescue sweep), and its action."""

    actor: str
    action: str


class Rescue:
    def __init__(self, db: Database) -> None:
        self.db = db

    def recover_abandoned(self, timeout_s: float, *, audit: Audit | None = None) -> list[dict[str, Any]]:
        """Fetched jobs untouched for `timeout_s` -> pending, oldest first, in CleanupBatchSize
        transactions. `audit`: an operator asked for this sweep; each batch's audit row (count and ids)
        commits in the same transaction as its moves."""
        start = self._mark("abandoned")
        batches = self.db.run_batches(
            "recover_abandoned",
            cursor=_resume,
            each=self._audit_batches(audit),
            timeout_s=float(timeout_s),
            after_at=start,
        )
        moved = [_moved(r) for rows in batches for r in rows]
        self._remark("mark_abandoned", from_at=start, timeout_s=float(timeout_s))
        return moved

    def recover_orphaned(self, gone_s: float, *, audit: Audit | None = None) -> list[dict[str, Any]]:
        """Fetched jobs of workers whose registry row is older than `gone_s` -> pending at once (user
        code never ran; the attempt count is unchanged), in CleanupBatchSize transactions. `audit`: as
        for recover_abandoned."""
        batches = self.db.run_batches(
            "recover_orphaned", each=self._audit_batches(audit), gone_s=float(gone_s)
        )
        return [r for rows in batches for r in rows]

    def archive_zombies(
        self,
        global_timeout_s: float,
        overrides: Mapping[str, float] | None = None,
        fingerprint: str | None = None,
        within: float | None = None,
        *,
        audit: Audit | None = None,
    ) -> list[dict[str, Any]]:
        """Processing jobs with an expired heartbeat -> DLQ as Zombie. Timeout per job: the queue row's
        zombie_timeout_seconds, else `overrides[queue]` (configuration), else `global_timeout_s`.
        Stalest first, in CleanupBatchSize transactions: a crash between batches leaves each job wholly
        moved or wholly hot. With `within` (seconds), each batch moves only if the server runs it within
        that long of the database time read just before it: a server paused after the sweep decided
        must not judge heartbeats it kept workers from writing (such a batch moves nothing, and the loop
        ends). `audit`: as for recover_abandoned."""

        def decided() -> dict[str, Any]:
            return {"not_after": None if within is None else self.db.now() + timedelta(seconds=within)}

        start = self._mark("zombies")
        timeouts: dict[str, Any] = {
            "global_s": float(global_timeout_s),
            "overrides": {k: float(v) for k, v in (overrides or {}).items()},
        }
        batches = self.db.run_batches(
            "archive_zombies",
            cursor=lambda rows: _resume(rows) | decided(),
            each=self._audit_batches(audit),
            fingerprint=fingerprint,
            after_at=start,
            **timeouts,
            **decided(),
        )
        moved = report_twins("archive_zombies", [_moved(r) for rows in batches for r in rows])
        self._remark("mark_zombies", from_at=start, **timeouts)
        return moved

    def _mark(self, phase: str) -> Any:
        """Where this phase's scan starts (PostgreSQL; None: at the beginning). Each sweep leaves the
        next one a mark after the rows it had to leave (mark_abandoned, mark_zombies): the index entries
        before it belong to jobs that left long ago, dead but kept while any session holds an old
        snapshot, and are walked once, not by every sweep (docs/endurance.md)."""
        if "sweep_mark" not in self.db.queries:
            return None
        rows = self.db.run("sweep_mark", write=False, phase=phase)
        return rows[0]["mark_at"] if rows else None

    def _remark(self, query: str, **params: Any) -> None:
        if query in self.db.queries:
            self.db.run(query, **params)

    @staticmethod
    def _audit_batches(audit: Audit | None) -> Callable[[Tx, list[dict[str, Any]]], None] | None:
        """What writes a sweep phase's audit rows inside each batch's transaction: one per batch that
        moved jobs, and one for the phase even when it moved none. None for the scheduled sweep (events,
        no audit rows: no person asked for it)."""
        if audit is None:
            return None
        first = [True]

        def write(tx: Tx, rows: list[dict[str, Any]]) -> None:
            if not rows and not first[0]:
                return
            first[0] = False
            tx.run(
                "audit_one",
                actor=audit.actor,
                action=audit.action,
                job_id=None,
                plan_id=None,
                count=len(rows),
                details={
                    "ids": [r["id"] for r in rows[:AUDIT_MAX_IDS]],
                    "truncated": len(rows) > AUDIT_MAX_IDS,
                },
            )

        return write


def _resume(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Where a rescue batch ended (PostgreSQL reports it as `last_at`; SQLite needs no cursor)."""
    return {"after_at": max((r["last_at"] for r in rows if r.get("last_at") is not None), default=None)}


def _moved(row: dict[str, Any]) -> dict[str, Any]:
    row.pop("last_at", None)
    return row
