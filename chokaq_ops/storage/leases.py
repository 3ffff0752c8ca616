"""Named leases on the database clock: the one process of many that runs a periodic task (rescue,
retention) holds its lease and renews it while it runs."""

from __future__ import annotations

from chokaq_ops.storage.database import Database


class Leases:
    def __init__(self, db: Database) -> None:
        self.db = db

    def try_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        """Take or renew a named lease on the database clock; True when `holder` has it."""
        return bool(self.db.run("try_lease", name=name, holder=holder, ttl_s=float(ttl_s)))

    def release_lease(self, name: str, holder: str) -> None:
        self.db.run("release_lease", name=name, holder=holder)
