"""Property-based fuzzing of every route's headers, query strings and bodies: no input is a 5xx.

Hypothesis builds requests for each (method, rule) of the app's route map: path ids of any text, query
strings mixing the documented parameter names with stray ones, values that look like dates, ids and
numbers at and past their limits, JSON bodies of any shape (deep nesting included), raw non-JSON bytes
and odd headers (Last-Event-ID, Content-Type, Authorization). Each request runs with an admin token
against a real database (both dialects), and must answer below 500 in the one error shape.

CI runs CHOKAQ_FUZZ_EXAMPLES (default 25) examples per route; a long run sets it higher, e.g. 250 for
about 11,000 requests: the number sent is printed at the end of the module (`-s`).
"""

from __future__ import annotations

import json
import os
import re
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.conftest import fuzz_app_on

EXAMPLES = int(os.environ.get("CHOKAQ_FUZZ_EXAMPLES", "25"))
SPEC = yaml.safe_load((Path(__file__).resolve().parents[2] / "openapi.yaml").read_text(encoding="utf-8"))
SENT = {"requests": 0, "by_status": {}}


def _names() -> tuple[list[str], list[str]]:
    """Every query parameter name and body property name the spec documents."""
    query, props = set(), set()
    for item in SPEC["paths"].values():
        for op in item.values():
            for p in op.get("parameters", []) if isinstance(op, dict) else []:
                if p.get("in") == "query":
                    query.add(p["name"])

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            props.update(node.get("properties", {}))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(SPEC.get("components", {}))
    return sorted(query), sorted(props)


QUERY_NAMES, BODY_NAMES = _names()
LATIN1 = st.characters(min_codepoint=32, max_codepoint=255, exclude_characters="\x7f")
EDGE_TEXT = st.sampled_from(
    [
        "",
        " ",
        "²",
        "٣",
        "\x00",
        "%",
        "_",
        "\\",
        "'",
        '"',
        "' OR 1=1 --",
        "9" * 40,
        "-1",
        "0",
        str(2**63),
        str(2**63 - 1),
        str(-(2**63) - 1),
        "1e309",
        "NaN",
        "null",
        "true",
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:59:59-01:00",
        "2024-02-30T00:00:00Z",
        "2024-01-01T00:00:00 00:00",
        "1h",
        "-5s",
        "99999999999d",
        "Zombie",
        "zombie",
        "pending",
        "x" * 300,
        "ﬀ" * 60,
    ]
)
TEXT = st.one_of(
    EDGE_TEXT, st.text(max_size=40), st.from_regex(r"\A\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d)?([+-]\d\d:\d\d|Z)?\Z")
)
NUMBER = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=False, allow_infinity=False)
)
SCALAR = st.one_of(st.none(), st.booleans(), NUMBER, TEXT)
JSON = st.recursive(
    SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(BODY_NAMES), TEXT), inner, max_size=5),
    ),
    max_leaves=25,
)
# Bodies shaped like the API's: documented names with values of any type, nested filters and edits.
SHAPED = st.dictionaries(
    st.sampled_from(BODY_NAMES),
    st.one_of(
        JSON, st.dictionaries(st.sampled_from(BODY_NAMES), JSON, max_size=4), st.lists(TEXT, max_size=5)
    ),
    max_size=6,
)
DEEP = st.integers(min_value=60, max_value=200_000).flatmap(
    lambda n: st.sampled_from([b"[" * n + b"]" * n, b'{"a":' * n + b"1" + b"}" * n, b"[" * n])
)
CONTENT_TYPES = ["application/json", "text/plain", "application/x-www-form-urlencoded"]
RAW = st.one_of(st.binary(max_size=200), st.sampled_from([b"{", b"[]", b"\xff\xfe", b'{"ids": [', b"null"]))


@st.composite
def requests(draw: Any, method: str, rule: str) -> dict[str, Any]:
    def ident(m: re.Match[str]) -> str:
        return quote(draw(st.one_of(st.sampled_from(["missing", "default", "dlq1", "mail"]), TEXT)), safe="")

    path = re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", ident, rule)
    query = draw(
        st.dictionaries(
            st.one_of(st.sampled_from(QUERY_NAMES), st.text(string.ascii_lowercase, max_size=6)),
            TEXT,
            max_size=4,
        )
    )
    headers: dict[str, str] = {}
    if draw(st.booleans()):
        headers["Last-Event-ID"] = draw(
            st.one_of(
                st.text(LATIN1, max_size=30), EDGE_TEXT.filter(lambda t: "\x00" not in t and t.isascii())
            )
        )
    kind = draw(st.sampled_from(["json", "shaped", "shaped", "deep", "raw", "none"]))
    out: dict[str, Any] = {"method": method, "path": path, "query_string": query, "headers": headers}
    if kind in ("json", "shaped"):
        out["data"] = json.dumps(draw(JSON if kind == "json" else SHAPED))
        out["content_type"] = "application/json"
    elif kind in ("deep", "raw"):
        out["data"] = draw(DEEP if kind == "deep" else RAW)
        out["content_type"] = draw(st.sampled_from(CONTENT_TYPES))
    return out


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def fuzz_target(request, tmp_path_factory, pg_server) -> Iterator[tuple[Any, str]]:
    from tests.conftest import _skip_unless

    _skip_unless(request.param, pg_server)
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'chokaq.db'}"
    else:
        url = pg_server.create()
    with fuzz_app_on(url, **{"api.max_queues": 50}) as target:
        yield target
    if request.param != "sqlite":
        pg_server.drop(url)
    print(f"\nfuzz ({request.param}): {SENT['requests']} requests so far, by status {SENT['by_status']}")


def route_map() -> list[tuple[str, str]]:
    from chokaq_api import routes as route_table

    return sorted((method, route_table.PREFIX + rule) for method, rule in route_table.ROUTES)


@pytest.mark.parametrize("route", route_map(), ids=lambda r: f"{r[0]} {r[1]}")
def test_no_generated_request_is_a_server_error(fuzz_target, route):
    app, token = fuzz_target
    client = app.test_client()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(req=requests(*route))
    def one(req: dict[str, Any]) -> None:
        req = dict(req)
        headers = {"Authorization": f"Bearer {token}", **req.pop("headers")}
        r = client.open(headers=headers, buffered=True, **req)
        SENT["requests"] += 1
        SENT["by_status"][r.status_code] = SENT["by_status"].get(r.status_code, 0) + 1
        assert r.status_code < 500, (req, r.status_code, r.get_data()[:500])
        if r.status_code >= 400 and r.status_code != 405:
            assert set(r.json) >= {"code", "status", "message", "errors"}, (req, r.get_data()[:300])
        r.close()

    one()
