"""HttpClient: the same toolkit over the REST API (PRODUCT §5), for operators without database access.

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
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from chokaq_ops import errors, validation
from chokaq_ops.analysis import columns as C
from chokaq_ops.analysis.plans import interactive, progress_bar
from chokaq_ops.client.base import (
    QUEUE_COLUMNS,
    BaseClient,
    archive_filter,
    audit_frame,
    dlq_filter,
    hot_filter,
    parse_time,
    records_frame,
)
from chokaq_ops.models import DlqFilter, HotFilter

API_PREFIX = "/api/v1"
PAGE = 1000  # the API's largest page
_UNSET: Any = object()


def _time_text(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def _filter_json(flt: DlqFilter | HotFilter | dict[str, Any]) -> dict[str, Any]:
    items = flt.items() if isinstance(flt, dict) else ((k, getattr(flt, k)) for k in flt.__dataclass_fields__)
    out: dict[str, Any] = {}
    for key, value in items:
        if value is None:
            continue
        if isinstance(value, datetime):
            value = _time_text(value)
        elif hasattr(value, "name") and not isinstance(value, str):
            value = value.name  # FailureReason, Status
        out[key] = value
    return out


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
        if not token:
            raise errors.ValidationError(
                "the API needs a token: connect(url, token) or set CHOKAQ_API_TOKEN", field="token"
            )
        base = url.rstrip("/")
        self.base_url = base if base.endswith(API_PREFIX) else base + API_PREFIX
        self.timeout = timeout
        self.session = session or requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"
        self.session.headers["Accept"] = "application/json"
        retry = Retry(
            total=retries,
            connect=retries,
            read=retries,
            status=retries,
            backoff_factor=0.3,
            status_forcelist=(500, 502, 503, 504),
            allowed_methods=frozenset({"GET", "HEAD"}),  # read errors and 5xx: idempotent reads only
            raise_on_status=False,
            respect_retry_after_header=True,
        )
        adapter = HTTPAdapter(max_retries=retry)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)

    def __repr__(self) -> str:
        return f"HttpClient({self.base_url})"

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ transport

    def _call(self, method: str, path: str, *, params: Any = None, body: Any = _UNSET) -> requests.Response:
        kwargs: dict[str, Any] = {"params": params, "timeout": self.timeout}
        if body is not _UNSET:
            kwargs["json"] = body
        try:
            response = self.session.request(method, self.base_url + path, **kwargs)
        except requests.ConnectionError as exc:
            raise errors.TransientStorageError(f"cannot reach {self.base_url}: {exc}") from exc
        if response.status_code >= 400:
            raise _error(response)
        return response

    def _get(self, path: str, **params: Any) -> Any:
        return self._call("GET", path, params={k: v for k, v in params.items() if v is not None}).json()

    def _post(self, path: str, body: Any = None) -> Any:
        return self._call("POST", path, body=body if body is not None else {}).json()

    def _patch(self, path: str, body: Any) -> Any:
        return self._call("PATCH", path, body=body).json()

    def _pages(
        self, path: str, params: dict[str, Any], limit: int | None, key: str = "id"
    ) -> Iterator[list[dict[str, Any]]]:
        """Every page of a list endpoint, oldest first; ids already seen are dropped (rows that move while
        paging can shift OFFSET pages)."""
        seen: set[str] = set()
        page, loaded = 1, 0
        while limit is None or loaded < limit:
            response = self._call("GET", path, params={**params, "page": page, "page_size": PAGE})
            items = [i for i in response.json() if i.get(key) not in seen]
            seen.update(i[key] for i in items)
            if limit is not None:
                items = items[: limit - loaded]
            loaded += len(items)
            if items:
                yield items
            meta = json.loads(response.headers.get("X-Pagination") or "{}")
            if page >= int(meta.get("total_pages") or 0) or not response.json():
                return
            page += 1

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
            for items in self._pages(path, params, limit):
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
        params = _filter_json(dlq_filter(filters, **kw)) | {"sort": "failed_at", "order": "asc"}
        return self._frame("dlq", "/dlq", params, heavy=heavy, limit=limit, progress=progress)

    def iter_dlq(
        self, filters: DlqFilter | None = None, *, heavy: bool = True, **kw: Any
    ) -> Iterator[pd.DataFrame]:
        """`load_dlq` one API page (1000 rows) at a time."""
        params = _filter_json(dlq_filter(filters, **kw)) | {"sort": "failed_at", "order": "asc"}
        for items in self._pages("/dlq", params, None):
            yield C.normalise(pd.DataFrame(items), "dlq", heavy=heavy)

    def load_archive(
        self, *, heavy: bool = True, limit: int | None = None, progress: bool | None = None, **filters: Any
    ) -> pd.DataFrame:
        """Succeeded jobs as a DataFrame; filters and columns as `DbClient.load_archive`."""
        params = _filter_json(archive_filter(filters)) | {"sort": "finished_at", "order": "asc"}
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
        params = _filter_json(hot_filter(filters, **kw)) | {"sort": "created_at", "order": "asc"}
        return self._frame("hot", "/jobs", params, heavy=heavy, limit=limit, progress=progress)

    # ------------------------------------------------------------------ jobs

    def get_job(self, job_id: str) -> dict[str, Any]:
        return _times(self._get(f"/jobs/{requests.utils.quote(job_id, safe='')}"))

    def preview(
        self, ids: Sequence[str] | None = None, *, sample: int = 10, **filters: Any
    ) -> dict[str, Any]:
        if ids is not None:
            return self._post("/dlq/preview", {"ids": list(ids), "sample": sample})
        return self._post("/dlq/preview", {"filter": _filter_json(dlq_filter(**filters)), "sample": sample})

    def summary(self, *, top: int = 10, **filters: Any) -> dict[str, Any]:
        return self._get("/dlq/summary", top=top, **_filter_json(dlq_filter(**filters)))

    def _bulk(
        self,
        path: str,
        key: str,
        ids: Sequence[str] | None,
        filters: dict[str, Any],
        max_jobs: int | None,
        progress: bool | None,
    ) -> dict[str, int]:
        if ids is None:
            body: dict[str, Any] = {"filter": _filter_json(dlq_filter(**filters))}
            if max_jobs is not None:
                body["max_jobs"] = max_jobs
            return self._post(path, body)
        wanted = validation.ids(list(ids), max_count=10**7)[: max_jobs or None]
        show = interactive() if progress is None else progress
        bar = progress_bar(len(wanted), 0, key) if show else None
        done = batches = 0
        try:
            for start in range(0, len(wanted), validation.MAX_BULK_IDS):
                got = self._post(path, {"ids": wanted[start : start + validation.MAX_BULK_IDS]})
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
        **filters: Any,
    ) -> dict[str, int]:
        """As `DbClient.resurrect`. Jobs with edits are resurrected one request each
        (POST /dlq/{id}/resurrect); use `plan_resurrect` to edit many."""
        if edits:
            done = 0
            for job_id, fields in edits.items():
                self._post(f"/dlq/{requests.utils.quote(job_id, safe='')}/resurrect", dict(fields))
                done += 1
            rest = [i for i in ids or () if i not in edits]
            result = (
                self._bulk("/dlq/resurrect", "resurrected", rest, {}, None, progress)
                if rest
                else {"resurrected": 0, "batches": 0}
            )
            return {"resurrected": result["resurrected"] + done, "batches": result["batches"] + done}
        return self._bulk("/dlq/resurrect", "resurrected", ids, filters, max_jobs, progress)

    def purge(
        self,
        ids: Sequence[str] | None = None,
        *,
        max_jobs: int | None = None,
        progress: bool | None = None,
        **filters: Any,
    ) -> dict[str, int]:
        return self._bulk("/dlq/purge", "purged", ids, filters, max_jobs, progress)

    def purge_archive(self, older_than: Any, *, progress: bool | None = None) -> dict[str, int]:
        cutoff = parse_time(older_than, "older_than")
        assert cutoff is not None
        return self._post("/archive/purge", {"older_than": _time_text(cutoff)})

    def cancel(self, ids: Sequence[str]) -> dict[str, list[str]]:
        wanted = validation.ids(list(ids), max_count=10**7)
        cancelled: list[str] = []
        skipped: list[str] = []
        for start in range(0, len(wanted), validation.MAX_BULK_IDS):
            got = self._post("/jobs/cancel", {"ids": wanted[start : start + validation.MAX_BULK_IDS]})
            cancelled += got["cancelled"]
            skipped += got["skipped"]
        return {"cancelled": cancelled, "skipped": skipped}

    def edit(
        self, job_id: str, *, payload: Any = None, tags: Any = None, priority: int | None = None
    ) -> dict[str, Any]:
        body = {
            k: v for k, v in {"payload": payload, "tags": tags, "priority": priority}.items() if v is not None
        }
        quoted = requests.utils.quote(job_id, safe="")
        if self._get(f"/jobs/{quoted}")["location"] == "dlq":
            if priority is not None:
                raise errors.ValidationError(
                    "a dead job's priority is set when it is resurrected", field="priority"
                )
            return _times(self._patch(f"/dlq/{quoted}", body))
        return _times(self._patch(f"/jobs/{quoted}", body))

    # ------------------------------------------------------------------ queues, stats, audit

    def queues(self) -> pd.DataFrame:
        return records_frame(self._get("/queues"), QUEUE_COLUMNS, ("updated_at",))

    def queue(self, name: str) -> dict[str, Any]:
        return self._get(f"/queues/{requests.utils.quote(name, safe='')}")

    def pause(self, name: str) -> dict[str, Any]:
        return self.set_queue(name, paused=True)

    def resume(self, name: str) -> dict[str, Any]:
        return self.set_queue(name, paused=False)

    def set_queue(
        self,
        name: str,
        *,
        paused: bool = _UNSET,
        active: bool = _UNSET,
        zombie_timeout_seconds: int | None = _UNSET,
        max_workers: int | None = _UNSET,
    ) -> dict[str, Any]:
        changes = {
            k: v
            for k, v in {
                "paused": paused,
                "active": active,
                "zombie_timeout_seconds": zombie_timeout_seconds,
                "max_workers": max_workers,
            }.items()
            if v is not _UNSET
        }
        return self._patch(f"/queues/{requests.utils.quote(name, safe='')}", changes)

    def stats(self) -> dict[str, Any]:
        return self._get("/stats")

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
            params["since"] = _time_text(when)
        rows: list[dict[str, Any]] = []
        for items in self._pages("/audit", {k: v for k, v in params.items() if v is not None}, limit):
            rows.extend(
                {**i, "details": json.dumps(i["details"]) if i.get("details") is not None else None}
                for i in items
            )
        return audit_frame(rows)

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
            body["filter"] = _filter_json(flt)
        if edits:
            body["edits"] = edits
        if max_jobs is not None:
            body["max_jobs"] = max_jobs
        return self._post("/plans", body)

    def _plan_get(self, plan_id: str) -> dict[str, Any]:
        return self._get(f"/plans/{requests.utils.quote(plan_id, safe='')}")

    def _plan_chunk(self, plan_id: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
        # One chunk per request: the client shows progress, and an interrupted client loses nothing.
        got = self._post(f"/plans/{requests.utils.quote(plan_id, safe='')}/execute", {"max_chunks": 1})
        chunks = got.pop("executed", [])
        return got, (chunks[0] if chunks else None)

    def _plan_items(self, plan_id: str) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for items in self._pages(
            f"/plans/{requests.utils.quote(plan_id, safe='')}/items", {}, None, "job_id"
        ):
            rows.extend(items)
        return rows

    def _plan_discard(self, plan_id: str) -> dict[str, Any]:
        return self._post(f"/plans/{requests.utils.quote(plan_id, safe='')}/discard")

    def _plan_list(self, *, state: str | None, action: str | None, limit: int) -> list[dict[str, Any]]:
        got = self._call(
            "GET",
            "/plans",
            params={
                k: v
                for k, v in {"state": state, "action": action, "page_size": min(limit, PAGE)}.items()
                if v
            },
        )
        return got.json()


def _times(job: dict[str, Any]) -> dict[str, Any]:
    """ISO times of a job answer -> aware datetimes, as the DbClient returns them."""
    out = dict(job)
    for key, value in job.items():
        if (key.endswith("_at")) and isinstance(value, str):
            out[key] = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return out


def _error(response: requests.Response) -> errors.ChokaqError:
    """The API's error shape {code, status, message, errors} -> the library's exception."""
    try:
        body = response.json()
    except ValueError:
        body = {}
    message = body.get("message") or response.reason or f"HTTP {response.status_code}"
    field = None
    detail = body.get("errors")
    if isinstance(detail, dict) and detail:
        for location in ("json", "query"):
            inner = detail.get(location)
            if isinstance(inner, dict) and inner:
                field = next(iter(inner))
                message = f"{message}: {field}: {inner[field]}"
                break
    kind = {
        401: errors.Unauthorized,
        403: errors.Forbidden,
        404: errors.JobNotFound,
        409: errors.InvalidState,
        413: errors.ValidationError,
        422: errors.ValidationError,
    }.get(response.status_code)
    if kind is None:
        kind = errors.TransientStorageError if response.status_code >= 500 else errors.ChokaqError
    return kind(f"{response.status_code}: {message}", field=field)
