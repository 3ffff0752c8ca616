"""HttpClient against a served API (a real socket): the same frames and methods as DbClient, plans that
survive a killed client, roles, and retries only where they are safe."""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections import Counter

import pandas as pd
import pytest

from chokaq_ops import connect, errors
from chokaq_ops.client import HttpClient
from chokaq_ops.models import Actor, FailureReason
from tests.support.clients import SHUTDOWN_POLL_S
from tests.support.seeds import plan_audit_ids, seed_archive, seed_dlq, seed_hot, table_counts


def test_frames_over_http_equal_frames_from_the_database(api, client, store) -> None:
    url, tokens = api
    seed_dlq(store, 1200, reason=FailureReason.Zombie)  # more than one API page
    seed_dlq(store, 3, queue="mail", reason=FailureReason.Fatal)
    seed_archive(store, 2)
    seed_hot(store, 2)
    remote = connect(url, tokens["reader"])
    assert isinstance(remote, HttpClient)
    over_http, direct = remote.load_dlq(progress=False), client.load_dlq()
    pd.testing.assert_frame_equal(over_http, direct)
    pd.testing.assert_frame_equal(remote.load_dlq(reason="Fatal"), client.load_dlq(reason="Fatal"))
    pd.testing.assert_frame_equal(
        remote.load_dlq(heavy=False, limit=5), client.load_dlq(heavy=False, limit=5)
    )
    pd.testing.assert_frame_equal(remote.load_archive(), client.load_archive())
    pd.testing.assert_frame_equal(remote.load_hot(), client.load_hot())
    assert sum(len(p) for p in remote.iter_dlq(queue="mail")) == 3


def test_the_same_methods_over_http(api, store) -> None:
    url, tokens = api
    dead = seed_dlq(
        store, 4, queue="billing", payload=lambda i: f'{{"order": {i},}}', reason=FailureReason.Fatal
    )
    pending = seed_hot(store, 2)
    op = connect(url, tokens["operator"])
    admin = connect(url, tokens["admin"])
    assert op.get_job(dead[0])["location"] == "dlq"
    assert op.preview(reason="Fatal")["matched"] == 4
    assert op.summary(queue="billing")["total"] == 4
    assert op.edit(dead[0], payload={"order": 0})["payload"] == '{"order":0}'
    assert op.resurrect([dead[0]]) == {"resurrected": 1, "batches": 1}
    assert (
        op.resurrect([dead[1]], edits={dead[1]: {"payload": '{"order": 1}', "priority": 3}})["resurrected"]
        == 1
    )
    assert store.get_job(dead[1])["priority"] == 3
    with pytest.raises(errors.Forbidden):
        op.purge([dead[2]])
    assert admin.purge(reason="Fatal") == {"purged": 2, "batches": 1}
    assert op.cancel(pending) == {"cancelled": pending, "skipped": []}
    assert op.pause("billing")["paused"] is True and op.resume("billing")["paused"] is False
    assert admin.set_queue("billing", max_workers=2)["max_workers"] == 2
    assert set(op.queues()["name"]) >= {"billing", "reports"}
    assert op.stats()["dlq"] == 2
    audit = op.audit(actor="operator-token")
    assert {"edit_dlq", "resurrect", "cancel"} <= set(audit["action"]) and isinstance(
        audit["details"].iloc[0], dict | None
    )
    with pytest.raises(errors.JobNotFound):
        op.get_job("nope")
    with pytest.raises(errors.ValidationError) as bad:
        op.edit(dead[0], payload="{broken")  # resurrected: a pending hot job now
    assert bad.value.field == "payload"
    with pytest.raises(errors.Unauthorized):
        connect(url, "chq_wrong").stats()
    with pytest.raises(errors.ValidationError):
        connect(url, tokens["admin"], actor="someone")  # the token's name is the actor


KILL_AFTER_FIRST_CHUNK = textwrap.dedent(
    """
    import os, signal, sys
    import chokaq_ops
    client = chokaq_ops.connect(sys.argv[1], sys.argv[2])
    client.plan(sys.argv[3]).execute(progress=False, on_chunk=lambda c: os.kill(os.getpid(), signal.SIGKILL))
    """
)


def test_plan_over_the_api_survives_a_killed_client(api, store) -> None:
    url, tokens = api
    ids = seed_dlq(store, 2500, reason=FailureReason.Zombie)
    remote = connect(url, tokens["operator"])
    plan = remote.plan_resurrect(reason="Zombie")
    assert (plan.total, plan.chunks, plan.state, plan.actor) == (2500, 3, "ready", "operator-token")
    assert plan.by_reason == {"Zombie": 2500} and len(plan.sample) == 10

    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    killed = subprocess.run(
        [sys.executable, "-c", KILL_AFTER_FIRST_CHUNK, url, tokens["operator"], plan.id],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    plan.refresh()
    assert (plan.state, plan.chunks_done, plan.done) == ("running", 1, 1000)
    again = plan.items().query("outcome == 'done'")["id"].tolist()[:3]
    store.cancel_many(again, actor=Actor("bob"))  # back in the DLQ before the plan resumes

    chunks: list[dict] = []
    remote.plan(plan.id).execute(progress=False, on_chunk=chunks.append)
    plan.refresh()
    assert [c["claimed"] for c in chunks] == [1000, 500]
    assert (plan.state, plan.done, plan.skipped) == ("done", 2500, 0)
    audited = plan_audit_ids(store, plan.id, "resurrect")
    assert len(audited) == 2500 and set(audited) == set(ids)
    assert Counter(audited).most_common(1)[0][1] == 1
    audit = remote.audit(plan_id=plan.id)  # the plan's lifecycle and its 2500 resurrects
    assert len(audit) == 2503 and set(audit["actor"]) == {"operator-token"}
    assert Counter(audit["action"]) == {
        "resurrect": 2500,
        "plan_create": 1,
        "plan_start": 1,
        "plan_finish": 1,
    }
    assert table_counts(store)["dlq"] == 3
    assert remote.plans()["id"].tolist() == [plan.id]


def test_plan_roles_and_edits_over_the_api(api, store) -> None:
    url, tokens = api
    ids = seed_dlq(store, 3, payload=lambda i: '{"x": 1,}', reason=FailureReason.Fatal)
    reader, op, admin = (connect(url, tokens[r]) for r in ("reader", "operator", "admin"))
    with pytest.raises(errors.Forbidden):
        reader.plan_resurrect(ids)
    with pytest.raises(errors.Forbidden):
        op.plan_purge(ids)
    purge = admin.plan_purge(ids[2:])
    with pytest.raises(errors.Forbidden):
        op.plan(purge.id).execute(progress=False)
    with pytest.raises(errors.ValidationError) as bad:
        op.plan_resurrect(ids, edits={ids[0]: {"payload": "{still broken"}})
    assert bad.value.field == "payload"
    plan = op.plan_resurrect(ids[:2], edits={ids[0]: {"payload": {"x": 1}}, ids[1]: {"tags": "fixed"}})
    assert plan.edited == 2
    plan.execute(progress=False)
    assert store.get_job(ids[0])["payload"] == '{"x":1}' and store.get_job(ids[1])["tags"] == "fixed"
    items = plan.items()
    assert set(items["outcome"]) == {"done"} and items["done_at"].notna().all()
    purge.discard()
    assert admin.plan(purge.id).state == "discarded" and table_counts(store)["dlq"] == 1


class _Flaky(http.server.BaseHTTPRequestHandler):
    """Answers 503 to the first request of each method, then 200."""

    seen: Counter[str] = Counter()

    def _answer(self) -> None:
        _Flaky.seen[self.command] += 1
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        code = 503 if _Flaky.seen[self.command] == 1 else 200
        body = json.dumps(
            {"code": code, "message": "busy", "errors": {}} if code == 503 else {"ok": True}
        ).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


def test_reads_retry_on_5xx_but_changes_do_not() -> None:
    _Flaky.seen.clear()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=server.serve_forever, args=(SHUTDOWN_POLL_S,), daemon=True).start()
    try:
        client = HttpClient(f"http://127.0.0.1:{server.server_port}", "token", retries=2)
        assert client.stats() == {"ok": True}  # GET: 503, then retried
        assert _Flaky.seen["GET"] == 2
        with pytest.raises(errors.TransientStorageError):
            client.cancel(["a"])  # POST: a 503 may have applied something; never resent
        assert _Flaky.seen["POST"] == 1
    finally:
        server.shutdown()
    closed = HttpClient("http://127.0.0.1:9", "token", retries=1)  # nothing listens on the discard port
    with pytest.raises(errors.TransientStorageError):
        closed.stats()


def test_set_circuit_over_http_keeps_a_slash_in_the_type_key(api, store) -> None:
    url, tokens = api
    admin = connect(url, tokens["admin"])
    row = admin.set_circuit("billing/charge.v1", "open")
    assert (row["type"], row["state"]) == ("billing/charge.v1", "open")
    assert [c["type"] for c in store.list_circuits()] == ["billing/charge.v1"]
