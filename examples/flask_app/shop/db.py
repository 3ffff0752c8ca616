"""The shop's database: one sqlite3 connection per application context (Flask's tutorial pattern), in
sqlite3's default mode, so the first write of a request opens a transaction the request commits."""

from __future__ import annotations

import sqlite3
from importlib import resources

import click
from flask import Flask, current_app, g


def get_db() -> sqlite3.Connection:
    if "db" not in g:
        g.db = sqlite3.connect(current_app.config["DATABASE"], timeout=30)
        g.db.row_factory = sqlite3.Row
    return g.db


def close_db(exc: BaseException | None = None) -> None:
    conn = g.pop("db", None)
    if conn is not None:
        conn.close()  # closing without a commit rolls back whatever the request left open


def init_db() -> None:
    get_db().executescript(resources.files("shop").joinpath("schema.sql").read_text())


@click.command("init-db")
def init_db_command() -> None:
    """Create the shop's tables and its stock."""
    init_db()
    click.echo("shop: tables created")


def init_app(app: Flask) -> None:
    app.teardown_appcontext(close_db)
    app.cli.add_command(init_db_command)
