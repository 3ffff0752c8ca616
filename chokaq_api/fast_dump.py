"""Job pages without marshmallow's per-field machinery: the same output, in under half the time.

A page of 100 jobs is about 3,000 field values. Marshmallow serializes each through several calls (the
field's `serialize`, the schema's accessor, `get_value`, the field's `_serialize`): 8 of the 14 ms a
`GET /dlq` page took in process, where the store's read took 5 (docs/benchmarks.md, "API pages").
`compile_dumper` reads a schema's fields once and returns a function that does per item exactly what
each field's `_serialize` does for the values a job holds. Only schemas it fully understands get one:
plain String, Integer, Float, Boolean and UtcDateTime fields under their own names, no hook but the
one pre-dump the job schemas share, nothing load-only; any other schema is dumped by marshmallow as
before. tests/api/test_fast_dump.py checks the output against marshmallow's own for every job schema.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import marshmallow as ma

from chokaq_api import fields

Dumper = Callable[[Mapping[str, Any]], dict[str, Any]]


def _text(value: Any) -> str | None:
    if value is None or type(value) is str:
        return value  # str() of a str is that str
    return ma.utils.ensure_text_type(value)


def _integer(value: Any) -> int | None:
    return None if value is None else int(value)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _same(value: Any) -> Any:
    return value  # marshmallow's Boolean dumps the value as it is


_UTC = fields.UtcDateTime()


def _utc(value: Any) -> str | None:
    return _UTC._serialize(value, None, None)


# Field classes by exact type (a subclass may serialize differently) and what their `_serialize` does.
_CONVERT: dict[type, Callable[[Any], Any]] = {
    ma.fields.String: _text,
    ma.fields.Integer: _integer,
    ma.fields.Float: _float,
    ma.fields.Boolean: _same,
    fields.UtcDateTime: _utc,
}


def compile_dumper(schema: ma.Schema, pre_dump: str) -> Dumper | None:
    """A function dumping one item (the mapping `pre_dump` returned) as `schema.dump` would, or None
    when the schema has anything it does not reproduce."""
    hooks = {tag: [h[0] for h in found] for tag, found in type(schema)._hooks.items() if found}
    if hooks != {"pre_dump": [pre_dump]}:
        return None
    if schema.load_only or schema.dump_fields.keys() != schema.fields.keys():
        return None
    plan: list[tuple[str, Callable[[Any], Any]]] = []
    for name, field in schema.dump_fields.items():
        convert = _CONVERT.get(type(field))
        if convert is None or field.attribute is not None or field.data_key not in (None, name):
            return None
        if isinstance(field, ma.fields.Number) and field.as_string:
            return None
        plan.append((name, convert))

    def dump(item: Mapping[str, Any]) -> dict[str, Any]:
        return {name: convert(item.get(name)) for name, convert in plan}

    return dump
