"""Request bodies that would break the parsers are refused before any view or JSON parser sees them.

Python's JSON decoder recurses once per nesting level, so a body of 100,000 `[` raises RecursionError
(a 500) wherever it is parsed. Real requests nest a few levels (a filter, a payload of modest shape), so
anything deeper than MAX_JSON_DEPTH answers 400 in the one error shape. The check counts brackets
outside strings without building the document, in C-speed steps (regex, translate, accumulate).
"""

from __future__ import annotations

import re
from itertools import accumulate

from flask import Flask, request
from flask_smorest import abort

MAX_JSON_DEPTH = 64
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def json_depth(data: bytes) -> int:
    """The deepest bracket nesting of a JSON text (0 for a scalar); brackets inside strings do not count."""
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    return max(accumulate(_STEP[b] for b in brackets), default=0)


def refuse_deep_json() -> None:
    """before_request: 400 for a JSON body nested deeper than MAX_JSON_DEPTH."""
    if not request.is_json:
        return  # webargs parses only JSON bodies; others are refused by the schema
    data = request.get_data(cache=True)
    if data.count(b"[") + data.count(b"{") <= MAX_JSON_DEPTH:
        return  # cannot be too deep: the common case costs two byte counts
    if json_depth(data) > MAX_JSON_DEPTH:
        abort(
            400,
            message=f"invalid json: nested deeper than {MAX_JSON_DEPTH} levels",
            errors={"json": {"_schema": [f"Nested deeper than {MAX_JSON_DEPTH} levels."]}},
        )


def init_app(app: Flask) -> None:
    app.before_request(refuse_deep_json)
