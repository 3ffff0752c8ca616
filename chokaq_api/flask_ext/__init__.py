"""The Flask extension for the application that enqueues (docs/flask.md).

```python
from flask import Flask, g
from chokaq_api.flask_ext import ChokaQ

chokaq = ChokaQ()

def create_app():
    app = Flask(__name__)
    app.config["CHOKAQ_DB"] = "sqlite:///instance/app.db"     # every CHOKAQ_* setting, as in the environment
    chokaq.init_app(app, connection=get_db)                    # the app's own sqlite3 / pyodbc connection
    return app

@app.post("/orders")
def order():
    get_db().execute("INSERT INTO orders ...")
    chokaq.enqueue("order.confirm.v1", {"order": 42})          # in the request's transaction
    get_db().commit()                                          # the order and its job, or neither
```

- `ChokaQ(app)` / `init_app(app)` reads the app's `CHOKAQ_*` keys (chokaq_api/flask_ext/state.py) and
  checks them at once; the store connects on first use.
- `chokaq.enqueue(...)` / `enqueue_many(...)` take the arguments of `chokaq_ops.connect(...).enqueue`.
  With `connection=` given to init_app (a callable returning the app's open connection, e.g. the
  `get_db()` of Flask's tutorial, or a SQLAlchemy session or connection), jobs enqueued inside an
  application context join that connection's transaction: they exist if and only if the app commits.
  `connection=None` on a call enqueues in a transaction of its own; `connection=conn` names one.
- `flask chokaq worker|serve|migrate` (chokaq_api/flask_ext/commands.py): handlers run inside the app's
  application context.
- `chokaq.api_blueprint(principal)` (chokaq_api/flask_ext/mount.py): the REST API as a blueprint of the
  app, behind the app's own sign-in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from flask import Blueprint, Flask, current_app, has_app_context

from chokaq_api.flask_ext.mount import Principal, api_blueprint
from chokaq_api.flask_ext.state import ACTOR_KEY, FlaskState, settings_from_config
from chokaq_ops import errors
from chokaq_ops.engine.metrics import Metrics
from chokaq_ops.models import NewJob
from chokaq_ops.storage import Store

__all__ = ["ChokaQ", "Principal"]

KEY = "chokaq"
APP_CONNECTION: Any = object()
"""The default of `connection=` on enqueue: the app's connection when init_app was given one."""


class ChokaQ:
    def __init__(self, app: Flask | None = None, *, connection: Callable[[], Any] | None = None) -> None:
        self._connection = connection
        # ChokaQ(app) binds this object to one app, which it then serves outside an app context too (a
        # script, a thread); with init_app (app factories) an app context says which app is meant.
        self._app = app
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask, *, connection: Callable[[], Any] | None = None) -> None:
        """Read the app's CHOKAQ_* configuration (validated now: a bad key raises ConfigError naming it),
        register the `flask chokaq` commands and keep the state in app.extensions["chokaq"]."""
        if KEY in app.extensions:
            raise errors.ConfigError("chokaq is already set up on this app (ChokaQ(app) or init_app, once)")
        settings = settings_from_config(app.config)
        store = Store.from_settings(settings)
        app.extensions[KEY] = FlaskState(
            settings=settings,
            store=store,
            metrics=Metrics(store, worker_gone_s=settings.health.worker_heartbeat_timeout),
            actor=app.config.get(ACTOR_KEY) or f"flask:{app.name}",
            connection=connection or self._connection,
        )
        from chokaq_api.flask_ext.commands import chokaq_commands

        app.cli.add_command(chokaq_commands)

    # ------------------------------------------------------------------ the current app's state

    @property
    def state(self) -> FlaskState:
        app = current_app._get_current_object() if has_app_context() else self._app  # type: ignore[attr-defined]
        if app is None:
            raise errors.ConfigError(
                "no Flask app: use chokaq inside an application context (a request, a `flask` command, "
                "`with app.app_context():`), or bind it to one app with ChokaQ(app)"
            )
        try:
            return app.extensions[KEY]
        except KeyError:
            raise errors.ConfigError(
                "chokaq is not set up on this app: call ChokaQ(app) or init_app"
            ) from None

    @property
    def settings(self) -> Any:
        return self.state.settings

    @property
    def store(self) -> Store:
        return self.state.store

    @property
    def client(self) -> Any:
        """chokaq_ops' DbClient over the app's store: enqueue, and every read the toolkit has."""
        return self.state.client

    # ------------------------------------------------------------------ producing

    def enqueue(
        self, type: str, payload: Any = None, *, connection: Any = APP_CONNECTION, **options: Any
    ) -> str:
        """Enqueue one job; returns its id. `options` as chokaq_ops' enqueue: queue, priority, tags,
        delay or at, idempotency_key, id. Inside an application context, with a connection given to
        init_app, the job joins that connection's open transaction."""
        return self.enqueue_many([{**options, "type": type, "payload": payload}], connection=connection)[0]

    def enqueue_many(
        self, jobs: Iterable[Mapping[str, Any] | NewJob], *, connection: Any = APP_CONNECTION
    ) -> list[str]:
        state = self.state
        if connection is APP_CONNECTION:
            connection = state.connection() if state.connection is not None and has_app_context() else None
        return state.client.enqueue_many(jobs, connection=dbapi_connection(connection))

    def api_blueprint(
        self, principal: Callable[[], Principal | Mapping[str, str] | None], *, name: str = "chokaq_api"
    ) -> Blueprint:
        """The REST API as a blueprint for this app, behind its own sign-in; see mount.api_blueprint."""
        return api_blueprint(principal, name=name)


def dbapi_connection(conn: Any) -> Any:
    """The DB-API connection under what an application holds: a sqlite3 or pyodbc connection as it is; a
    SQLAlchemy Session (its connection for the current transaction), Connection or raw pool connection
    unwrapped to the driver's. chokaq joins sqlite3 (SQLite) and pyodbc (PostgreSQL) connections."""
    if conn is None:
        return None
    if callable(getattr(conn, "connection", None)) and hasattr(conn, "get_bind"):  # a SQLAlchemy Session
        conn = conn.connection()
    inner = getattr(conn, "connection", None)  # a SQLAlchemy Connection: its pooled DB-API connection
    if inner is not None and not callable(inner) and hasattr(conn, "execute") and hasattr(conn, "engine"):
        conn = inner
    for attr in ("dbapi_connection", "driver_connection"):  # SQLAlchemy's pool proxy
        raw = getattr(conn, attr, None)
        if raw is not None:
            return raw
    return conn
