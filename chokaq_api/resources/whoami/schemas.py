"""The calling token."""

from __future__ import annotations

import marshmallow as ma


class WhoAmISchema(ma.Schema):
    class Meta:
        ordered = True

    name = ma.fields.String(required=True, metadata={"description": "The actor audit rows will name"})
    role = ma.fields.String(required=True, metadata={"enum": ["reader", "operator", "admin"]})
    can = ma.fields.List(
        ma.fields.String(),
        required=True,
        metadata={
            "description": "What the role may do: read, enqueue, edit, resurrect, cancel, pause, rescue, "
            "plan, purge, queue_limits, end_sessions (clients hide what is missing; the API refuses it "
            "anyway)"
        },
    )
