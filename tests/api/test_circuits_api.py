"""GET /circuits and PATCH /circuits/{type} through the Flask test client."""

from __future__ import annotations

from tests.storage.storage_factories import audit


def test_list_get_force_open_and_close(client, store):
    assert client.get("/circuits", role="reader").json == []
    item = {"type": "pay.v1", "n": 5, "threshold": 5, "window_s": 60, "break_s": 30, "half_open": 1}
    store.circuit_failures([item])
    [row] = client.get("/circuits", role="reader").json
    assert (row["type"], row["state"], row["failures"], row["forced"]) == ("pay.v1", "open", 5, False)
    assert 29 < row["open_for_s"] <= 30 and row["open_until"].endswith("Z")
    r = client.patch("/circuits/pay.v1", role="admin", json={"state": "closed"})
    assert r.status_code == 200 and (r.json["state"], r.json["failures"]) == ("closed", 0)
    r = client.patch("/circuits/mail/v2", role="admin", json={"state": "open"})  # types may hold a slash
    assert r.status_code == 200 and (r.json["type"], r.json["state"], r.json["forced"]) == (
        "mail/v2",
        "open",
        True,
    )
    assert client.get("/circuits/mail/v2", role="reader").json["forced"] is True
    assert [a["actor"] for a in audit(store, "set_circuit")] == ["admin", "admin"]


def test_bad_input_and_roles(client, store):
    for body in ({"state": "half_open"}, {}, {"state": "open", "extra": 1}):
        r = client.patch("/circuits/pay.v1", role="admin", json=body)
        assert r.status_code == 422, body
    assert client.patch("/circuits/pay.v1", role="operator", json={"state": "open"}).status_code == 403
    assert client.get("/circuits/never.failed", role="reader").status_code == 404
    assert store.list_circuits() == [] and audit(store, "set_circuit") == []
