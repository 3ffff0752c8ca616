"""Totals, per-status counts, throughput and failure rate."""

from __future__ import annotations

from typing import Any

from flask.views import MethodView

from chokaq_api.extensions import Blueprint, store
from chokaq_api.resources.stats.schemas import StatsSchema

URL = "/stats"
blp = Blueprint("stats", __name__, description="Totals, counts, throughput and failure rate.")


@blp.route("")
class Stats(MethodView):
    @blp.response(200, StatsSchema)
    def get(self) -> Any:
        """Totals, per-status counts, throughput and failure rate over 1 and 5 minutes"""
        return store().stats()
