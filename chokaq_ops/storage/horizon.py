"""The snapshot horizon: which database session holds back the oldest snapshot (vacuum cannot remove row
versions newer than it, so dead rows pile up in the queue's tables while it is held).

One small interface, `oldest_snapshot(db)`, for whoever needs it: the `horizon_held` alert rule
(docs/alerts.md) and the readiness check. PostgreSQL reads `pg_stat_activity` (`backend_xmin`, the
transaction's age, who holds it); SQLite has no server-side snapshots to name and answers None.
Replication slots and prepared transactions, which hold the horizon too, are not read here."""

from __future__ import annotations

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
    r = rows[0]
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
