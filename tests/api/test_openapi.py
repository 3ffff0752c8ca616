"""The committed openapi.yaml: generated from the app (drift fails) and fuzzed against it (schemathesis)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from chokaq_api.openapi import spec_yaml
from tests.api.conftest import fuzz_app_on

SPEC = Path(__file__).resolve().parents[2] / "openapi.yaml"
# Open by design: the index, the health probes and the spec itself.
OPEN_PATHS = ("/api/v1", "/api/v1/health", "/api/v1/openapi.json")


def test_committed_openapi_matches_the_app():
    assert SPEC.read_text(encoding="utf-8") == spec_yaml(), (
        "openapi.yaml is out of date: run `python -m chokaq_api.openapi openapi.yaml` and commit it"
    )


def test_every_operation_documents_its_role_and_error_responses():
    import yaml

    spec = yaml.safe_load(SPEC.read_text(encoding="utf-8"))
    assert spec["openapi"] == "3.0.3"
    assert spec["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": spec["components"]["securitySchemes"]["bearerAuth"]["description"],
    }
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            if method == "parameters":
                continue
            assert "default" in op["responses"], (method, path)
            if path in OPEN_PATHS or path.startswith("/api/v1/health/"):
                assert op.get("security") == [], (method, path)
            else:
                assert op["x-required-role"] in ("reader", "operator", "admin"), (method, path)
                assert {"401", "403"} <= set(op["responses"]), (method, path)


@pytest.fixture(scope="module")
def fuzz_app(tmp_path_factory):
    """An app over a small SQLite database with jobs in every table and an admin token."""
    with fuzz_app_on(f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'chokaq.db'}") as target:
        yield target


# Loaded at import (schemathesis' lazy fixture loader does not run on pytest 9); each case is sent to the
# fixture's app through schemathesis' WSGI transport.
schema = schemathesis.openapi.from_path(SPEC)
schema.config.update(base_url="http://localhost")  # requests go to the WSGI app, never over the network


@schema.parametrize()
@settings(
    max_examples=int(os.environ.get("CHOKAQ_FUZZ_EXAMPLES", "20")),
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
    ],
)
def test_the_api_honours_its_openapi_contract(case, fuzz_app):
    case.call_and_validate(
        app=fuzz_app[0],
        headers={"Authorization": f"Bearer {fuzz_app[1]}"},
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_headers_conformance,
            response_schema_conformance,
        ],
    )
