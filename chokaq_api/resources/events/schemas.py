"""The live event stream."""

from __future__ import annotations

import marshmallow as ma

from chokaq_api.extensions import Schema


class EventsQuery(Schema):
    after = ma.fields.Integer(
        validate=ma.validate.Range(min=0, max=2**63 - 1),
        metadata={
            "description": "Replay events after this id (0: every retained event). Default: the "
            "Last-Event-ID header, else only new events."
        },
    )


class EventSchema(ma.Schema):
    """The JSON in each message's `data:` line; the SSE `id:` is the event id and `event:` its kind."""

    id = ma.fields.Integer(required=True)
    at = ma.fields.String(required=True, metadata={"format": "date-time"})
    kind = ma.fields.String(
        required=True, metadata={"description": "e.g. rescue, dlq, resurrect, purge, queue"}
    )
    message = ma.fields.String(required=True)
    data = ma.fields.Raw(allow_none=True)
