"""The application factory."""

from __future__ import annotations

from collections.abc import Mapping
from threading import BoundedSemaphore
from typing import Any

from flask import Flask

from chokaq_api import auth, bodies, deck, errors
from chokaq_api.config import DefaultConfig
from chokaq_api.extensions import Api, Context
from chokaq_api.resources import register_blueprints
from chokaq_ops.engine.metrics import Metrics
from chokaq_ops.redact import install_log_filter
from chokaq_ops.settings import Settings, load_settings
from chokaq_ops.storage import Store


def create_app(
    settings: Settings | None = None,
    *,
    store: Store | None = None,
    host: Any = None,
    test_config: Mapping[str, Any] | None = None,
) -> Flask:
    """Build the API over `store` (else one opened from `settings`, else from the configuration).

    `host` is an engine Host running in this process (`chokaq serve`): readiness then checks its worker
    and /metrics shows its counters. Without one (gunicorn, tests) the app only serves the API.
    """
    settings = settings or load_settings()
    app = Flask("chokaq_api", static_folder=None)
    app.config.from_object(DefaultConfig)
    app.config["MAX_CONTENT_LENGTH"] = settings.api.max_body_bytes
    if test_config:
        app.config.update(test_config)
    if store is None:
        store = Store.from_settings(settings)
    app.extensions["chokaq"] = context_for(settings, store, host)
    errors.init_app(app)
    auth.init_app(app)  # first: nothing reads a body before the token is checked
    bodies.init_app(app)
    install_log_filter()
    api = Api(app)
    register_blueprints(api)
    deck.init_app(app, settings.deck)
    return app


def context_for(settings: Settings, store: Store, host: Any = None) -> Context:
    """What an app serves from: views reach settings, store, metrics, host and stream slots only through it,
    so an app can be pointed at another store by replacing it. The tests do that per test instead of
    building an app each time (about 50 ms, most of it the OpenAPI document); the routes, handlers and
    document depend only on the settings that shape them (Api.MaxBodyBytes, the Deck section)."""
    metrics = getattr(host, "metrics", None) or Metrics(
        store, worker_gone_s=settings.health.worker_heartbeat_timeout
    )
    return Context(
        settings=settings,
        store=store,
        host=host,
        metrics=metrics,
        streams=BoundedSemaphore(settings.api.sse_max_streams),
    )
