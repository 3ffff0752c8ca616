"""The circuit breaker's storage (docs/circuits.md): one row per job type in `circuits`, shared by every
worker. Workers report counted failures and probe successes in sets (one statement per completer flush
and kind), ask for half-open probe permits in one statement per start batch, and re-read the circuits
that are not closed once per Circuit.RefreshInterval; operators force circuits open or closed, audited."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chokaq_ops import errors, validation
from chokaq_ops.models import Actor
from chokaq_ops.storage.audit import person
from chokaq_ops.storage.database import Database
from chokaq_ops.storage.inputs import required_text

CIRCUIT_STATES = ("closed", "open")  # what an operator may force


class CircuitOps:
    def __init__(self, db: Database) -> None:
        self.db = db

    def circuit_failures(self, items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Counted failures per type: items {type, n, threshold, window_s, break_s, half_open}. Returns the
        circuits after the report (`prev_state` differs from `state` where this report changed it)."""
        if not items:
            return []
        return _decode(self.db.run("circuit_failures", items=[dict(i) for i in items]))

    def circuit_successes(self, items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Succeeded jobs of half-open circuits: items {type, n}."""
        if not items:
            return []
        return _decode(self.db.run("circuit_successes", items=[dict(i) for i in items]))

    def circuit_probe(self, items: Sequence[Mapping[str, Any]]) -> set[str]:
        """Ask one probe permit for each type (items {type, probe_timeout_s}); the types granted one."""
        if not items:
            return set()
        return {r["type"] for r in self.db.run("circuit_probe", items=[dict(i) for i in items])}

    def circuit_states(self) -> list[dict[str, Any]]:
        """Every circuit that is not closed (a worker's gate)."""
        return _decode(self.db.run("circuit_states", write=False))

    def list_circuits(self) -> list[dict[str, Any]]:
        return _decode(self.db.run("list_circuits", write=False))

    def get_circuit(self, type_key: str) -> dict[str, Any]:
        type_key = required_text(type_key, "type", max_len=validation.MAX_TYPE)
        for row in self.list_circuits():
            if row["type"] == type_key:
                return row
        raise errors.JobNotFound(f"no circuit for type {type_key} (it never failed and was never forced)")

    def set_circuit(self, type_key: str, state: str, *, actor: Actor) -> dict[str, Any]:
        """Force a type's circuit open (it stays open, no probes, until closed) or closed (its failure
        count cleared). The audit row commits with the change."""
        actor = person(actor)
        type_key = required_text(type_key, "type", max_len=validation.MAX_TYPE)
        if state not in CIRCUIT_STATES:
            raise errors.ValidationError(f"state must be one of {', '.join(CIRCUIT_STATES)}", field="state")
        rows = self.db.run("set_circuit", type=type_key, state=CIRCUIT_STATES.index(state), actor=actor.name)
        return _decode(rows)[0]

    def defer(self, worker_id: str, job_ids: Sequence[str], delay_s: float) -> list[str]:
        """Jobs an open circuit met at their start (processing under this worker, user code not run):
        back to pending after `delay_s`, the attempt the start counted taken back."""
        if not job_ids:
            return []
        rows = self.db.run("defer", worker_id=worker_id, ids=list(job_ids), delay_s=float(delay_s))
        return [r["id"] for r in rows]


def _decode(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for r in rows:
        r["forced"] = bool(r["forced"])
        if r.get("open_for_s") is not None:
            r["open_for_s"] = round(float(r["open_for_s"]), 3)
    return rows
