"""The job types workers declared when they started (their handler registry, one row per type), so a
script, a notebook or the console selects safe retries (idempotent types) without importing handler code."""

from __future__ import annotations

from typing import Any

from flask.views import MethodView

from chokaq_api.extensions import Blueprint, store
from chokaq_api.resources.job_types.schemas import JobTypeSchema

URL = "/job-types"
blp = Blueprint("job_types", __name__, description="Job types workers declared, and which are idempotent.")


@blp.route("")
class JobTypes(MethodView):
    @blp.response(200, JobTypeSchema(many=True))
    def get(self) -> Any:
        """Every declared job type: whether it is idempotent, and when a worker last said so"""
        return store().job_types()
