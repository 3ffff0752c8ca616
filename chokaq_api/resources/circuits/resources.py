"""Circuits: the breaker of each job type; an admin forces one open or closed."""

from __future__ import annotations

from typing import Any

from flask.views import MethodView

from chokaq_api.auth import actor
from chokaq_api.extensions import Blueprint, store
from chokaq_api.resources.circuits.schemas import CircuitPatchSchema, CircuitSchema

URL = "/circuits"
blp = Blueprint("circuits", __name__, description="The circuit breaker per job type.")


@blp.route("")
class Circuits(MethodView):
    @blp.response(200, CircuitSchema(many=True))
    def get(self) -> Any:
        """Every job type whose circuit ever failed or was forced (a type with no row is closed)"""
        return store().list_circuits()


@blp.route("/<path:type_key>")
class CircuitByType(MethodView):
    @blp.response(200, CircuitSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    def get(self, type_key: str) -> Any:
        """One type's circuit"""
        return store().get_circuit(type_key)

    @blp.arguments(CircuitPatchSchema)
    @blp.response(200, CircuitSchema)
    def patch(self, body: dict[str, Any], type_key: str) -> Any:
        """Force a type's circuit open (it stays open until closed) or close it (admin; audited)"""
        return store().set_circuit(type_key, body["state"], actor=actor())
