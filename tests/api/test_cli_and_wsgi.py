"""`chokaq token`, `chokaq serve` start-up rules, and the engine-free WSGI entry point."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from chokaq_ops.cli import main
from chokaq_ops.errors import StorageError
from chokaq_ops.models import Actor
from tests.support.cli import rows
from tests.support.served import CHOKAQ


def test_token_create_prints_the_token_alone_then_list_and_revoke(db_url, store, capsys):
    assert main(["token", "create", "night-shift", "--role", "operator", "--db", db_url]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("chq_")
    token = out.strip()
    assert store.verify_token(token) == {"name": "night-shift", "role": "operator"}
    assert main(["token", "list", "--format", "json", "--db", db_url]) == 0
    listed = rows(capsys.readouterr().out)
    assert [(t["name"], t["role"], t["status"]) for t in listed] == [("night-shift", "operator", "active")]
    assert "token_hash" not in listed[0] and token not in json.dumps(listed)
    assert main(["token", "revoke", "night-shift", "--db", db_url]) == 0
    assert store.verify_token(token) is None
    assert main(["token", "revoke", "night-shift", "--db", db_url]) == 2  # not found (docs/cli-json.md)
    assert main(["token", "create", "x", "--role", "root", "--db", db_url]) == 2
    assert main(["token", "create", "bad name\n" * 20, "--role", "reader", "--db", db_url]) == 2
    actions = [a["action"] for a in store.list_audit().items]
    assert actions.count("token_create") == 1 and actions.count("token_revoke") == 1


def test_token_create_works_on_a_fresh_sqlite_file(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'new.db'}"
    assert main(["token", "create", "first", "--role", "admin", "--db", url]) == 0
    assert capsys.readouterr().out.startswith("chq_")


def test_serve_refuses_an_unmigrated_postgresql_database(pg_server, tmp_path):
    if pg_server is None:
        pytest.skip("PostgreSQL not reachable")
    url = pg_server.create(migrated=False)
    try:
        out = subprocess.run(
            [CHOKAQ, "serve", "--db", url, "--port", "0", "--no-worker", "--no-rescue", "--no-retention"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
        )
        assert out.returncode == 5 and "chokaq migrate" in out.stderr, out.stderr  # schema_outdated
    finally:
        pg_server.drop(url)


def test_serve_on_a_taken_port_says_so_and_starts_nothing(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run(
            [CHOKAQ, "serve", "--db", f"sqlite:///{tmp_path / 'c.db'}", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
        )
    assert out.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in out.stderr, out.stderr
    assert "worker started" not in out.stderr


def test_wsgi_app_comes_from_configuration_and_starts_no_engine(db_url, monkeypatch):
    monkeypatch.setenv("CHOKAQ_DB", db_url)
    sys.modules.pop("chokaq_api.wsgi", None)
    wsgi = importlib.import_module("chokaq_api.wsgi")
    try:
        context = wsgi.app.extensions["chokaq"]
        assert context.store.url == db_url and context.host is None
        token = context.store.create_token("probe", "reader", actor=Actor("test"))
        auth = {"Authorization": f"Bearer {token}"}
        ready = wsgi.app.test_client().get("/api/v1/health/ready", headers=auth).json
        assert (
            ready["checks"]["worker"]["status"] == "skipped" and ready["checks"]["schema"]["status"] == "ok"
        )
    finally:
        wsgi.app.extensions["chokaq"].store.close()
        sys.modules.pop("chokaq_api.wsgi", None)


def test_unexpected_failures_answer_500_in_the_error_shape_without_internals(client, store, monkeypatch):
    def boom() -> None:
        raise StorageError("relation jobs_secret does not exist at host db-7.internal")

    monkeypatch.setattr(store, "stats", boom)
    r = client.get("/stats", role="reader")
    assert r.status_code == 500 and set(r.json) == {"code", "status", "message", "errors"}
    assert "db-7" not in r.json["message"] and "jobs_secret" not in r.json["message"]

    def bug() -> None:
        raise ZeroDivisionError("oops")

    monkeypatch.setattr(store, "stats", bug)
    r = client.get("/stats", role="reader")
    assert r.status_code == 500 and r.json["code"] == 500 and "oops" not in r.json["message"]
