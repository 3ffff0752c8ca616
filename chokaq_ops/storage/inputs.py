"""Caller input checks the storage parts share, typed for what each operation needs."""

from __future__ import annotations

from typing import Any

from chokaq_ops import errors, validation


def required_text(value: Any, field: str, *, max_len: int) -> str:
    """validation.text of a required field: never None (a missing or blank value is a ValidationError)."""
    text = validation.text(value, field, max_len=max_len)
    if text is None:  # validation.text raises first; this tells the type checker so
        raise errors.ValidationError(f"{field} is required", field=field)
    return text


def edit_payload(payload: Any, max_bytes: int) -> str | None:
    """An operator's replacement payload: JSON within Serialization.MaxPayloadBytes (None keeps it)."""
    return validation.payload(payload, max_bytes=max_bytes, require_json=True)
