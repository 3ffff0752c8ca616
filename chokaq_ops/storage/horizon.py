"""The snapshot horizon: which database session holds back the oldest snapshot (vacuum cannot remove row
versions newer than it, so dead rows pile up in the queue's tables while it is held).

One small interface, `oldest_snapshot(db)`, for whoever needs it: the `horizon_held` alert rule
(docs/alerts.md) and the readiness check. PostgreSQL reads `pg_stat_activity` (`backend_xmin`, the
transaction's age, who holds it); SQLite has no server-side snapshots to name and answers None.
`horizon()` adds what else holds it: replication slots with an xmin, prepared transactions, and on SQLite
the write-ahead log (storage/wal.py). `HorizonOps.end_session` cancels, then ends, the holder's session
(docs/endurance.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class SnapshotHolder:
    age_s: float  # how long its transaction (or statement) has run: the snapshot's age
    pid: int | None = None
    application: str | None = None
    user: str | None = None
    client: str | None = None
    state: str | None = None
    xid_age: int | None = None  # transactions since its xmin
    query: str | None = None  # the head of its current or last statement (up to 200 characters)
    backend_type: str | None = None


def oldest_snapshot(db: Any) -> SnapshotHolder | None:
    """The oldest snapshot holder of the database `db` (a Store or a Database) besides the caller, or None
    when nobody holds one (always None on SQLite)."""
    rows = db.run("oldest_snapshot", write=False)
    if not rows or rows[0].get("pid") is None:
        return None
    return _holder(rows[0])


@dataclass(frozen=True, slots=True)
class Horizon:
    """What holds vacuum back in this database: the oldest snapshot's session, replication slots with an
    xmin, prepared transactions (PostgreSQL); on SQLite the write-ahead log and whether a reader pins it."""

    holder: SnapshotHolder | None
    slots: tuple[dict[str, Any], ...] = ()
    prepared: tuple[dict[str, Any], ...] = ()
    wal: dict[str, Any] | None = None

    def age_s(self) -> float:
        """How long the horizon has been held: the oldest snapshot's or prepared transaction's age."""
        ages = [self.holder.age_s] if self.holder else []
        ages += [float(p["age_s"] or 0.0) for p in self.prepared]
        return max(ages, default=0.0)

    def to_dict(self) -> dict[str, Any]:
        holder = None
        if self.holder is not None:
            h = self.holder
            holder = {
                "pid": h.pid,
                "application": h.application,
                "user": h.user,
                "client": h.client,
                "state": h.state,
                "transaction_age_seconds": round(h.age_s, 1),
                "xid_age": h.xid_age,
                "query": h.query,
                "backend_type": h.backend_type,
            }
        return {
            "held_seconds": round(self.age_s(), 1),
            "oldest_snapshot": holder,
            "replication_slots": list(self.slots),
            "prepared_transactions": list(self.prepared),
            "wal": self.wal,
        }


def horizon(db: Any, wal: dict[str, Any] | None = None) -> Horizon:
    """The horizon report of `db` (a Store or a Database); `wal`: the SQLite log's state (Store.wal)."""
    slots = tuple(
        {
            "slot_name": r["slot_name"],
            "slot_type": r["slot_type"],
            "active": bool(r["active"]),
            "database": r["database"],
            "xmin_age": None if r["xmin_age"] is None else int(r["xmin_age"]),
            "catalog_xmin_age": None if r["catalog_xmin_age"] is None else int(r["catalog_xmin_age"]),
        }
        for r in db.run("horizon_slots", write=False)
    )
    prepared = tuple(
        {
            "gid": r["gid"],
            "owner": r["owner"],
            "age_s": round(float(r["age_s"] or 0.0), 1),
            "xid_age": r["xid_age"],
        }
        for r in db.run("horizon_prepared", write=False)
    )
    return Horizon(holder=oldest_snapshot(db), slots=slots, prepared=prepared, wal=wal)


class HorizonOps:
    """The Store's part for the horizon: the report, and ending the session that holds it."""

    def __init__(self, db: Any, wal: Any) -> None:
        self.db = db
        self.wal = wal

    def horizon(self) -> Horizon:
        return horizon(self.db, self.wal.state())

    def session(self, pid: int) -> SnapshotHolder | None:
        """A client session of this database by pid (None: no such session, or SQLite)."""
        rows = self.db.run("horizon_session", write=False, pid=int(pid))
        if not rows or rows[0].get("pid") is None:
            return None
        return _holder(rows[0])

    def end_session(
        self, pid: int, *, actor: Any, reason: str | None = None, grace_s: float = 2.0
    ) -> dict[str, Any]:
        """Release the horizon session `pid` holds: cancel its statement (pg_cancel_backend); if after
        `grace_s` it still holds a snapshot (a notebook idle in its transaction has no statement to
        cancel), end the session (pg_terminate_backend), which rolls its transaction back. Each signal
        writes its audit row (actions cancel_session, terminate_session). Raises JobNotFound when `pid` is
        no client session of this database."""
        from chokaq_ops import errors
        from chokaq_ops.storage.audit import audit_in, person

        who = person(actor)
        steps: list[str] = []
        for terminate in (False, True):
            target = self.session(pid)
            if target is None:
                if not steps:
                    raise errors.JobNotFound(f"no session {pid} of this database to cancel", field="pid")
                break
            action = "terminate_session" if terminate else "cancel_session"
            # Committed first: the signal cannot be rolled back with it.
            self.db.transaction(
                lambda tx, t=target, a=action: audit_in(tx, who, a, details=_audited(t, reason))
            )
            self.db.run("signal_session", pid=int(pid), terminate=terminate)
            steps.append("terminate" if terminate else "cancel")
            deadline = time.monotonic() + (5.0 if terminate else grace_s)
            while time.monotonic() < deadline:
                held = self.session(pid)
                if held is None or held.xid_age is None:
                    return {"pid": int(pid), "signals": steps, "released": True}
                time.sleep(0.1)
        return {"pid": int(pid), "signals": steps, "released": self.session(pid) is None}


def _audited(t: SnapshotHolder, reason: str | None) -> dict[str, Any]:
    return {
        "pid": t.pid,
        "application": t.application,
        "user": t.user,
        "client": t.client,
        "state": t.state,
        "transaction_age_s": round(t.age_s, 1),
        "query": t.query,
        "reason": reason,
    }


def _holder(r: dict[str, Any]) -> SnapshotHolder:
    return SnapshotHolder(
        age_s=max(0.0, float(r["age_s"] or 0.0)),
        pid=int(r["pid"]),
        application=r.get("application_name") or None,
        user=r.get("user_name"),
        client=r.get("client"),
        state=r.get("state"),
        xid_age=None if r.get("xid_age") is None else int(r["xid_age"]),
        query=r.get("query"),
        backend_type=r.get("backend_type"),
    )
