"""HttpClient: the same toolkit over the REST API (docs/api.md), for operators without database access.

The API decides who you are (the token's name is the audit actor) and what you may do (its role). GETs
are retried on connection errors and 5xx answers; a request that changes something is retried only when
the connection could not be made at all (the server never saw it), so nothing is applied twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

import pandas as pd
import requests

from chokaq_ops import errors, validation
from chokaq_ops.analysis import columns as C
from chokaq_ops.analysis.plans import interactive, progress_bar
from chokaq_ops.client.base import (
    QUEUE_COLUMNS,
    BaseClient,
    audit_frame,
    ids_or_conflict,
    records_frame,
)
from chokaq_ops.client.transport import (
    PAGE,
    UNSET,
    Transport,
    aware_times,
    filter_json,
    quote,
    time_text,
    times,
)
from chokaq_ops.filters import archive_filter, dlq_filter, filter_query, hot_filter, parse_time
from chokaq_ops.models import DlqFilter, EnqueueResult, FailureFilter, HotFilter, NewJob
from chokaq_ops.records import JobRecord, job_from_view


class HttpClient(BaseClient):
    """Reads and changes jobs through the REST API with a bearer token."""

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        timeout: float = 60.0,
        retries: int = 3,
        session: requests.Session | None = None,
    ) -> None:
        self.api = Transport(url, token, timeout=timeout, retries=retries, session=session)

    @property
    def base_url(self) -> str:
        return self.api.base_url

    def __repr__(self) -> str:
        return f"HttpClient({self.base_url})"

    def close(self) -> None:
        self.api.close()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _enqueue(self, jobs: list[NewJob], connection: Any) -> list[str]:
        if connection is not None:
            raise errors.ValidationError(
                "a transactional enqueue needs the database: connect() to its URL, not to the API",
                field="connection",
            )
        # One POST /jobs per job, each audited by the API under the token's name like any enqueue there.
        results = []
        for job in jobs:
            body = {
                "type": job.type,
                "payload": job.payload,
                "queue": job.queue,
                "priority": job.priority,
                "tags": job.tags,
                "idempotency_key": job.idempotency_key,
                "id": job.id,
                "delay_seconds": job.delay_seconds,
                "scheduled_at": time_text(job.scheduled_at) if job.scheduled_at else None,
            }
            try:
                created = self.api.post("/jobs", {k: v for k, v in body.items() if v is not None})
                results.append(EnqueueResult(id=created["id"], created=True, status="new"))
            except errors.InvalidState:  # the API's 409 on POST /jobs: the id is used by another job
                results.append(EnqueueResult(id=str(job.id), created=False, status="conflict"))
        return ids_or_conflict(results)

    def _frame(
        self,
        location: str,
        path: str,
        params: dict[str, Any],
        *,
        heavy: bool,
        limit: int | None,
        progress: bool | None,
    ) -> pd.DataFrame:
        show = interactive() if progress is None else progress
        bar = progress_bar(0, 0, f"loading {location}", delay=1.0) if show else None
        pages = []
        try:
            for items in self.api.pages(path, params, limit):
                raw = pd.DataFrame(items)
                if location == "hot" and "last_error" in raw.columns:
                    raw[C.ERROR_DETAILS] = raw.pop("last_error")  # a waiting retry's last error
                pages.append(C.normalise(raw, location, heavy=heavy))
                if bar is not None:
                    bar.update(len(items))
        finally:
            if bar is not None:
                bar.close()
        return C.concat_jobs(pages) if pages else C.empty_jobs(location, heavy=heavy)

    # ------------------------------------------------------------------ frames

    def load_dlq(
        self,
        filters: DlqFilter | None = None,
        *,
        heavy: bool = True,
        limit: int | None = None,
        progress: bool | None = None,
        **kw: Any,
    ) -> pd.DataFrame:
        """Dead jobs as a DataFrame, oldest failure first; filters and columns as `DbClient.load_dlq`.
        Filters are applied by the server (GET /dlq), 1000 rows per request."""
        params = filter_json(dlq_filter(filters, **kw)) | {"sort": "failed_at", "order": "asc"}
        return self._frame("dlq", "/dlq", params, heavy=heavy, limit=limit, progress=progress)

    def iter_dlq(
        self, filters: DlqFilter | None = None, *, heavy: bool = True, **kw: Any
    ) -> Iterator[pd.DataFrame]:
        """`load_dlq` one API page (1000 rows) at a time."""
        params = filter_json(dlq_filter(filters, **kw)) | {"sort": "failed_at", "order": "asc"}
        for items in self.api.pages("/dlq", params, None):
            yield C.normalise(pd.DataFrame(items), "dlq", heavy=heavy)

    def load_archive(
        self, *, heavy: bool = True, limit: int | None = None, progress: bool | None = None, **filters: Any
    ) -> pd.DataFrame:
        """Succeeded jobs as a DataFrame; filters and columns as `DbClient.load_archive`."""
        params = filter_json(archive_filter(filters)) | {"sort": "finished_at", "order": "asc"}
        return self._frame("archive", "/archive", params, heavy=heavy, limit=limit, progress=progress)

    def load_hot(
        self,
        filters: HotFilter | None = None,
        *,
        heavy: bool = True,
        limit: int | None = None,
        progress: bool | None = None,
        **kw: Any,
    ) -> pd.DataFrame:
        """A snapshot of hot jobs; filters and columns as `DbClient.load_hot`."""
        params = filter_json(hot_filter(filters, **kw)) | {"sort": "created_at", "order": "asc"}
        return self._frame("hot", "/jobs", params, heavy=heavy, limit=limit, progress=progress)

    # ------------------------------------------------------------------ jobs

    def get_job(self, job_id: str) -> JobRecord:
        return job_from_view(times(self.api.get(f"/jobs/{quote(job_id)}")))

    def preview(
        self,
        ids: Sequence[str] | None = None,
        *,
        sample: int = 10,
        max_jobs: int | None = None,
        renew: bool | None = None,
        **filters: Any,
    ) -> dict[str, Any]:
        """As `DbClient.preview`; the warnings use the server's Retry.MaxJobAge."""
        body: dict[str, Any] = {"sample": sample}
        body |= {k: v for k, v in (("max_jobs", max_jobs), ("renew", renew)) if v is not None}
        if ids is not None:
            return self.api.post("/dlq/preview", {"ids": list(ids), **body})
        return self.api.post("/dlq/preview", {"filter": filter_json(dlq_filter(**filters)), **body})

    def dlq_page(
        self,
        *,
        sort: str = "failed_at",
        descending: bool = True,
        page: int = 1,
        page_size: int = 50,
        **filters: Any,
    ) -> tuple[list[JobRecord], int]:
        """As `DbClient.dlq_page` (GET /dlq, its total from X-Pagination)."""
        params = filter_json(dlq_filter(**filters))
        params |= {"sort": sort, "order": "desc" if descending else "asc"}
        params |= {"page": page, "page_size": page_size}
        response = self.api.call("GET", "/dlq", params=params)
        meta = json.loads(response.headers.get("X-Pagination") or "{}")
        return [job_from_view(times(i)) for i in response.json()], int(meta.get("total") or 0)

    def audit_rows(
        self,
        *,
        actor: str | None = None,
        action: str | None = None,
        job_id: str | None = None,
        plan_id: str | None = None,
        since: Any = None,
        limit: int = 100,
    ) -> tuple[list[dict[str, Any]], int]:
        """As `DbClient.audit_rows` (GET /audit)."""
        params: dict[str, Any] = {"actor": actor, "action": action, "job_id": job_id, "plan_id": plan_id}
        when = parse_time(since, "since")
        if when is not None:
            params["since"] = time_text(when)
        params = {k: v for k, v in params.items() if v is not None} | {"page_size": limit}
        response = self.api.call("GET", "/audit", params=params)
        meta = json.loads(response.headers.get("X-Pagination") or "{}")
        return [times(r) for r in response.json()], int(meta.get("total") or 0)

    def summary(self, *, top: int = 10, **filters: Any) -> dict[str, Any]:
        """As `DbClient.summary`, with the same types: times are timezone-aware UTC datetimes."""
        return aware_times(self.api.get("/dlq/summary", top=top, **filter_json(dlq_filter(**filters))))

    def _bulk(
        self,
        path: str,
        key: str,
        ids: Sequence[str] | None,
        filters: dict[str, Any],
        max_jobs: int | None,
        progress: bool | None,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, int]:
        """`extra`: body fields every request carries (a resurrect's `renew`)."""
        extra = extra or {}
        if ids is None:
            body: dict[str, Any] = {"filter": filter_json(dlq_filter(**filters)), **extra}
            if max_jobs is not None:
                body["max_jobs"] = max_jobs
            return self.api.post(path, body)
        wanted = validation.ids(list(ids), max_count=10**7)[: max_jobs or None]
        show = interactive() if progress is None else progress
        bar = progress_bar(len(wanted), 0, key) if show else None
        done = batches = 0
        try:
            for start in range(0, len(wanted), validation.MAX_BULK_IDS):
                got = self.api.post(path, {"ids": wanted[start : start + validation.MAX_BULK_IDS], **extra})
                done, batches = done + got[key], batches + got["batches"]
                if bar is not None:
                    bar.update(min(validation.MAX_BULK_IDS, len(wanted) - start))
        finally:
            if bar is not None:
                bar.close()
        return {key: done, "batches": batches}

    def resurrect(
        self,
        ids: Sequence[str] | None = None,
        *,
        edits: dict[str, dict[str, Any]] | None = None,
        max_jobs: int | None = None,
        progress: bool | None = None,
        renew: bool = True,
        label: str | None = None,
        safe_only: bool = False,
        **filters: Any,
    ) -> dict[str, Any]:
        """As `DbClient.resurrect` (`renew`, `safe_only`, a `label` run). Jobs with edits are resurrected
        one request each (POST /dlq/{id}/resurrect); use `plan_resurrect` to edit many."""
        first, filters = self._resurrect_first(
            ids,
            filters,
            label=label,
            edits=edits,
            max_jobs=max_jobs,
            progress=progress,
            renew=renew,
            safe_only=safe_only,
        )
        if first is not None:
            return first
        renewing = {"renew": renew}
        if edits:
            done = 0
            for job_id, fields in edits.items():
                self.api.post(f"/dlq/{quote(job_id)}/resurrect", {**fields, "renew": renew})
                done += 1
            rest = [i for i in ids or () if i not in edits]
            result = (
                self._bulk("/dlq/resurrect", "resurrected", rest, {}, None, progress, renewing)
                if rest
                else {"resurrected": 0, "batches": 0}
            )
            return {"resurrected": result["resurrected"] + done, "batches": result["batches"] + done}
        return self._bulk("/dlq/resurrect", "resurrected", ids, filters, max_jobs, progress, renewing)

    def purge(
        self,
        ids: Sequence[str] | None = None,
        *,
        max_jobs: int | None = None,
        progress: bool | None = None,
        label: str | None = None,
        **filters: Any,
    ) -> dict[str, Any]:
        if label is not None:
            return self._labelled_run(
                "purge", ids, filters, label=label, max_jobs=max_jobs, progress=progress
            )
        return self._bulk("/dlq/purge", "purged", ids, filters, max_jobs, progress)

    def purge_archive(self, older_than: Any, *, progress: bool | None = None) -> dict[str, Any]:
        cutoff = parse_time(older_than, "older_than")
        assert cutoff is not None
        got = self.api.post("/archive/purge", {"older_than": time_text(cutoff)})
        if isinstance(got.get("cutoff"), str):
            got["cutoff"] = datetime.fromisoformat(got["cutoff"].replace("Z", "+00:00"))
        return got

    def cancel(self, ids: Sequence[str]) -> dict[str, list[str]]:
        wanted = validation.ids(list(ids), max_count=10**7)
        cancelled: list[str] = []
        skipped: list[str] = []
        for start in range(0, len(wanted), validation.MAX_BULK_IDS):
            got = self.api.post("/jobs/cancel", {"ids": wanted[start : start + validation.MAX_BULK_IDS]})
            cancelled += got["cancelled"]
            skipped += got["skipped"]
        return {"cancelled": cancelled, "skipped": skipped}

    def edit(
        self, job_id: str, *, payload: Any = None, tags: Any = None, priority: int | None = None
    ) -> JobRecord:
        body = {
            k: v for k, v in {"payload": payload, "tags": tags, "priority": priority}.items() if v is not None
        }
        quoted = quote(job_id)
        if self.api.get(f"/jobs/{quoted}")["location"] == "dlq":
            if priority is not None:
                raise errors.ValidationError(
                    "a dead job's priority is set when it is resurrected", field="priority"
                )
            return job_from_view(times(self.api.patch(f"/dlq/{quoted}", body)))
        return job_from_view(times(self.api.patch(f"/jobs/{quoted}", body)))

    # ------------------------------------------------------------------ queues, stats, audit

    def queues(self) -> pd.DataFrame:
        return records_frame(self.api.get("/queues"), QUEUE_COLUMNS, ("updated_at",))

    def queue(self, name: str) -> dict[str, Any]:
        return self.api.get(f"/queues/{quote(name)}")

    def pause(self, name: str) -> dict[str, Any]:
        return self.set_queue(name, paused=True)

    def resume(self, name: str) -> dict[str, Any]:
        return self.set_queue(name, paused=False)

    def set_worker_concurrency(self, worker_id: str, concurrency: int) -> dict[str, Any]:
        """A running worker's handler slots (admin token), applied at its next heartbeat."""
        return self.api.patch(f"/workers/{quote(worker_id)}", {"concurrency": concurrency})

    def set_circuit(self, type_key: str, state: str) -> dict[str, Any]:
        """Force a job type's circuit "open" (until closed) or "closed" (admin token)."""
        return self.api.patch(f"/circuits/{quote(type_key, safe='/')}", {"state": state})

    def set_queue(
        self,
        name: str,
        *,
        paused: bool = UNSET,
        active: bool = UNSET,
        zombie_timeout_seconds: int | None = UNSET,
        max_workers: int | None = UNSET,
    ) -> dict[str, Any]:
        changes = {
            k: v
            for k, v in {
                "paused": paused,
                "active": active,
                "zombie_timeout_seconds": zombie_timeout_seconds,
                "max_workers": max_workers,
            }.items()
            if v is not UNSET
        }
        return self.api.patch(f"/queues/{quote(name)}", changes)

    def stats(self) -> dict[str, Any]:
        return self.api.get("/stats")

    def audit(
        self,
        *,
        actor: str | None = None,
        action: str | None = None,
        job_id: str | None = None,
        plan_id: str | None = None,
        since: Any = None,
        limit: int = 100_000,
    ) -> pd.DataFrame:
        params = {"actor": actor, "action": action, "job_id": job_id, "plan_id": plan_id}
        when = parse_time(since, "since")
        if when is not None:
            params["since"] = time_text(when)
        rows: list[dict[str, Any]] = []
        for items in self.api.pages("/audit", {k: v for k, v in params.items() if v is not None}, limit):
            rows.extend(
                {**i, "details": json.dumps(i["details"]) if i.get("details") is not None else None}
                for i in items
            )
        return audit_frame(rows)

    # ------------------------------------------------------------------ schedules (docs/schedules.md)

    def schedule_rows(
        self, *, type: str | None = None, paused: bool | None = None, source: str | None = None
    ) -> list[dict[str, Any]]:
        """As `DbClient.schedule_rows` (GET /schedules, every page)."""
        params: dict[str, Any] = {"type": type, "source": source}
        if paused is not None:
            params["paused"] = "true" if paused else "false"
        rows: list[dict[str, Any]] = []
        for items in self.api.pages("/schedules", {k: v for k, v in params.items() if v}, None, key="name"):
            rows.extend(_schedule(i) for i in items)
        return rows

    def schedule(self, name: str) -> dict[str, Any]:
        return _schedule(self.api.get(f"/schedules/{quote(name)}"))

    def schedule_run_rows(self, name: str, *, limit: int = 100) -> tuple[list[dict[str, Any]], int]:
        """As `DbClient.schedule_run_rows` (GET /schedules/{name}/runs, its total from X-Pagination)."""
        response = self.api.call("GET", f"/schedules/{quote(name)}/runs", params={"page_size": limit})
        meta = json.loads(response.headers.get("X-Pagination") or "{}")
        return [times(r) for r in response.json()], int(meta.get("total") or 0)

    def create_schedule(self, name: str, type: str, cron: str, **fields: Any) -> dict[str, Any]:
        """As `DbClient.create_schedule` (POST /schedules; admin)."""
        return _schedule(self.api.post("/schedules", {"name": name, "type": type, "cron": cron, **fields}))

    def pause_schedule(self, name: str) -> dict[str, Any]:
        return _schedule(self.api.post(f"/schedules/{quote(name)}/pause"))

    def resume_schedule(self, name: str) -> dict[str, Any]:
        return _schedule(self.api.post(f"/schedules/{quote(name)}/resume"))

    def trigger_schedule(self, name: str) -> dict[str, Any]:
        return times(self.api.post(f"/schedules/{quote(name)}/trigger"))

    def delete_schedule(self, name: str) -> None:
        self.api.call("DELETE", f"/schedules/{quote(name)}")

    # ------------------------------------------------------------------ alerts (docs/alerts.md)

    def alert_rows(self) -> list[dict[str, Any]]:
        return [times(a) for a in self.api.get("/alerts")]

    def alert_receiver_rows(self) -> list[dict[str, Any]]:
        return [times(r) for r in self.api.get("/alerts/receivers")]

    def alert_rule_rows(self) -> list[dict[str, Any]]:
        return [times(r) for r in self.api.get("/alerts/rules")]

    def create_alert_receiver(self, name: str, **fields: Any) -> dict[str, Any]:
        return times(self.api.post("/alerts/receivers", {"name": name, **fields}))

    def update_alert_receiver(self, name: str, **changes: Any) -> dict[str, Any]:
        return times(self.api.patch(f"/alerts/receivers/{quote(name)}", changes))

    def delete_alert_receiver(self, name: str) -> None:
        self.api.call("DELETE", f"/alerts/receivers/{quote(name)}")

    def create_alert_rule(self, name: str, **fields: Any) -> dict[str, Any]:
        return times(self.api.post("/alerts/rules", {"name": name, **fields}))

    def update_alert_rule(self, name: str, **changes: Any) -> dict[str, Any]:
        return times(self.api.patch(f"/alerts/rules/{quote(name)}", changes))

    def delete_alert_rule(self, name: str) -> None:
        self.api.call("DELETE", f"/alerts/rules/{quote(name)}")

    def send_alert_test(self, receiver: str) -> str:
        return str(self.api.post(f"/alerts/receivers/{quote(receiver)}/test")["job_id"])

    # ------------------------------------------------------------------ plans (chokaq_api/resources/plans)

    def _plan_create(
        self,
        action: str,
        *,
        ids: list[str] | None,
        flt: Any,
        edits: dict[str, dict[str, Any]] | None,
        max_jobs: int | None,
        chunk_size: int,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"action": action, "chunk_size": chunk_size}
        if ids is not None:
            body["ids"] = ids
        else:
            body["filter"] = filter_json(flt)
        if edits:
            body["edits"] = edits
        if max_jobs is not None:
            body["max_jobs"] = max_jobs
        return self.api.post("/plans", body)

    def _plan_get(self, plan_id: str) -> dict[str, Any]:
        return self.api.get(f"/plans/{quote(plan_id)}")

    def _plan_chunk(
        self, plan_id: str, spread: float = 0.0, holder: str | None = None
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        # One chunk per request: the client shows progress, and an interrupted client loses nothing.
        body: dict[str, Any] = {"max_chunks": 1} | ({"spread": spread} if spread else {})
        if holder is not None:
            body["holder"] = holder
        got = self.api.post(f"/plans/{quote(plan_id)}/execute", body)
        chunks = got.pop("executed", [])
        wait = got.pop("wait_s", None)
        if not chunks and wait:
            return got, {"wait": float(wait)}
        return got, (chunks[0] if chunks else None)

    def _plan_open(
        self,
        action: str,
        *,
        ids: list[str] | None,
        flt: Any,
        edits: dict[str, dict[str, Any]] | None,
        max_jobs: int | None,
        chunk_size: int,
        label: str | None,
        spec: dict[str, str] | None,
        new: bool,
        renew: bool,
        rate: float | None,
    ) -> tuple[dict[str, Any], bool]:
        body: dict[str, Any] = {"action": action, "chunk_size": chunk_size, "new": new}
        if ids is not None:
            body["ids"] = ids
        elif flt is not None:
            words = filter_json(flt)
            body["filter"] = words
            if not words:
                body["all"] = True
        optional = {"edits": edits, "max_jobs": max_jobs, "label": label, "spec": spec, "rate": rate}
        body |= {k: v for k, v in optional.items() if v is not None}
        if action == "resurrect":
            body["renew"] = renew
        got = self.api.post("/plans", body)
        return got, bool(got.pop("resumed", False))

    def _plan_lease(self, plan_id: str, holder: str, ttl: float, take_from: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {"holder": holder, "ttl": ttl}
        if take_from is not None:
            body["take_from"] = take_from
        return self.api.post(f"/plans/{quote(plan_id)}/lease", body)

    def _plan_release(self, plan_id: str, holder: str) -> None:
        self.api.post(f"/plans/{quote(plan_id)}/release", {"holder": holder})

    def _plan_pace(self, plan_id: str, rate: float | None) -> dict[str, Any]:
        return self.api.post(f"/plans/{quote(plan_id)}/pace", {"rate": rate})

    def _plan_note(self, plan_id: str, event: str, details: dict[str, Any]) -> None:
        self.api.post(f"/plans/{quote(plan_id)}/notes", {"event": event, "details": details})

    def _plan_orphans(self) -> list[dict[str, Any]]:
        return [times(r) for r in self.api.get("/plans/orphans")]

    def _job_types(self) -> list[dict[str, Any]]:
        return [times(r) for r in self.api.get("/job-types")]

    def _plan_items(self, plan_id: str) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for items in self.api.pages(f"/plans/{quote(plan_id)}/items", {}, None):
            rows.extend(items)
        return rows

    def _plan_approve(self, plan_id: str) -> dict[str, Any]:
        return self.api.post(f"/plans/{quote(plan_id)}/approve")

    def _plan_discard(self, plan_id: str) -> dict[str, Any]:
        return self.api.post(f"/plans/{quote(plan_id)}/discard")

    def _plan_outcomes(self, plan_id: str, from_chunk: int | None, to_chunk: int | None) -> dict[str, Any]:
        return self.api.get(f"/plans/{quote(plan_id)}/outcomes", from_chunk=from_chunk, to_chunk=to_chunk)

    def _locate(self, ids: list[str]) -> list[dict[str, Any]]:
        return [times(r) for r in self.api.post("/jobs/locate", {"ids": ids})]

    def _failure_rows(self, flt: FailureFilter, limit: int, after: int | None) -> list[dict[str, Any]]:
        params = {**filter_query(flt), "limit": limit}
        if after is not None:
            params["after_seq"] = after
        return self.api.call("GET", "/failures", params=params).json()

    def _plan_list(
        self, *, state: str | None, action: str | None, limit: int, label: str | None = None
    ) -> list[dict[str, Any]]:
        params = {"state": state, "action": action, "label": label, "page_size": min(limit, PAGE)}
        got = self.api.call("GET", "/plans", params={k: v for k, v in params.items() if v})
        return got.json()


def _schedule(answer: dict[str, Any]) -> dict[str, Any]:
    """A schedule of the API with the types DbClient gives: its times, `next_runs` too, as datetimes."""
    out = times(answer)
    out["next_runs"] = [datetime.fromisoformat(v.replace("Z", "+00:00")) for v in out.get("next_runs") or []]
    return out
