"""Envelope limits checked before anything touches the database, so bad input changes no row."""

from __future__ import annotations

import json
from typing import Any

from chokaq_ops import errors

MAX_ID = 50
MAX_QUEUE = 255
MAX_TYPE = 255
MAX_TAGS = 1000
MAX_KEY = 255
MAX_ACTOR = 100
MAX_SEARCH = 1000
MIN_PRIORITY, MAX_PRIORITY = 0, 1_000_000
MAX_BULK_IDS = 1000
MAX_ZOMBIE_TIMEOUT = 86_400 * 7
MAX_MAX_WORKERS = 10_000


def text(value: Any, field: str, *, max_len: int, required: bool = True) -> str | None:
    """Trimmed text within a length limit; blank becomes None (or an error when required)."""
    if value is None:
        if required:
            raise errors.ValidationError(f"{field} is required", field=field)
        return None
    if not isinstance(value, str):
        raise errors.ValidationError(f"{field} must be a string", field=field)
    value = value.strip()
    if not value:
        if required:
            raise errors.ValidationError(f"{field} must not be blank", field=field)
        return None
    if len(value) > max_len:
        raise errors.ValidationError(f"{field} is longer than {max_len} characters", field=field)
    _no_nul(value, field)
    return value


def _no_nul(value: str, field: str) -> None:
    # PostgreSQL text cannot hold NUL; refuse it everywhere so both databases accept the same input.
    if "\x00" in value:
        raise errors.ValidationError(f"{field} must not contain NUL characters", field=field)


def job_id(value: Any, field: str = "id") -> str:
    return text(value, field, max_len=MAX_ID)  # type: ignore[return-value]


def queue(value: Any, field: str = "queue") -> str:
    return text(value, field, max_len=MAX_QUEUE)  # type: ignore[return-value]


def tags(value: Any, field: str = "tags") -> str | None:
    if isinstance(value, list | tuple):
        value = ",".join(str(t).strip() for t in value if str(t).strip())
    return text(value, field, max_len=MAX_TAGS, required=False)


def priority(value: Any, field: str = "priority") -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.ValidationError(f"{field} must be an integer", field=field)
    if not MIN_PRIORITY <= value <= MAX_PRIORITY:
        raise errors.ValidationError(
            f"{field} must be between {MIN_PRIORITY} and {MAX_PRIORITY}", field=field
        )
    return value


def payload(value: Any, field: str = "payload", *, max_bytes: int, require_json: bool) -> str | None:
    """Payload text within the byte limit. Producers may store invalid JSON (the worker then fails the job
    as Fatal, the operator's workflow); operator edits must be valid JSON."""
    if value is None:
        return None
    if not isinstance(value, str):
        value = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    _no_nul(value, field)
    # isascii() reads a flag CPython keeps; only other text is encoded to count its bytes.
    size = len(value) if value.isascii() else len(value.encode("utf-8"))
    if size > max_bytes:
        raise errors.ValidationError(f"{field} is {size} bytes; the limit is {max_bytes}", field=field)
    if require_json:
        try:
            json.loads(value)
        except ValueError as exc:
            raise errors.ValidationError(f"{field} is not valid JSON: {exc}", field=field) from exc
    return value


def ids(values: Any, field: str = "ids", *, max_count: int = MAX_BULK_IDS) -> list[str]:
    """Trimmed, de-duplicated ids in input order; any bad id rejects the whole request."""
    if not isinstance(values, list | tuple):
        raise errors.ValidationError(f"{field} must be a list of job ids", field=field)
    seen: dict[str, None] = {}
    for i, v in enumerate(values):
        seen.setdefault(job_id(v, f"{field}[{i}]"), None)
    if not seen:
        raise errors.ValidationError(f"{field} must not be empty", field=field)
    if len(seen) > max_count:
        raise errors.ValidationError(f"{field} holds {len(seen)} ids; the limit is {max_count}", field=field)
    return list(seen)


def like_pattern(term: str | None, field: str = "search") -> str | None:
    """`%term%` with LIKE wildcards in the term escaped, so `%` and `_` match themselves."""
    term = text(term, field, max_len=MAX_SEARCH, required=False)
    if term is None:
        return None
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def tag_pattern(tag: str | None, field: str = "tag") -> str | None:
    tag = text(tag, field, max_len=MAX_TAGS, required=False)
    if tag is None:
        return None
    if "," in tag:
        raise errors.ValidationError(f"{field} must be a single tag", field=field)
    escaped = tag.replace(" ", "").replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return "%," + escaped + ",%"
