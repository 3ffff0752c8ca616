"""Who may use chokaq's API under /admin/queue: the shop's staff, signed in with the shop's own HTTP
Basic credentials (app.config["STAFF"]: name -> {"password_hash", "role"}), never with chokaq tokens."""

from __future__ import annotations

from flask import current_app, request
from werkzeug.security import check_password_hash

from chokaq_api.flask_ext import Principal


def principal() -> Principal | None:
    auth = request.authorization
    if auth is None or auth.type != "basic" or not auth.username:
        return None
    member = current_app.config["STAFF"].get(auth.username)
    if member is None or not check_password_hash(member["password_hash"], auth.password or ""):
        return None
    return Principal(name=f"staff:{auth.username}", role=member["role"])
