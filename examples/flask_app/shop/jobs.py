"""The shop's handlers. `flask --app shop chokaq worker` runs them inside the app's context, so they use
the app's own database helper (get_db) as a view does."""

from __future__ import annotations

from typing import Any

from chokaq_ops import JobContext, job
from shop.db import get_db


@job("order.confirm.v1", idempotent=True)
def confirm_order(payload: dict[str, Any], ctx: JobContext) -> None:
    """Mark the order confirmed (a real shop would also send the e-mail)."""
    db = get_db()
    db.execute("UPDATE orders SET status = 'confirmed' WHERE id = ?", (payload["order"],))
    db.commit()


@job("shop.daily-report.v1", schedule="0 6 * * *", tz="Europe/Berlin")
def daily_report(payload: dict[str, Any], ctx: JobContext) -> None:
    """Every morning at 06:00 Berlin time, however many workers run: count yesterday's orders."""
    db = get_db()
    count = db.execute("SELECT count(*) FROM orders").fetchone()[0]
    db.execute("INSERT OR REPLACE INTO reports (day, orders) VALUES (date('now'), ?)", (count,))
    db.commit()
