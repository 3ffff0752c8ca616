"""Event streams: one token's share of the stream slots, revoked tokens, clients that go away."""

from __future__ import annotations

import time

import pytest
import requests

from chokaq_ops.models import Actor
from tests.api.conftest import ApiClient
from tests.support.polling import wait_for
from tests.support.served import FAST_TOML


def test_one_token_cannot_hold_more_than_its_share_of_streams(store, settings, tokens, bound_app):
    shared = settings.with_overrides({"api.sse_max_streams": 3, "api.sse_max_streams_per_token": 1})
    client = ApiClient(bound_app(shared, store=store), tokens)
    first = client.get("/events", role="reader", buffered=False)
    assert first.status_code == 200
    greedy = client.get("/events", role="reader", buffered=False)
    assert greedy.status_code == 429 and greedy.headers["Retry-After"] == "5"
    assert set(greedy.json) == {"code", "status", "message", "errors"}
    assert "SseMaxStreamsPerToken" in greedy.json["message"]
    # The slots the greedy token could not take are there for the others.
    others = [client.get("/events", role=role, buffered=False) for role in ("operator", "admin")]
    assert [r.status_code for r in others] == [200, 200]
    first.close()
    again = client.get("/events", role="reader", buffered=False)
    assert again.status_code == 200
    for r in [again, *others]:
        r.close()


def test_a_revoked_tokens_stream_ends(store, settings, tokens, bound_app):
    fast = settings.with_overrides({"api.sse_max_duration": 30, "api.sse_token_recheck": 0.1})
    client = ApiClient(bound_app(fast, store=store), tokens)
    token = store.create_token("watcher", "reader", actor=Actor("test"))
    r = client.get("/events", token=token, buffered=False)
    assert r.status_code == 200
    chunks = iter(r.response)
    assert next(chunks).startswith(b"retry:")
    store.revoke_token("watcher", actor=Actor("test"))
    started = time.monotonic()
    rest = b"".join(chunks)  # ends only if the server ends the stream
    assert time.monotonic() - started < 10 and b"token was revoked" in rest
    r.close()
    assert client.get("/events", token=token).status_code == 401


@pytest.mark.slow
def test_a_disconnected_clients_stream_slot_comes_back_quickly(e2e):
    _, tokens, serve, workdir = e2e
    # No keep-alive for 30 s: a slot held until the next write would stay taken through the test.
    quiet = FAST_TOML.replace('SseKeepalive = "1s"', 'SseKeepalive = "30s"')
    (workdir / "chokaq.toml").write_text(quiet + 'SseMaxDuration = "60s"\n')
    api = serve("api", "--no-worker", "--no-rescue", "--no-retention")  # --threads 6: 4 stream slots
    url = api.base + "/api/v1/events"
    auth = {"Authorization": f"Bearer {tokens['operator']}"}
    streams = [requests.get(url, headers=auth, stream=True, timeout=10) for _ in range(2)]
    assert [s.status_code for s in streams] == [200, 200]
    assert requests.get(url, headers=auth, stream=True, timeout=10).status_code == 429
    for s in streams:
        s.close()  # the client goes away without a word
    started = time.monotonic()

    def reopened() -> requests.Response | None:
        r = requests.get(url, headers=auth, stream=True, timeout=10)
        if r.status_code == 200:
            return r
        r.close()
        return None

    again = wait_for(reopened, timeout=15)
    # A poll interval (100 ms here) plus waitress's read-ahead, instead of the next keep-alive write.
    assert time.monotonic() - started < 5
    again.close()
    assert api.terminate() == 0, api.log()
