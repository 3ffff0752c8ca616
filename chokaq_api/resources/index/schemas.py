"""The API index: where everything is."""

from __future__ import annotations

import marshmallow as ma


class LinkSchema(ma.Schema):
    href = ma.fields.String(required=True, metadata={"description": "Path on this server"})
    description = ma.fields.String(required=True)
    auth = ma.fields.String(
        required=True, metadata={"description": "`open`, or the least role that may read it"}
    )


class IndexSchema(ma.Schema):
    name = ma.fields.String(required=True)
    version = ma.fields.String(required=True)
    description = ma.fields.String(required=True)
    auth = ma.fields.String(required=True, metadata={"description": "How to authenticate"})
    docs = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.Nested(LinkSchema), required=True)
    health = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.Nested(LinkSchema), required=True)
    console = ma.fields.Nested(
        LinkSchema, allow_none=True, metadata={"description": "The web console, when this server has one"}
    )
    resources = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.Nested(LinkSchema), required=True)
