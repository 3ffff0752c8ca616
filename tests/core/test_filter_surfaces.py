"""One filter grammar: the same filter words give the same rows from Python (DbClient and HttpClient),
the CLI and the API, on both databases."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from chokaq_ops.client import DbClient
from chokaq_ops.models import Actor, FailureReason
from tests.api.conftest import ApiClient
from tests.engine.worker_support import fast_settings
from tests.support.cli import chokaq, rows
from tests.support.dbprobe import age
from tests.support.seeds import seed_dlq

SPECS = [
    {"reason": "Fatal,Timeout"},
    {"reason": "!Zombie", "queue": "a,b"},
    {"queue": "!b", "failed_from": "24h"},
    {"queue": "a", "failed_from": "3d ago", "failed_to": "1d ago"},
    {"type": "t.a,t.c", "reason": "!Fatal"},
    {"failed_to": "now", "reason": "Zombie,Timeout,!Timeout"},
]


@pytest.fixture
def dead(store) -> dict[str, list[str]]:
    """Dead jobs across queues, types, reasons and failure times (36 hours ago for the `old` ones)."""
    out = {
        "a_fatal": seed_dlq(store, 2, queue="a", type="t.a", reason=FailureReason.Fatal),
        "a_zombie": seed_dlq(store, 2, queue="a", type="t.a", reason=FailureReason.Zombie),
        "b_timeout": seed_dlq(store, 2, queue="b", type="t.b", reason=FailureReason.Timeout),
        "c_fatal": seed_dlq(store, 1, queue="c", type="t.c", reason=FailureReason.Fatal),
        "c_timeout": seed_dlq(store, 1, queue="c", type="t.c", reason=FailureReason.Timeout),
    }
    out["a_old"] = out["a_fatal"][:1] + out["a_zombie"][:1]
    age(store, "jobs_dlq", out["a_old"], 36 * 3600, "failed_at")
    return out


def _cli_args(spec: dict[str, str]) -> list[str]:
    return [arg for key, value in spec.items() for arg in (f"--{key.replace('_', '-')}", value)]


@pytest.mark.parametrize("spec", SPECS, ids=[json.dumps(s) for s in SPECS])
def test_the_same_filter_gives_the_same_rows_everywhere(
    spec, dead, store, db_url, capsys, any_client, bound_app
) -> None:
    python = set(DbClient(store, actor="t").load_dlq(**spec)["id"])
    via_client = set(any_client.load_dlq(**spec)["id"])

    code, out, err = chokaq(
        capsys, db_url, "dlq", "ls", "--format", "json", "--limit", "1000", *_cli_args(spec)
    )
    assert code == 0, err
    cli = {j["id"] for j in rows(out)}

    app = bound_app(fast_settings(store), store=store)
    api = ApiClient(app, {"reader": store.create_token("reader-t", "reader", actor=Actor("setup"))})
    got = api.get("/dlq?" + urlencode({**spec, "page_size": 1000}), role="reader")
    assert got.status_code == 200, got.get_json()
    rest = {j["id"] for j in got.get_json()}

    assert python, "every spec matches some rows"
    assert python == via_client == cli == rest


def test_the_expected_rows(dead, store) -> None:
    load = DbClient(store, actor="t").load_dlq
    assert set(load(reason="Fatal,Timeout")["id"]) == {
        *dead["a_fatal"],
        *dead["b_timeout"],
        *dead["c_fatal"],
        *dead["c_timeout"],
    }
    assert set(load(queue="a", failed_from="3d ago", failed_to="1d ago")["id"]) == set(dead["a_old"])
    assert set(load(reason="!Zombie", queue=["a", "b"])["id"]) == {*dead["a_fatal"], *dead["b_timeout"]}
    assert set(load(ids=dead["c_fatal"] + dead["a_fatal"][:1])["id"]) == {
        *dead["c_fatal"],
        dead["a_fatal"][0],
    }


def test_ids_and_half_open_windows(dead, store, db_url, capsys) -> None:
    [job] = dead["c_fatal"]
    at = store.get_job(job)["failed_at"]
    load = DbClient(store, actor="t").load_dlq
    # [from, to): a job failing exactly at `to` is outside, exactly at `from` inside.
    assert job not in set(load(queue="c", failed_to=at)["id"])
    assert job in set(load(queue="c", failed_from=at)["id"])
    code, out, _ = chokaq(capsys, db_url, "dlq", "ls", "--format", "json", "--ids", f"{job},nope")
    assert code == 0 and [j["id"] for j in rows(out)] == [job]


def test_bad_filters_are_refused_alike(store, db_url, capsys, bound_app) -> None:
    app = bound_app(fast_settings(store), store=store)
    api = ApiClient(app, {"reader": store.create_token("reader-t", "reader", actor=Actor("setup"))})
    for query, field in (("reason=Fatal,Nope", "reason"), ("failed_from=2026-01-01T00:00:00", "failed_from")):
        got = api.get(f"/dlq?{query}", role="reader")
        assert got.status_code == 422 and field in json.dumps(got.get_json()), query
    code, _, err = chokaq(capsys, db_url, "dlq", "ls", "--reason", "Fatal,Nope")
    assert code == 2 and "unknown failure reason 'Nope'" in err
