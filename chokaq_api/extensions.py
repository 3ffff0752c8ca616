"""The app's base classes (subclassed once so a later customisation is a one-line change) and the
per-app context views reach the store through."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from copy import deepcopy
from dataclasses import dataclass, field
from functools import wraps
from threading import BoundedSemaphore, Lock
from typing import TYPE_CHECKING, Any

import flask_smorest
import marshmallow as ma
from flask import current_app
from flask_smorest import abort as smorest_abort
from flask_smorest.utils import deepupdate

from chokaq_api.errors import ErrorSchema, from_http_exception
from chokaq_api.routes import access_doc

if TYPE_CHECKING:
    from chokaq_ops.engine.metrics import Metrics
    from chokaq_ops.settings import Settings
    from chokaq_ops.storage import Store

MAX_PAGE_SIZE = 1000
MAX_PAGE = 10_000_000
DEFAULT_PAGE_SIZE = 100
QUERY_FIELDS = "_chokaq_query_fields"


@dataclass
class Context:
    """What one app instance serves: settings, the store, its metrics and an optional engine host."""

    settings: Settings
    store: Store
    metrics: Metrics
    host: Any = None
    streams: BoundedSemaphore = field(default_factory=lambda: BoundedSemaphore(4))
    # Open event streams per token name (Api.SseMaxStreamsPerToken), guarded by stream_lock.
    stream_holders: dict[str, int] = field(default_factory=dict)
    stream_lock: Lock = field(default_factory=Lock)


def ctx() -> Context:
    return current_app.extensions["chokaq"]


def store() -> Store:
    return ctx().store


class Schema(ma.Schema):
    """Every request schema rejects unknown fields, so a typo answers 422 instead of being ignored."""

    class Meta:
        unknown = ma.RAISE
        ordered = True


def _field_names(schema: Any) -> frozenset[str]:
    instance = schema() if isinstance(schema, type) else schema
    return frozenset(f.data_key or name for name, f in instance.fields.items() if not f.dump_only)


def _allow_query(wrapper: Callable[..., Any], names: Iterable[str]) -> Callable[..., Any]:
    setattr(wrapper, QUERY_FIELDS, getattr(wrapper, QUERY_FIELDS, frozenset()) | frozenset(names))
    return wrapper


def _bounded_page(func: Callable[..., Any]) -> Callable[..., Any]:
    """flask-smorest bounds page_size but not page; a page far past any data must still be a 422, not an
    OFFSET too large for the database's integers."""

    @wraps(func)
    def view(*args: Any, **kwargs: Any) -> Any:
        page = kwargs["pagination_parameters"].page
        if page > MAX_PAGE:
            smorest_abort(
                422,
                message=f"invalid query.page: Must be less than or equal to {MAX_PAGE}.",
                errors={"query": {"page": [f"Must be less than or equal to {MAX_PAGE}."]}},
            )
        return func(*args, **kwargs)

    return view


def query_fields(view: Callable[..., Any]) -> frozenset[str]:
    """The query parameters a view declared (its query schema and pagination); others are rejected."""
    return getattr(view, QUERY_FIELDS, frozenset())


class Blueprint(flask_smorest.Blueprint):
    _docs: dict[str, Any]  # flask-smorest's per-endpoint doc info (the base class is untyped)
    DEFAULT_PAGINATION_PARAMETERS = {
        "page": 1,
        "page_size": DEFAULT_PAGE_SIZE,
        "max_page_size": MAX_PAGE_SIZE,
    }

    def arguments(self, schema: Any, *, location: str = "json", **kwargs: Any) -> Callable[..., Any]:
        decorator = super().arguments(schema, location=location, **kwargs)
        if location != "query":
            return decorator
        names = _field_names(schema)
        return lambda func: _allow_query(decorator(func), names)

    def paginate(self, pager: Any = None, **kwargs: Any) -> Callable[..., Any]:
        decorator = super().paginate(pager, **kwargs)
        return lambda func: _allow_query(decorator(_bounded_page(func)), ("page", "page_size"))

    def register_views_in_doc(self, api: Any, app: Any, spec: Any, *, name: str, parameters: Any) -> None:
        # Document each operation's role from routes.ROUTES, so the spec and the enforcement cannot differ.
        rules = {ep: next(app.url_map.iter_rules(f"{name}.{ep}")).rule for ep in self._docs}
        original = self._docs
        self._docs = _with_access_docs(original, rules)
        try:
            super().register_views_in_doc(api, app, spec, name=name, parameters=parameters)
        finally:
            self._docs = original


class Api(flask_smorest.Api):
    """flask-smorest's Api with our error shape for every HTTPException (404, 405, 413, 422, 500 ...)."""

    ERROR_SCHEMA = ErrorSchema

    def handle_http_exception(self, error: Any) -> Any:
        return from_http_exception(error)

    def _register_pagination_header(self) -> None:
        # X-Pagination holds JSON; OpenAPI describes such a header with `content`, not `schema` (which
        # would mean the `key=value,...` serialization and mislead generated clients and validators).
        names = ("total", "total_pages", "first_page", "last_page", "page", "previous_page", "next_page")
        self.spec.components.header(
            "PAGINATION",
            {
                "description": "Pagination metadata (JSON): total items, pages, current/previous/next page.",
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "properties": {name: {"type": "integer"} for name in names},
                            "required": ["total", "total_pages"],
                        }
                    }
                },
            },
            lazy=True,
        )


def _with_access_docs(docs: dict[str, Any], rules: dict[str, str]) -> dict[str, Any]:
    """A copy of a blueprint's doc info with each operation's access rule from the central table."""
    patched = deepcopy(docs)
    for endpoint, info in patched.items():
        for method, doc in info.items():
            if method == "parameters" or not isinstance(doc, dict):
                continue
            extra = access_doc(method.upper(), rules[endpoint])
            note = extra.pop("note", None)
            if note:
                docstring = doc.setdefault("docstring", {})
                text = docstring.get("description")
                docstring["description"] = f"{text}\n\n{note}" if text else note
            doc["manual_doc"] = deepupdate(extra, doc.get("manual_doc", {}))
    return patched
