"""Archive (succeeded jobs) requests and responses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import marshmallow as ma

from chokaq_api import fields
from chokaq_api.extensions import Schema
from chokaq_api.resources.jobs.schemas import ORDERS
from chokaq_ops import errors, validation
from chokaq_ops.filters import archive_filter
from chokaq_ops.settings import parse_duration
from chokaq_ops.storage.read_ops import ARCHIVE_SORTS


class ArchiveListQuery(Schema):
    queue = ma.fields.String(validate=ma.validate.Length(1, validation.MAX_QUEUE))
    type = ma.fields.String(validate=ma.validate.Length(1, validation.MAX_TYPE))
    search = ma.fields.String(
        validate=ma.validate.Length(1, validation.MAX_SEARCH),
        metadata={"description": "Substring of id, type or tags."},
    )
    tag = ma.fields.String(validate=ma.validate.Length(1, validation.MAX_TAGS))
    finished_from = fields.UtcDateTime()
    finished_to = fields.UtcDateTime()
    created_from = fields.UtcDateTime()
    created_to = fields.UtcDateTime()
    sort = fields.choice(ARCHIVE_SORTS, load_default="finished_at")
    order = fields.choice(ORDERS, load_default="desc")

    @ma.post_load
    def to_call(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        sort, order = data.pop("sort"), data.pop("order")
        return {"flt": archive_filter(data), "sort": sort, "descending": order == "desc"}


class Cutoff(ma.fields.Raw):
    """A timestamp, or an age: a duration such as "30d", "12h", "90m", "3600s", "hh:mm:ss" or seconds."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> datetime | timedelta:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ma.ValidationError("give a timestamp or a duration such as 30d")
        if isinstance(value, str):
            try:
                parsed = datetime.fromisoformat(value.strip())
                return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed
            except ValueError:
                pass
        try:
            seconds = parse_duration(value)
        except errors.ConfigError:
            raise ma.ValidationError("not a timestamp or a duration (30d, 12h, 90m, 3600s)") from None
        if not 0 < seconds < 100 * 365 * 86400:
            raise ma.ValidationError("the duration must be positive")
        return timedelta(seconds=seconds)


class ArchivePurgeSchema(Schema):
    older_than = Cutoff(
        required=True,
        metadata={
            "description": 'Jobs finished before this are deleted: a timestamp or an age ("30d").',
            "oneOf": [{"type": "string"}, {"type": "number"}],
        },
    )


class ArchivePurgedSchema(ma.Schema):
    purged = ma.fields.Integer(required=True)
    batches = ma.fields.Integer(required=True)
    cutoff = fields.UtcDateTime(
        required=True, metadata={"description": "The finish time rows were older than"}
    )
