"""Flask and flask-smorest configuration. Nothing here depends on the deployment's settings, so the
generated openapi.yaml is the same on every machine."""

from __future__ import annotations

from chokaq_ops import __version__

DESCRIPTION = """\
The operator API of chokaq, a job queue on a relational database: inspect, edit, resurrect and purge
dead jobs, control queues, watch live events.

Every route except the index (`/api/v1`), `/health*` and `/openapi.json` needs
`Authorization: Bearer <token>` (create one with `chokaq token create NAME --role reader|operator|admin`).
Roles: `reader` (every GET and the DLQ preview), `operator` (enqueue, edit, resurrect, cancel,
pause/resume, rescue), `admin` (everything, including purges and queue limits). Each operation states its
role.

Errors always have the shape `{code, status, message, errors}`; `errors` names the offending field by
location (`{"json": {"payload": [...]}}`). Lists are paged with `page` and `page_size` (at most 1000)
and describe the paging in the `X-Pagination` header. Times are ISO 8601 in UTC.
"""


class DefaultConfig:
    API_TITLE = "chokaq"
    API_VERSION = __version__
    OPENAPI_VERSION = "3.0.3"
    OPENAPI_URL_PREFIX = "/api/v1"
    OPENAPI_JSON_PATH = "openapi.json"
    API_SPEC_OPTIONS = {
        "info": {"description": DESCRIPTION, "license": {"name": "MIT"}},
        "components": {
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API token from `chokaq token create NAME --role ROLE`.",
                }
            }
        },
        "security": [{"bearerAuth": []}],
    }
    # Our error handlers shape every failure; let Flask turn unexpected exceptions into 500s.
    PROPAGATE_EXCEPTIONS = False
