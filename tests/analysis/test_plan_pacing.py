"""Paced resurrect plans: a canary chunk watched until its jobs finish, a failure guard over the latest
chunks, a rate limit, and the outcomes report they read, with a real in-process worker on both databases,
directly and over the API."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from chokaq_ops import connect, errors
from chokaq_ops.engine.handlers import Registry
from chokaq_ops.engine.hosting import Host
from chokaq_ops.errors import FatalJobError
from chokaq_ops.models import FailureReason
from chokaq_ops.settings import Settings
from chokaq_ops.storage import Dead, Retry
from tests.support.cli import final
from tests.support.seeds import plan_audit_ids, seed_dlq, table_counts

TYPE = "billing.charge.v1"


def registry() -> Registry:
    """Charges succeed unless their payload says the downstream is still broken."""
    reg = Registry()

    @reg.job(TYPE)
    def charge(payload, ctx):
        if payload.get("broken"):
            raise FatalJobError("gateway still rejects the card")

    return reg


@contextmanager
def worker(store) -> Iterator[Host]:
    settings = Settings().with_overrides(
        {
            "storage.url": store.url,
            "worker.polling_interval": 0.05,
            "execution.heartbeat_interval_min": 0.1,
            "execution.heartbeat_interval_max": 0.15,
        }
    )
    host = Host(settings, store, registry=registry(), run_rescue=False, run_retention=False)
    host.start()
    try:
        yield host
    finally:
        host.shutdown(grace=5)


def seed(store, n: int, *, broken: bool) -> list[str]:
    return seed_dlq(
        store,
        n,
        reason=FailureReason.Zombie,
        payload=lambda i: json.dumps({"order": i, "broken": broken}),
    )


def test_outcomes_report_where_resurrected_jobs_went(client, store) -> None:
    ids = seed(store, 30, broken=False)
    plan = client.plan_resurrect(ids, chunk_size=10)
    assert plan.outcomes()["acted"] == 0, "a dry run moved nothing"
    plan.execute(progress=False, max_chunks=2)
    got = plan.outcomes()
    assert (got["acted"], got["waiting"], got["settled"], got["failure_rate"]) == (20, 20, 0, None)
    done = plan.items().query("outcome == 'done'")["id"].tolist()
    # Move the 20 resurrected jobs on as a worker would: 12 archived, 5 dead again, 2 running, 1 retrying.
    store.fetch("w", 20, ["billing"])
    store.mark_processing("w", done)
    assert len(store.archive_succeeded("w", [(i, 1.0) for i in done[:12]])) == 12
    store.move_to_dlq("w", [Dead(i, FailureReason.Fatal, "ValueError: x") for i in done[12:17]])
    store.reschedule("w", [Retry(done[19], 60, "ValueError: later")])
    got = plan.outcomes()
    assert {k: got[k] for k in ("acted", "running", "retrying", "succeeded", "failed", "gone")} == {
        "acted": 20,
        "running": 2,
        "retrying": 1,
        "succeeded": 12,
        "failed": 5,
        "gone": 0,
    }
    assert got["failed_by_reason"] == {"Fatal": 5}
    assert got["failure_rate"] == round(5 / 17, 4)
    first = plan.outcomes(to_chunk=0)
    assert (first["from_chunk"], first["to_chunk"], first["acted"]) == (0, 0, 10)
    with pytest.raises(errors.ValidationError) as bad:
        plan.outcomes(from_chunk=-1)
    assert bad.value.field == "from_chunk"
    purge = client.plan_purge(ids[:1])
    with pytest.raises(errors.InvalidState):
        purge.outcomes()


def test_canary_halts_a_plan_whose_jobs_fail_again_and_touches_no_more(client, store) -> None:
    ids = seed(store, 50, broken=True)
    plan = client.plan_resurrect(reason="Zombie", chunk_size=10)
    with worker(store), pytest.raises(errors.PlanHalted) as halted:
        plan.execute(progress=False, canary=1, watch=30, poll=0.05)
    message = str(halted.value)
    assert "canary: 10 of 10 finished jobs" in message and "Fatal 10" in message, message
    assert halted.value.outcomes["failed"] == 10
    plan.refresh()
    assert (plan.state, plan.chunks_done, plan.done, plan.remaining) == ("running", 1, 10, 40)
    assert len(plan_audit_ids(store, plan.id, "resurrect")) == 10
    assert table_counts(store)["dlq"] == 50, "the canary's jobs died again; nothing else was resurrected"
    assert set(client.load_dlq(heavy=False)["id"]) == set(ids)


def test_canary_then_guarded_rate_limited_run_finishes_a_healthy_plan(client, store) -> None:
    ids = seed(store, 60, broken=False)
    plan = client.plan_resurrect(ids, chunk_size=10)
    watched: list[dict] = []
    real = plan.outcomes

    def spy(*a, **kw):
        got = real(*a, **kw)
        watched.append(got)
        return got

    plan.outcomes = spy  # type: ignore[method-assign]
    with worker(store):
        start = time.monotonic()
        plan.execute(progress=False, canary=1, watch=30, poll=0.05, max_failure_rate=0.2, rate=100)
        elapsed = time.monotonic() - start
        assert plan.state == "done" and plan.done == 60
        deadline = time.monotonic() + 20
        while table_counts(store)["archive"] < 60 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert table_counts(store) == {"hot": 0, "archive": 60, "dlq": 0}
    # The canary was watched until its 10 jobs had all finished, then every later chunk was guarded.
    canary = [w for w in watched if (w["from_chunk"], w["to_chunk"]) == (0, 0)]
    assert canary[-1]["succeeded"] == 10 and canary[-1]["waiting"] + canary[-1]["running"] == 0
    assert any(w["from_chunk"] >= 1 for w in watched), "no guard check after the canary"
    # 50 jobs after the canary at 100 jobs/s: the last chunk may not start before 0.4 s have passed.
    assert elapsed >= 0.4


def test_guard_halts_when_a_later_chunk_starts_failing(client, store) -> None:
    good = seed(store, 20, broken=False)
    bad = seed(store, 60, broken=True)
    # Plan order = id order given: two healthy chunks first, then the broken ones.
    plan = client.plan_resurrect(good + bad, chunk_size=10)
    with worker(store), pytest.raises(errors.PlanHalted) as halted:
        # The rate gives the worker time to finish each chunk before the next guard check.
        plan.execute(progress=False, max_failure_rate=0.3, rate=50, guard_window=2)
    assert "guard:" in str(halted.value)
    plan.refresh()
    assert plan.state == "running" and 3 <= plan.chunks_done < 8, plan.chunks_done
    assert plan.remaining >= 10, "the guard stopped the plan before its end"


def test_a_canary_with_no_worker_halts_instead_of_carrying_on(client, store) -> None:
    seed(store, 20, broken=False)
    plan = client.plan_resurrect(reason="Zombie", chunk_size=10)
    with pytest.raises(errors.PlanHalted) as halted:
        plan.execute(progress=False, canary=1, watch=0.3, poll=0.05)
    assert "none of the 10 canary jobs finished within 0.3s" in str(halted.value)
    assert plan.refresh().chunks_done == 1


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"canary": -1}, "canary"),
        ({"max_failure_rate": 1.5}, "max_failure_rate"),
        ({"rate": 0}, "rate"),
        ({"canary": 1, "watch": 0}, "watch"),
        ({"guard_window": 0}, "guard_window"),
    ],
)
def test_bad_pacing_is_refused_before_any_chunk_runs(client, store, kw, field) -> None:
    seed(store, 5, broken=False)
    plan = client.plan_resurrect(reason="Zombie")
    with pytest.raises(errors.ValidationError) as bad:
        plan.execute(progress=False, **kw)
    assert bad.value.field == field
    assert plan.refresh().state == "ready" and table_counts(store)["dlq"] == 5


def test_purge_plans_take_a_rate_but_no_canary(client, store) -> None:
    ids = seed(store, 5, broken=False)
    plan = client.plan_purge(ids)
    with pytest.raises(errors.ValidationError) as bad:
        plan.execute(progress=False, canary=1)
    assert bad.value.field == "canary" and table_counts(store)["dlq"] == 5


def test_canary_over_the_api(api, store) -> None:
    url, tokens = api
    seed(store, 30, broken=True)
    remote = connect(url, tokens["operator"])
    plan = remote.plan_resurrect(reason="Zombie", chunk_size=10)
    with worker(store), pytest.raises(errors.PlanHalted):
        plan.execute(progress=False, canary=1, watch=30, poll=0.05)
    got = remote.plan(plan.id).outcomes()
    assert (got["acted"], got["failed"], got["failed_by_reason"]) == (10, 10, {"Fatal": 10})
    assert remote.plan(plan.id).remaining == 20
    reader = connect(url, tokens["reader"])
    assert reader.plan(plan.id).outcomes(to_chunk=0)["failed"] == 10, "readers may watch a plan"


def test_cli_canary_stops_with_exit_1_and_resumes(capsys, store, db_url) -> None:
    from chokaq_ops.cli import main

    seed(store, 30, broken=True)
    argv = ["dlq", "resurrect", "--reason", "Zombie", "--canary", "1", "--chunk-size", "10"]
    with worker(store):
        capsys.readouterr()
        code = main([*argv, "--watch", "30s", "--format", "json", "--db", db_url])
    out, _ = capsys.readouterr()
    assert code == 1
    halted = final(out)
    assert (halted["event"], halted["exit_code"], halted["reason"]) == ("halted", 1, "halted")
    assert (halted["resurrected"], halted["batches"], halted["remaining"]) == (10, 1, 20)
    assert halted["outcomes"]["failed_by_reason"] == {"Fatal": 10} and "canary" in halted["message"]
    assert table_counts(store)["dlq"] == 30

    # After "the fix" the operator resumes the same plan without a canary: the other 20 go.
    code = main(["dlq", "resurrect", "--resume", halted["plan_id"], "--format", "json", "--db", db_url])
    out, _ = capsys.readouterr()
    assert code == 0 and final(out)["resurrected"] == 30
    assert table_counts(store) == {"hot": 20, "archive": 0, "dlq": 10}


@pytest.mark.parametrize(
    "flags",
    [
        ["--max-failure-rate", "2"],
        ["--rate", "0"],
        ["--watch", "soon"],
        ["--canary", "0"],
        ["--chunk-size", "1001"],
    ],
)
def test_cli_bad_pacing_exits_2_and_changes_nothing(capsys, store, db_url, flags) -> None:
    from chokaq_ops.cli import main

    seed(store, 3, broken=False)
    before = table_counts(store)
    plans = len(store.list_plans()[0])
    assert main(["dlq", "resurrect", "--reason", "Zombie", *flags, "--db", db_url]) == 2
    assert "error" in capsys.readouterr().err
    assert table_counts(store) == before and len(store.list_plans()[0]) == plans
