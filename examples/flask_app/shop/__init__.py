"""A small shop that enqueues its background work with chokaq (docs/flask.md).

An order and the job that confirms it are written in the same SQLite transaction (the outbox pattern):
if the request fails after the enqueue, both roll back. Staff reach chokaq's REST API under
/admin/queue/api/v1 with the shop's own sign-in (HTTP Basic here), not with chokaq tokens.

    flask --app shop init-db                 # the shop's tables
    flask --app shop chokaq migrate          # chokaq's tables, in the same database file
    flask --app shop run                     # the shop
    flask --app shop chokaq worker           # runs shop.jobs inside the app's context
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from flask import Flask

from chokaq_api.flask_ext import ChokaQ
from shop import db

chokaq = ChokaQ()


def create_app(test_config: Mapping[str, Any] | None = None) -> Flask:
    app = Flask(__name__, instance_relative_config=True)
    os.makedirs(app.instance_path, exist_ok=True)
    database = os.path.join(app.instance_path, "shop.db")
    app.config.from_mapping(
        DATABASE=database,
        # chokaq's settings, spelled as its environment variables (docs/configuration.md). The jobs
        # live in the shop's own database file, so an order and its job share a transaction.
        CHOKAQ_DB=f"sqlite:///{database}",
        CHOKAQ_WORKER__HANDLERS="shop.jobs",
        CHOKAQ_WORKER__CONCURRENCY=2,
        CHOKAQ_ACTOR="shop-web",
        # Staff who may use the queue API, with their role there (passwords are hashes).
        STAFF={},
    )
    if test_config:
        app.config.update(test_config)
    app.config.from_prefixed_env("SHOP")
    db.init_app(app)
    # Jobs enqueued in a request join the request's database transaction.
    chokaq.init_app(app, connection=db.get_db)
    from shop import staff, views

    app.register_blueprint(views.bp)
    app.register_blueprint(chokaq.api_blueprint(staff.principal), url_prefix="/admin/queue/api/v1")
    return app
