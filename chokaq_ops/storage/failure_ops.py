"""The failure history: every failed attempt of a job (retried or dead-lettered), kept after the job is
resurrected and succeeds. The rows are written by the failing statements themselves (move_to_dlq,
reschedule, archive_zombies, cancel) in the failure's transaction; this module only reads and prunes."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from chokaq_ops import errors, validation
from chokaq_ops.models import FailureFilter, FailureReason, Status
from chokaq_ops.storage.database import Database
from chokaq_ops.storage.filters import json_list

MAX_FAILURE_PAGE = 10_000
OUTCOMES = ("retry", "dead")


class FailureOps:
    def __init__(self, db: Database) -> None:
        self.db = db

    def failure_history(
        self, flt: FailureFilter, *, limit: int = 1000, after_seq: int | None = None
    ) -> list[dict[str, Any]]:
        """Up to `limit` failed attempts matching `flt`, oldest first (by `seq`), after `after_seq`."""
        if not 1 <= int(limit) <= MAX_FAILURE_PAGE:
            raise errors.ValidationError(f"limit must be between 1 and {MAX_FAILURE_PAGE}", field="limit")
        if flt.outcome is not None and flt.outcome not in OUTCOMES:
            raise errors.ValidationError("outcome must be retry or dead", field="outcome")
        for name in ("failed_from", "failed_to"):
            value = getattr(flt, name)
            if value is not None and value.tzinfo is None:
                raise errors.ValidationError(f"{name} must carry a timezone", field=name)
        # A filter built by hand (GET /jobs/<id>/failures, the toolkit) skipped the grammar's checks: a NUL
        # that PostgreSQL text cannot hold is the caller's error, not the database's.
        for name in ("ids", "queues", "not_queues", "types", "not_types", "fingerprints"):
            for value in getattr(flt, name) or ():
                validation.text(value, name, max_len=validation.MAX_SEARCH)
        return self.db.run(
            "failure_history",
            write=False,
            ids=json_list(flt.ids),
            queues=json_list(flt.queues),
            not_queues=json_list(flt.not_queues),
            types=json_list(flt.types),
            not_types=json_list(flt.not_types),
            reasons=json_list(flt.reasons),
            not_reasons=json_list(flt.not_reasons),
            fingerprints=json_list(flt.fingerprints),
            outcome=flt.outcome,
            failed_from=flt.failed_from,
            failed_to=flt.failed_to,
            after_seq=after_seq,
            limit=int(limit),
        )

    def locate(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        """Where each job is now, in the order given: id, location (hot, archive, dlq or gone), status
        (pending, fetched, processing, succeeded, dead or None), failure_reason (dead jobs), finished_at
        (archived or dead-lettered at). At most MAX_FAILURE_PAGE ids per call."""
        ids = [validation.job_id(i) for i in ids]
        if len(ids) > MAX_FAILURE_PAGE:
            raise errors.ValidationError(f"at most {MAX_FAILURE_PAGE} ids per call", field="ids")
        if not ids:
            return []
        out = []
        for r in self.db.run("locate_jobs", write=False, ids=json.dumps(ids)):
            status = {"archive": "succeeded", "dlq": "dead"}.get(r["location"])
            if r["location"] == "hot":
                status = Status(int(r["hot_status"])).name
            reason = r["failure_reason"]
            out.append(
                {
                    "id": r["id"],
                    "location": r["location"],
                    "status": status,
                    "failure_reason": FailureReason(int(reason)).name if reason is not None else None,
                    "finished_at": r["finished_at"],
                }
            )
        return out

    def register_job_types(self, declared: Mapping[str, bool]) -> None:
        """Record what a worker declares per job type ({type: idempotent}), as it starts."""
        if declared:
            items = [{"type": t, "idempotent": bool(v)} for t, v in sorted(declared.items())]
            self.db.run("register_job_types", types=json.dumps(items))

    def job_types(self) -> list[dict[str, Any]]:
        """Every declared job type: type, idempotent (bool), updated_at (when a worker last said so)."""
        return [{**r, "idempotent": bool(r["idempotent"])} for r in self.db.run("job_types", write=False)]

    def idempotent_types(self) -> list[str]:
        """The job types some worker declared idempotent (@job(idempotent=True)) when it last started."""
        return [r["type"] for r in self.db.run("idempotent_types", write=False)]
