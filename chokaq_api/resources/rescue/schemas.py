"""Rescue sweep result."""

from __future__ import annotations

import marshmallow as ma


class RescueSchema(ma.Schema):
    recovered = ma.fields.Integer(
        required=True, metadata={"description": "Abandoned fetched jobs returned to pending"}
    )
    archived = ma.fields.Integer(required=True, metadata={"description": "Zombies moved to the DLQ"})
