"""GET /failures: the failure history across jobs, with the one filter grammar."""

from __future__ import annotations

from typing import Any

from flask.views import MethodView

from chokaq_api.extensions import Blueprint, store
from chokaq_api.resources.failures.schemas import FailureQuery, FailureSchema
from chokaq_ops.filters import failure_filter

URL = "/failures"
blp = Blueprint(
    "failures",
    __name__,
    description="Every failed attempt of every job, kept after resurrects and successes.",
)


@blp.route("")
class Failures(MethodView):
    @blp.arguments(FailureQuery, location="query")
    @blp.response(200, FailureSchema(many=True))
    def get(self, args: dict[str, Any]) -> Any:
        """Failed attempts, oldest first; page with after_seq (the last row's seq)"""
        limit = args.pop("limit")
        after = args.pop("after_seq", None)
        return store().failure_history(failure_filter(args), limit=limit, after_seq=after)
