"""The shop's API: placing an order enqueues its confirmation in the same transaction."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, jsonify, request

from shop import chokaq
from shop.db import get_db

bp = Blueprint("shop", __name__)


@bp.post("/orders")
def place_order() -> Any:
    body = request.get_json(force=True)
    db = get_db()
    order = db.execute(
        "INSERT INTO orders (sku, quantity, email) VALUES (?, ?, ?)",
        (body["sku"], int(body["quantity"]), body["email"]),
    ).lastrowid
    # In the request's transaction (init_app(connection=get_db)): the job exists only if the order does.
    job = chokaq.enqueue(
        "order.confirm.v1", {"order": order}, queue="orders", idempotency_key=f"confirm:{order}"
    )
    taken = db.execute(
        "UPDATE items SET stock = stock - ? WHERE sku = ? AND stock >= ?",
        (int(body["quantity"]), body["sku"], int(body["quantity"])),
    ).rowcount
    if not taken:
        abort(409, description=f"not enough {body['sku']} in stock")  # the order and its job roll back
    db.commit()
    return jsonify(order=order, job=job), 201


@bp.get("/orders/<int:order>")
def show_order(order: int) -> Any:
    row = (
        get_db()
        .execute("SELECT id, sku, quantity, email, status FROM orders WHERE id = ?", (order,))
        .fetchone()
    )
    if row is None:
        abort(404)
    return jsonify(dict(row))
