"""Operator filters as the parameters of the named queries that read them, and as audit details."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from typing import Any

from chokaq_ops import errors, validation
from chokaq_ops.models import DlqFilter, FailureReason


def reason_number(value: Any, field: str = "reason") -> int:
    """A failure reason (member, number or name) as stored; anything else is a ValidationError."""
    try:
        return int(value if isinstance(value, FailureReason) else FailureReason.parse(value))
    except (TypeError, ValueError):
        names = ", ".join(m.name for m in FailureReason)
        raise errors.ValidationError(f"{field} must be one of {names}", field=field) from None


def json_list(values: tuple[Any, ...] | None) -> str | None:
    """A list filter as the JSON array the named queries read (reasons as their numbers)."""
    if values is None:
        return None
    return json.dumps([reason_number(v) if isinstance(v, FailureReason) else v for v in values])


def _json_value(v: Any) -> Any:
    if isinstance(v, tuple | list):
        return [_json_value(x) for x in v]
    return v.name if hasattr(v, "name") else v.isoformat() if isinstance(v, datetime) else v


def filter_json(flt: Any) -> dict[str, Any]:
    """The audit form of a filter: only the fields that were set."""
    if flt is None:
        return {}
    return {k: _json_value(v) for k, v in asdict(flt).items() if v is not None}


def dlq_filter_params(flt: DlqFilter | None) -> dict[str, Any]:
    """A DLQ filter, validated, as the parameters of the DLQ queries (list_dlq, count_dlq, dlq_ids ...)."""
    flt = flt or DlqFilter()
    return {
        "queue": validation.text(flt.queue, "queue", max_len=validation.MAX_QUEUE, required=False),
        "type": validation.text(flt.type, "type", max_len=validation.MAX_TYPE, required=False),
        "reason": reason_number(flt.reason) if flt.reason is not None else None,
        "fingerprint": validation.text(flt.fingerprint, "fingerprint", max_len=64, required=False),
        "failed_from": flt.failed_from,
        "failed_to": flt.failed_to,
        "created_from": flt.created_from,
        "created_to": flt.created_to,
        "tag_like": validation.tag_pattern(flt.tag),
        "search_like": validation.like_pattern(flt.search),
        "ids": json_list(flt.ids),
        "queues": json_list(flt.queues),
        "not_queues": json_list(flt.not_queues),
        "types": json_list(flt.types),
        "not_types": json_list(flt.not_types),
        "reasons": json_list(flt.reasons),
        "not_reasons": json_list(flt.not_reasons),
        "fingerprints": json_list(flt.fingerprints),
    }
