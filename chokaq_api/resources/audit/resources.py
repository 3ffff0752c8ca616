"""Who changed what, newest first."""

from __future__ import annotations

from typing import Any

from flask.views import MethodView

from chokaq_api.extensions import Blueprint, store
from chokaq_api.resources.audit.schemas import AuditQuery, AuditSchema

URL = "/audit"
blp = Blueprint("audit", __name__, description="The audit log of operator actions.")


@blp.route("")
class Audit(MethodView):
    @blp.arguments(AuditQuery, location="query")
    @blp.response(200, AuditSchema(many=True))
    @blp.paginate()
    def get(self, args: dict[str, Any], pagination_parameters: Any) -> Any:
        """Audit entries, newest first; filter by actor, action, job_id, plan_id, since"""
        page = store().list_audit(
            **args, page=pagination_parameters.page, page_size=pagination_parameters.page_size
        )
        pagination_parameters.item_count = page.total
        return page.items
