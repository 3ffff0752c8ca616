"""Upkeep (PostgreSQL): the queue's churning tables kept small without relying on the server's autovacuum.

Every job leaves dead row versions in `jobs_hot` and in the counters' tables. Autovacuum removes them when
it runs, but it may be off (a CI or bench server), slow to start (one minute between rounds, three workers
for every database of the server) or busy elsewhere; and once a long snapshot ends, VACUUM empties the
pages it kept but never gives index pages back, so `jobs_hot`'s indexes stay the size the snapshot made
them. Every UPKEEP_INTERVAL_S one hosting process (lease "upkeep") reads the tables' statistics
(`upkeep_tables`) and:

- VACUUMs (SKIP_LOCKED) a table with at least VACUUM_MIN_DEAD dead versions when a vacuum could remove
  them: nobody holds a snapshot, or the oldest one began after the table's last vacuum. While a holder
  keeps everything since, it does nothing (a vacuum would only read the table);
- rebuilds `jobs_hot`'s indexes (REINDEX TABLE CONCURRENTLY: writes go on) when no snapshot is older
  than REINDEX_MAX_HORIZON_S (the rebuild waits for older ones, and takes only the versions they may
  see) and they take more than REINDEX_MIN_BYTES and more than REINDEX_BYTES_PER_ROW per live row; at
  most once per REINDEX_GAP_S. A rebuild that was interrupted leaves invalid copies, dropped before the
  next one.

`Storage.Upkeep = false` turns it off (docs/endurance.md "Upkeep"). SQLite keeps no dead versions.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from chokaq_ops.engine.rescue import default_holder, lease_ttl

if TYPE_CHECKING:
    from chokaq_ops.storage import Store

log = logging.getLogger("chokaq.upkeep")

LEASE = "upkeep"
UPKEEP_INTERVAL_S = 15.0
# The migrations' per-table autovacuum threshold (docs/endurance.md "Per-table autovacuum").
VACUUM_MIN_DEAD = 5000
REINDEX_MIN_BYTES = 64 * 2**20
REINDEX_BYTES_PER_ROW = 8 * 2**10
REINDEX_MAX_HORIZON_S = 60.0
REINDEX_GAP_S = 600.0


class Upkeep:
    def __init__(self, store: Store, holder: str | None = None) -> None:
        self.store = store
        self.holder = (holder or default_holder())[:100]
        self.last_reindex_monotonic: float | None = None
        self.vacuums = 0
        self.reindexes = 0
        self.last_error: str | None = None

    @staticmethod
    def applies(store: Store) -> bool:
        return "upkeep_tables" in store.queries

    def run(self, force: bool = False) -> dict[str, Any]:
        """One round: returns {"skipped", "vacuumed": [tables], "reindexed": bool}. Never raises."""
        done: dict[str, Any] = {"skipped": False, "vacuumed": [], "reindexed": False}
        try:
            if not force and not self.store.try_lease(LEASE, self.holder, lease_ttl(UPKEEP_INTERVAL_S)):
                return done | {"skipped": True}
            tables = {r["name"]: r for r in self.store.run("upkeep_tables", write=False)}
            for name, t in tables.items():
                if _dead(t) >= VACUUM_MIN_DEAD and t["removable"]:
                    self._vacuum(name)
                    done["vacuumed"].append(name)
            hot = tables.get("jobs_hot")
            if hot is not None and self._reindex_due(hot):
                self._reindex()
                done["reindexed"] = True
            self.last_error = None
        except Exception as exc:  # the scheduler must keep calling us
            self.last_error = str(exc)
            log.error("upkeep failed; the next round runs on schedule: %s", exc)
        return done

    def _reindex_due(self, hot: dict[str, Any]) -> bool:
        # Not gated on the dead versions: at 2,000 jobs/s each round finds tens of thousands (the churn of
        # 15 s), and the rebuild reads the heap, taking only versions some snapshot may still see.
        if not hot["removable"]:
            return False
        horizon = hot.get("horizon_s")
        if horizon is not None and float(horizon) > REINDEX_MAX_HORIZON_S:
            return False
        if (
            self.last_reindex_monotonic is not None
            and time.monotonic() - self.last_reindex_monotonic < REINDEX_GAP_S
        ):
            return False
        index_bytes = int(hot["index_bytes"] or 0)
        return index_bytes > max(REINDEX_MIN_BYTES, REINDEX_BYTES_PER_ROW * max(0, int(hot["live"] or 0)))

    def _vacuum(self, table: str) -> None:
        started = time.monotonic()
        self.store.db.run_outside_transaction(f"upkeep_vacuum_{table}")
        self.vacuums += 1
        log.info("upkeep: vacuumed %s in %.1fs", table, time.monotonic() - started)

    def _reindex(self) -> None:
        self.last_reindex_monotonic = time.monotonic()
        started = time.monotonic()
        if self.store.run("upkeep_invalid_hot_indexes", write=False):
            self.store.run("upkeep_drop_invalid_hot_indexes")
        self.store.db.run_outside_transaction("upkeep_reindex_jobs_hot")
        self.reindexes += 1
        log.warning(
            "upkeep: rebuilt jobs_hot's indexes in %.1fs (left large by a long snapshot; docs/endurance.md)",
            time.monotonic() - started,
        )


def _dead(t: dict[str, Any]) -> int:
    return int(t["dead"] or 0)
