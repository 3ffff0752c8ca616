"""The example shop (examples/flask_app) with chokaq's Flask extension, on SQLite, run by `make test`:
an order and its confirmation job commit together or not at all, `flask chokaq migrate` and a real
`flask chokaq worker` process that runs the handler inside the app's context, and the queue API behind
the shop's own sign-in."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from shop import chokaq, create_app
from shop.db import init_db
from werkzeug.security import generate_password_hash

HERE = Path(__file__).resolve().parent
STAFF = {
    "ann": {"password_hash": generate_password_hash("ann-pw"), "role": "admin"},
    "bob": {"password_hash": generate_password_hash("bob-pw"), "role": "reader"},
}


@pytest.fixture
def app(tmp_path: Path) -> Any:
    database = tmp_path / "shop.db"
    app = create_app({"DATABASE": str(database), "CHOKAQ_DB": f"sqlite:///{database}", "STAFF": STAFF})
    with app.app_context():
        init_db()
    result = app.test_cli_runner().invoke(args=["chokaq", "migrate"])
    assert result.exit_code == 0 and "chokaq: schema at version" in result.output, result.output
    yield app
    with app.app_context():
        chokaq.store.close()


def jobs(app: Any) -> list[dict[str, Any]]:
    with app.app_context():
        return [dict(j) for j in chokaq.store.list_hot(page_size=100).items]


def basic(user: str, password: str) -> dict[str, str]:
    import base64

    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_an_order_and_its_job_commit_together(app):
    r = app.test_client().post("/orders", json={"sku": "tea", "quantity": 3, "email": "ada@example.com"})
    assert r.status_code == 201, r.get_data(as_text=True)
    [job] = jobs(app)
    assert (job["id"], job["type"], job["queue"]) == (r.json["job"], "order.confirm.v1", "orders")
    assert job["payload"] == f'{{"order":{r.json["order"]}}}' and job["created_by"] == "shop-web"
    assert app.test_client().get(f"/orders/{r.json['order']}").json["status"] == "placed"


def test_a_rolled_back_order_leaves_no_job(app):
    client = app.test_client()
    r = client.post("/orders", json={"sku": "mug", "quantity": 5, "email": "ada@example.com"})
    assert r.status_code == 409  # the job was enqueued in the request, then the request rolled back
    assert jobs(app) == []
    assert client.get("/orders/1").status_code == 404
    ok = client.post("/orders", json={"sku": "mug", "quantity": 2, "email": "ada@example.com"})
    assert ok.status_code == 201 and [j["id"] for j in jobs(app)] == [ok.json["job"]]


def test_staff_use_the_queue_api_with_the_shops_own_sign_in(app):
    client = app.test_client()
    order = client.post("/orders", json={"sku": "tea", "quantity": 1, "email": "ada@example.com"}).json
    api = "/admin/queue/api/v1"
    assert client.get(f"{api}/jobs").status_code == 401
    assert client.get(f"{api}/jobs", headers=basic("bob", "wrong")).status_code == 401
    listed = client.get(f"{api}/jobs", headers=basic("bob", "bob-pw"))
    assert listed.status_code == 200 and [j["id"] for j in listed.json] == [order["job"]]
    assert listed.headers["X-Pagination"]
    # The access table still holds: a reader may not cancel; an admin creates a schedule, audited by name.
    refused = client.post(f"{api}/jobs/cancel", json={"ids": [order["job"]]}, headers=basic("bob", "bob-pw"))
    assert refused.status_code == 403 and "operator" in refused.json["message"]
    made = client.post(
        f"{api}/schedules",
        json={"name": "stock-check", "type": "shop.stock.v1", "cron": "*/15 * * * *"},
        headers=basic("ann", "ann-pw"),
    )
    assert made.status_code == 201 and made.json["created_by"] == "staff:ann"
    bad = client.post(
        f"{api}/schedules",
        json={"name": "x", "type": "t", "cron": "99 * * * *"},
        headers=basic("ann", "ann-pw"),
    )
    assert bad.status_code == 422 and "cron" in bad.json["errors"]["json"]
    audit = client.get(f"{api}/audit", headers=basic("bob", "bob-pw")).json
    assert [(a["actor"], a["action"]) for a in audit] == [("staff:ann", "schedule_create")]


@pytest.mark.slow
def test_a_flask_chokaq_worker_confirms_orders_inside_the_app_context(app, tmp_path):
    order = (
        app.test_client().post("/orders", json={"sku": "tea", "quantity": 1, "email": "ada@example.com"}).json
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
        "SHOP_DATABASE": app.config["DATABASE"],
        "SHOP_CHOKAQ_DB": app.config["CHOKAQ_DB"],
    }
    flask = str(Path(sys.executable).with_name("flask"))
    log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 - closed below
    worker = subprocess.Popen(
        [flask, "--app", "shop", "chokaq", "worker", "--worker-id", "shop-worker"],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
    )  # fmt: skip
    try:
        client = app.test_client()
        deadline = time.monotonic() + 30

        def until(done: Any) -> None:
            while not done():
                assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()
                assert worker.poll() is None, (tmp_path / "worker.log").read_text()
                time.sleep(0.1)

        # The handler confirmed the order through the app's get_db(), and the worker archived its job.
        until(lambda: client.get(f"/orders/{order['order']}").json["status"] == "confirmed")
        with app.app_context():
            until(lambda: chokaq.store.get_job(order["job"]).location == "archive")
            # The worker wrote the schedule its handler module declares (at its first schedule check).
            until(lambda: chokaq.store.list_schedules().total)
            nightly = chokaq.store.get_schedule("shop.daily-report.v1")
            assert (nightly.cron, nightly.tz, nightly.source) == ("0 6 * * *", "Europe/Berlin", "code")
    finally:
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(timeout=30)
        log.close()
    assert code == 0, (tmp_path / "worker.log").read_text()
