"""The Flask extension (chokaq_api/flask_ext) on SQLite and PostgreSQL: CHOKAQ_* configuration, enqueue in a
request's own transaction (sqlite3, pyodbc, a SQLAlchemy session), the API mounted behind the app's own
sign-in, the `flask chokaq` commands and handlers run inside the app's context. The example app has its
own test (examples/flask_app/test_shop.py)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask, abort, current_app, g, jsonify, request

from chokaq_api.flask_ext import ChokaQ, Principal
from chokaq_api.flask_ext.commands import in_app_context
from chokaq_api.flask_ext.state import settings_from_config
from chokaq_ops import errors
from chokaq_ops.engine.handlers import Registry
from chokaq_ops.engine.hosting import Host
from chokaq_ops.models import Actor
from chokaq_ops.storage import Store
from tests.support.dbprobe import scalar, sql
from tests.support.polling import wait_for

REPO = Path(__file__).resolve().parents[2]


def app_connection(store: Store, url: str) -> Any:
    """The application's own connection to the queue's database, in a transaction-per-request mode."""
    if store.dialect.name == "sqlite":
        return sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30)
    import pyodbc

    return pyodbc.connect(store.dialect.odbc, autocommit=False)


def make_app(url: str, store: Store, **config: Any) -> tuple[Flask, ChokaQ]:
    """An application with an `orders` table beside chokaq's, one connection per app context, and
    POST /orders that writes an order and enqueues its job, then fails when asked to."""
    app = Flask("shopapp")
    app.config.update(CHOKAQ_DB=url, **config)

    def get_db() -> Any:
        if "db" not in g:
            g.db = app_connection(store, url)
        return g.db

    @app.teardown_appcontext
    def close(exc: BaseException | None) -> None:
        conn = g.pop("db", None)
        if conn is not None:
            conn.close()

    chokaq = ChokaQ(app, connection=get_db)

    @app.post("/orders")
    def order() -> Any:
        body = request.get_json()
        db = get_db()
        db.cursor().execute("INSERT INTO orders (id, total) VALUES (?, ?)", (body["id"], body["total"]))
        job = chokaq.enqueue("order.confirm.v1", {"order": body["id"]}, queue="orders")
        if body.get("fail"):
            abort(409)  # after the enqueue: the request's transaction rolls back, job and all
        db.commit()
        return jsonify(job=job), 201

    with Store(url, pool_size=1) as s:
        conn = app_connection(s, url)
        conn.cursor().execute("CREATE TABLE orders (id integer PRIMARY KEY, total integer)")
        conn.commit()
        conn.close()
    return app, chokaq


@pytest.fixture
def shop(db_url: str, store: Store) -> Iterator[tuple[Flask, ChokaQ]]:
    app, chokaq = make_app(db_url, store)
    yield app, chokaq
    app.extensions["chokaq"].store.close()


def test_configuration_comes_from_the_apps_chokaq_keys_over_the_environment(tmp_path):
    settings = settings_from_config(
        {"CHOKAQ_DB": f"sqlite:///{tmp_path}/a.db", "CHOKAQ_WORKER__CONCURRENCY": 3, "SECRET_KEY": "x"},
        environ={"CHOKAQ_WORKER__CONCURRENCY": "9", "CHOKAQ_SCHEDULES__CHECK_INTERVAL": "500ms"},
    )
    assert settings.storage.url == f"sqlite:///{tmp_path}/a.db"
    assert settings.worker.concurrency == 3  # the app's own key wins over the environment
    assert settings.schedules.check_interval == 0.5
    # Tables too: what Flask's from_prefixed_env makes of FLASK_CHOKAQ_WORKER__CONCURRENCY=5.
    nested = settings_from_config(
        {"CHOKAQ_WORKER": {"CONCURRENCY": 5}, "CHOKAQ_QUEUES": {"sms": {"ZOMBIE_TIMEOUT_SECONDS": 60}}},
        environ={},
    )
    assert nested.worker.concurrency == 5 and nested.zombie_timeout_for("sms") == 60
    toml = tmp_path / "c.toml"
    toml.write_text("[Retry]\nMaxAttempts = 7\n")
    assert settings_from_config({"CHOKAQ_CONFIG": str(toml)}, environ={}).retry.max_attempts == 7
    with pytest.raises(errors.ConfigError) as raised:
        settings_from_config({"CHOKAQ_SCHEDULES__CHECK_INTERVALL": "1s"}, environ={})
    assert "CheckInterval" in str(raised.value)  # a typo is refused with a suggestion
    app = Flask("twice")
    app.config["CHOKAQ_DB"] = f"sqlite:///{tmp_path}/b.db"
    ChokaQ(app)
    with pytest.raises(errors.ConfigError):
        ChokaQ(app)


@pytest.mark.parametrize("fail", [False, True])
def test_a_request_enqueues_in_its_own_transaction(shop, store, fail):
    app, _ = shop
    r = app.test_client().post("/orders", json={"id": 7, "total": 250, "fail": fail})
    assert r.status_code == (409 if fail else 201)
    assert scalar(store, "SELECT count(*) FROM orders") == (0 if fail else 1)
    jobs = [j.id for j in store.list_hot().items]
    assert jobs == ([] if fail else [r.json["job"]])
    if not fail:
        job = store.get_job(r.json["job"])
        assert (job.type, job.queue, job.payload, job.created_by) == (
            "order.confirm.v1", "orders", '{"order":7}', "flask:shopapp"
        )  # fmt: skip


def test_outside_a_request_or_with_connection_none_an_enqueue_commits_on_its_own(shop, store):
    app, chokaq = shop
    with app.app_context():
        alone = chokaq.enqueue("report.v1", {"n": 1}, connection=None)  # not the app's transaction
        ids = chokaq.enqueue_many([{"type": "report.v1", "payload": {"n": 2}}], connection=None)
    assert {j.id for j in store.list_hot().items} == {alone, *ids}
    bound = chokaq.enqueue("report.v1", {"n": 3})  # ChokaQ(app) is bound to its app outside a context too
    assert store.get_job(bound).type == "report.v1"
    with pytest.raises(errors.ConfigError) as raised:
        ChokaQ().enqueue("x.v1")  # an init_app-style object outside any app context
    assert "application context" in str(raised.value)
    with app.app_context():
        # The client is the toolkit's: reads work too.
        assert set(chokaq.client.load_hot()["id"]) == {alone, *ids, bound}


def test_a_sqlalchemy_session_is_joined_too(tmp_path, sqlite_template):
    import shutil

    import sqlalchemy as sa
    from sqlalchemy.orm import Session

    path = tmp_path / "sa.db"
    shutil.copyfile(sqlite_template, path)
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE orders (id integer PRIMARY KEY)"))
    app = Flask("sa")
    app.config["CHOKAQ_DB"] = f"sqlite:///{path}"
    chokaq = ChokaQ(app, connection=lambda: g.session)
    for outcome in ("rollback", "commit"):
        with app.app_context():
            g.session = Session(engine)
            g.session.execute(sa.text("INSERT INTO orders (id) VALUES (1)"))
            chokaq.enqueue("order.confirm.v1", {"order": 1})
            getattr(g.session, outcome)()
            g.session.close()
    with Store(f"sqlite:///{path}") as store:
        assert [j.type for j in store.list_hot().items] == ["order.confirm.v1"]  # the committed one only
        assert scalar(store, "SELECT count(*) FROM orders") == 1
    app.extensions["chokaq"].store.close()
    engine.dispose()


STAFF = {"ann": "admin", "olga": "operator", "rita": "reader"}


def who() -> Principal | None:
    user = request.headers.get("X-User")
    return Principal(f"staff:{user}", STAFF[user]) if user in STAFF else None


def test_the_api_mounted_behind_the_apps_own_sign_in(shop, store):
    app, chokaq = shop
    bp = chokaq.api_blueprint(who)
    seen: list[str] = []
    bp.before_request(lambda: seen.append(request.path))  # the app's own hooks on the blueprint run
    app.register_blueprint(bp, url_prefix="/ops/queue/api/v1")
    client = app.test_client()
    api = "/ops/queue/api/v1"
    r = client.post("/orders", json={"id": 1, "total": 5})
    job = r.json["job"]
    assert client.get(f"{api}/jobs").status_code == 401
    got = client.get(f"{api}/jobs/{job}", headers={"X-User": "rita"})
    assert got.status_code == 200 and got.json["location"] == "hot" and seen
    listed = client.get(f"{api}/jobs?page_size=1", headers={"X-User": "rita"})
    assert listed.status_code == 200 and '"total": 1' in listed.headers["X-Pagination"]
    # Roles from the access table, errors in the API's one shape, audit rows named by the app's user.
    refused = client.post(f"{api}/jobs/cancel", json={"ids": [job]}, headers={"X-User": "rita"})
    assert refused.status_code == 403 and set(refused.json) == {"code", "status", "message", "errors"}
    bad = client.post(
        f"{api}/schedules", json={"name": "x", "type": "t", "cron": "* *"}, headers={"X-User": "ann"}
    )
    assert bad.status_code == 422 and "cron" in bad.json["errors"]["json"]
    unknown = client.get(f"{api}/jobs?colour=red", headers={"X-User": "rita"})
    assert unknown.status_code == 422 and "colour" in unknown.json["errors"]["query"]
    cancelled = client.post(f"{api}/jobs/cancel", json={"ids": [job]}, headers={"X-User": "olga"})
    assert cancelled.status_code == 200 and cancelled.json["cancelled"] == [job]
    assert [(a.actor, a.action) for a in store.list_audit().items] == [("staff:olga", "cancel")]
    assert client.get(f"{api}/health/live").status_code == 200  # open routes stay open
    assert client.get(api).status_code == 404  # the index (its links name /api/v1) is not mounted


def test_a_principal_with_a_role_chokaq_does_not_know_is_a_server_error(shop):
    app, chokaq = shop
    app.register_blueprint(chokaq.api_blueprint(lambda: Principal("x", "superuser")), url_prefix="/q")
    r = app.test_client().get("/q/jobs")
    assert r.status_code == 500 and "superuser" not in r.json["message"]


def test_handlers_run_inside_the_apps_context(shop, store):
    app, _ = shop
    registry = Registry()
    seen: list[tuple[str, str]] = []

    @registry.job("order.confirm.v1")
    def confirm(payload, ctx):
        seen.append((current_app.name, g.get("marker", "fresh")))
        g.marker = "used"  # a fresh context per job: the next job sees none

    r = app.test_client().post("/orders", json={"id": 1, "total": 5})
    app.test_client().post("/orders", json={"id": 2, "total": 5})
    settings = app.extensions["chokaq"].settings.with_overrides(
        {
            "worker.polling_interval": 0.05,
            "execution.heartbeat_interval_min": 0.1,
            "execution.heartbeat_interval_max": 0.2,
        }
    )
    wrapped = in_app_context(app, registry)
    assert wrapped.get("order.confirm.v1").name.endswith("confirm")  # its own name in logs
    host = Host(settings, store, registry=wrapped, run_rescue=False, run_retention=False, run_schedules=False)
    host.start()
    try:
        wait_for(
            lambda: store.get_job(r.json["job"]).location == "archive" and len(seen) == 2, 15, "both jobs"
        )
    finally:
        host.shutdown()
    assert seen == [("shopapp", "fresh"), ("shopapp", "fresh")]


def test_flask_chokaq_migrate_and_usage_errors(tmp_path, monkeypatch):
    from chokaq_ops.engine import handlers

    monkeypatch.setattr(handlers, "registry", Registry())  # no handler another test registered
    app = Flask("cli")
    app.config["CHOKAQ_DB"] = f"sqlite:///{tmp_path}/cli.db"
    ChokaQ(app)
    runner = app.test_cli_runner()
    first = runner.invoke(args=["chokaq", "migrate"])
    assert first.exit_code == 0 and "applied" in first.output
    again = runner.invoke(args=["chokaq", "migrate"])
    assert again.exit_code == 0 and "already current" in again.output
    no_handlers = runner.invoke(args=["chokaq", "worker"])
    assert no_handlers.exit_code == 2 and "no job handlers" in no_handlers.output
    missing = runner.invoke(args=["chokaq", "worker", "--handlers", "no.such.module"])
    assert missing.exit_code == 2 and "no.such.module" in missing.output
    app.extensions["chokaq"].store.close()


@pytest.mark.slow
def test_flask_chokaq_serve_serves_the_api_and_fires_the_apps_schedules(tmp_path, db_url, store):
    """A real `flask chokaq serve` process: the operator API on the app's configuration, the handler
    module's declared schedule written and run by its engine."""
    (tmp_path / "flaskapp.py").write_text(
        "from flask import Flask\n"
        "from chokaq_api.flask_ext import ChokaQ\n"
        "app = Flask('served')\n"
        "app.config.from_prefixed_env('APP')\n"
        "ChokaQ(app)\n"
    )
    token = store.create_token("ops", "reader", actor=Actor("test"))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), str(REPO), os.environ.get("PYTHONPATH")])),
        "APP_CHOKAQ_DB": db_url,
        "APP_CHOKAQ_WORKER__HANDLERS": "tests.support.handlers_schedule",
        "APP_CHOKAQ_SCHEDULES__CHECK_INTERVAL": "0.2",
        "APP_CHOKAQ_SCHEDULES__MISFIRE_GRACE": "5",
    }
    env.pop("CHOKAQ_CONFIG", None)
    flask = str(Path(sys.executable).with_name("flask"))
    proc = subprocess.Popen(
        [flask, "--app", "flaskapp", "chokaq", "serve", "--port", "0", "--concurrency", "2"],
        env=env, stdout=subprocess.PIPE, stderr=open(tmp_path / "serve.log", "wb"), cwd=tmp_path,  # noqa: SIM115
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert "serving http://" in line, (tmp_path / "serve.log").read_text()
        base = line.split("serving ", 1)[1].split()[0]
        import requests

        def succeeded() -> bool:
            r = requests.get(
                f"{base}/schedules/soak.every-second",
                headers={"Authorization": f"Bearer {token}"},
                timeout=10,
            )
            return r.status_code == 200 and r.json()["last_outcome"] == "succeeded"

        wait_for(succeeded, 30, "the declared schedule's jobs to run")
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    assert code == 0, (tmp_path / "serve.log").read_text()
    assert sql(store, "SELECT source FROM schedules") == [("code",)]
