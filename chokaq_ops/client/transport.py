"""The HTTP transport under HttpClient: a requests session with the token, safe retries, the API's error
shape mapped to the library's exceptions, and paging through list endpoints."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any
from urllib.parse import quote as _quote

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from chokaq_ops import errors
from chokaq_ops.filters import dlq_query
from chokaq_ops.models import ArchiveFilter, DlqFilter, HotFilter

API_PREFIX = "/api/v1"
PAGE = 1000  # the API's largest page
UNSET: Any = object()


def quote(segment: str, safe: str = "") -> str:
    """One path segment (a job id, queue or plan name), escaped; `safe="/"` for a `<path:...>` route
    whose value may hold slashes (a circuit's type key)."""
    return _quote(segment, safe=safe)


def time_text(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def filter_json(flt: DlqFilter | HotFilter | ArchiveFilter | dict[str, Any]) -> dict[str, Any]:
    """A filter as the API's query or body fields: times in ISO 8601, enums by name, unset fields left out;
    a DLQ filter in the grammar's text (lists, ! exclusions), which the API parses back to the same filter."""
    if isinstance(flt, DlqFilter):
        return dlq_query(flt)
    items = flt.items() if isinstance(flt, dict) else ((k, getattr(flt, k)) for k in flt.__dataclass_fields__)
    out: dict[str, Any] = {}
    for key, value in items:
        if value is None:
            continue
        if isinstance(value, datetime):
            value = time_text(value)
        elif hasattr(value, "name") and not isinstance(value, str):
            value = value.name  # FailureReason, Status
        out[key] = value
    return out


class Transport:
    """GET / POST / PATCH against one API with one token."""

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

    def close(self) -> None:
        self.session.close()

    def call(self, method: str, path: str, *, params: Any = None, body: Any = UNSET) -> requests.Response:
        kwargs: dict[str, Any] = {"params": params, "timeout": self.timeout}
        if body is not UNSET:
            kwargs["json"] = body
        try:
            response = self.session.request(method, self.base_url + path, **kwargs)
        except requests.ConnectionError as exc:
            raise errors.ApiUnreachable(f"cannot reach {self.base_url}: {exc}") from exc
        except requests.Timeout as exc:  # the server took the request and did not answer in time
            raise errors.TransientStorageError(f"{self.base_url} did not answer in time: {exc}") from exc
        if response.status_code >= 400:
            raise error_from(response)
        return response

    def get(self, path: str, **params: Any) -> Any:
        return self.call("GET", path, params={k: v for k, v in params.items() if v is not None}).json()

    def post(self, path: str, body: Any = None) -> Any:
        return self.call("POST", path, body=body if body is not None else {}).json()

    def patch(self, path: str, body: Any) -> Any:
        return self.call("PATCH", path, body=body).json()

    def pages(
        self, path: str, params: dict[str, Any], limit: int | None, key: str = "id"
    ) -> Iterator[list[dict[str, Any]]]:
        """Every page of a list endpoint, oldest first; ids already seen are dropped (rows that move while
        paging can shift OFFSET pages)."""
        seen: set[str] = set()
        page, loaded = 1, 0
        while limit is None or loaded < limit:
            response = self.call("GET", path, params={**params, "page": page, "page_size": PAGE})
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


def times(job: dict[str, Any]) -> dict[str, Any]:
    """ISO times of a job answer -> aware datetimes, as the DbClient returns them."""
    out = dict(job)
    for key, value in job.items():
        if (key.endswith("_at")) and isinstance(value, str):
            out[key] = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return out


def aware_times(value: Any) -> Any:
    """ISO times anywhere in an API answer (keys ending in `_at` or `_seen`) -> aware datetimes, so a
    summary or report has the same types over HTTP as from the database."""
    if isinstance(value, list):
        return [aware_times(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if isinstance(item, str) and key.endswith(("_at", "_seen")):
            out[key] = datetime.fromisoformat(item.replace("Z", "+00:00"))
        else:
            out[key] = aware_times(item)
    return out


def error_from(response: requests.Response) -> errors.ChokaqError:
    """The API's error shape {code, status, message, errors} -> the library's exception."""
    try:
        body = response.json()
    except ValueError:
        body = {}
    message = body.get("message") or response.reason or f"HTTP {response.status_code}"
    field = None
    detail = body.get("errors")
    if isinstance(detail, dict) and detail:
        for location in ("json", "query", "path"):
            inner = detail.get(location)
            if isinstance(inner, dict) and inner:
                field = next(iter(inner))
                if location != "path":  # a path segment's error is the message itself (an unknown name)
                    message = f"{message}: {field}: {inner[field]}"
                break
    detail = body.get("detail") if isinstance(body.get("detail"), dict) else {}
    if response.status_code == 409 and field == "label":
        return errors.LabelMismatch(
            f"{response.status_code}: {body.get('message') or message}",
            bound=detail.get("bound"),
            asked=detail.get("asked"),
        )
    if response.status_code == 409 and field == "lease":
        return errors.PlanBusy(
            f"{response.status_code}: {body.get('message') or message}",
            holder=detail.get("holder"),
            seconds_left=detail.get("seconds_left"),
        )
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
