"""Caller input checks the storage parts share, typed for what each operation needs."""

from __future__ import annotations

from typing import Any

from chokaq_ops import errors, validation

MAX_PAGE_SIZE = 1000


def required_text(value: Any, field: str, *, max_len: int) -> str:
    """validation.text of a required field: never None (a missing or blank value is a ValidationError)."""
    text = validation.text(value, field, max_len=max_len)
    if text is None:  # validation.text raises first; this tells the type checker so
        raise errors.ValidationError(f"{field} is required", field=field)
    return text


def edit_payload(payload: Any, max_bytes: int) -> str | None:
    """An operator's replacement payload: JSON within Serialization.MaxPayloadBytes (None keeps it)."""
    return validation.payload(payload, max_bytes=max_bytes, require_json=True)


def paging(page: int, page_size: int) -> dict[str, int]:
    """A listing's page (1-based) and page size (1 to MAX_PAGE_SIZE) as the queries' LIMIT and OFFSET."""
    if not isinstance(page, int) or page < 1:
        raise errors.ValidationError("page must be 1 or more", field="page")
    if not isinstance(page_size, int) or not 1 <= page_size <= MAX_PAGE_SIZE:
        raise errors.ValidationError(f"page_size must be between 1 and {MAX_PAGE_SIZE}", field="page_size")
    return {"limit": page_size, "offset": (page - 1) * page_size}
