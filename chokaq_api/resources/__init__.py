"""One folder per resource, each with resources.py (Blueprint + MethodViews) and schemas.py."""

from __future__ import annotations

from chokaq_api.extensions import Api
from chokaq_api.resources import (
    alerts,
    archive,
    audit,
    circuits,
    dlq,
    events,
    failures,
    health,
    horizon,
    index,
    job_types,
    jobs,
    plans,
    queues,
    rescue,
    schedules,
    stats,
    whoami,
    workers,
)
from chokaq_api.resources.events.schemas import EventSchema

MODULES = (
    index,
    health,
    jobs,
    dlq,
    archive,
    queues,
    stats,
    rescue,
    events,
    audit,
    plans,
    workers,
    circuits,
    alerts,
    failures,
    horizon,
    job_types,
    schedules,
    whoami,
)
URL_PREFIX = "/api/v1"


def register_blueprints(api: Api) -> None:
    for module in MODULES:
        api.register_blueprint(module.blp, url_prefix=URL_PREFIX + module.URL)
    # The stream carries events as text; the schema documents the JSON in each `data:` line.
    api.spec.components.schema("Event", schema=EventSchema)
