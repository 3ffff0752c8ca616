"""Fields that carry the contract's conventions: UTC ISO 8601 times, payload as JSON text, names for enums."""

from __future__ import annotations

import enum
import json
import re
from datetime import UTC, datetime
from typing import Any

import marshmallow as ma

from chokaq_ops.models import FailureReason, Status

# Times outside this range are typos, and years before 1000 do not round-trip through SQLite's text form.
MIN_YEAR, MAX_YEAR = 1970, 9000

# An unencoded `+` in a query string arrives as a space: `...T10:00:00 00:00` meant `+00:00`.
_PLUS_AS_SPACE = re.compile(r"^(.*\d) (\d\d:?\d\d)$")


class UtcDateTime(ma.fields.DateTime):
    """ISO 8601 in UTC with a `Z`. Input may carry any offset; a time without one is taken as UTC."""

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> str | None:
        if value is None:
            return None
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> datetime:
        if not isinstance(value, str) or not value.strip():
            raise self.make_error("invalid", input=value, obj_type=self.OBJ_TYPE)
        text = _PLUS_AS_SPACE.sub(r"\1+\2", value.strip())
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise self.make_error("invalid", input=value, obj_type=self.OBJ_TYPE) from None
        out_of_range = ma.ValidationError(f"Must be between the years {MIN_YEAR} and {MAX_YEAR}.")
        if not MIN_YEAR <= parsed.year <= MAX_YEAR:
            raise out_of_range  # checked before the UTC shift, which overflows at the ends of the calendar
        parsed = parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
        if not MIN_YEAR <= parsed.year <= MAX_YEAR:
            raise out_of_range
        return parsed


class Payload(ma.fields.Raw):
    """A job payload in a request: a string is taken as the JSON text itself; any other JSON value is
    serialized. Size and (for operator edits) JSON validity are checked by chokaq_ops."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        if isinstance(value, str):
            return value
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class JsonText(ma.fields.Raw):
    """Stored JSON text shown as the JSON value it holds (audit details, event data)."""

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value)
        except ValueError:
            return value


class EnumName(ma.fields.String):
    """An enum by member name (case-insensitive on input); errors list the accepted names."""

    def __init__(self, enum_cls: type[enum.Enum], **kwargs: Any) -> None:
        self.enum_cls = enum_cls
        names = [m.name for m in enum_cls]
        kwargs.setdefault("metadata", {})
        kwargs["metadata"] = {"enum": names, **kwargs["metadata"]}
        super().__init__(**kwargs)
        self.names = names

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        text = super()._deserialize(value, attr, data, **kwargs).strip().lower()
        for member in self.enum_cls:
            if member.name.lower() == text:
                return member
        raise ma.ValidationError(f"Must be one of: {', '.join(self.names)}.")

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> str | None:
        if value is None:
            return None
        if isinstance(value, enum.Enum):
            return value.name
        return str(value)


def reason(**kwargs: Any) -> EnumName:
    return EnumName(FailureReason, **kwargs)


def hot_status(**kwargs: Any) -> EnumName:
    return EnumName(Status, **kwargs)


def choice(values: list[str] | tuple[str, ...], **kwargs: Any) -> ma.fields.String:
    """A string from a fixed list (sorts, orders, roles): unknown values answer 422 naming the field."""
    return ma.fields.String(validate=ma.validate.OneOf(values), **kwargs)


class GrammarText(ma.fields.Field):
    """A filter of the one grammar (chokaq_ops/filters.py): text ("Fatal,Timeout", "!Zombie", "24h") or,
    in a JSON body, a list of such texts. Parsed by the grammar in the schema's post_load, so the API,
    Python and the CLI read the same words the same way."""

    def __init__(self, *, max_len: int = 20_000, **kwargs: Any) -> None:
        kwargs.setdefault("metadata", {})
        kwargs["metadata"].setdefault("type", "string")
        super().__init__(**kwargs)
        self.max_len = max_len

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        items = value if isinstance(value, list) else [value]
        if not items or not all(isinstance(v, str) and 1 <= len(v) <= self.max_len for v in items):
            raise ma.ValidationError(f"expected text (1 to {self.max_len} characters) or a list of texts")
        return value


def grammar_error(exc: Exception) -> ma.ValidationError:
    """A filter-grammar error as the schema's 422, naming the field."""
    return ma.ValidationError(str(exc), getattr(exc, "field", None) or "filter")
