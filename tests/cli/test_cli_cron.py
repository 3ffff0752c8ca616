"""The nightly script's contract: a labelled JSON-mode resurrect survives SIGINT, SIGTERM and SIGKILL in the
middle of its run; stdout is JSON lines every time (the plan id first); the re-run with the same label
resumes the same plan; no job is touched twice; the audit log shows the plan's lifecycle."""

from __future__ import annotations

import json
import signal
import subprocess
from collections import Counter

import pytest

from chokaq_ops.client import DbClient
from chokaq_ops.models import FailureReason
from tests.support.cli import chokaq, final, lines, record, rows
from tests.support.polling import wait_for
from tests.support.seeds import plan_audit_ids, seed_dlq
from tests.support.served import CHOKAQ

JOBS = 24
NIGHTLY = ["dlq", "resurrect", "--reason", "Zombie,Timeout", "--queue", "nightly", "--label", "nightly"]
PACED = ["--format", "json", "--chunk-size", "3", "--rate", "12", "--actor", "cron"]


def _start(db_url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [CHOKAQ, *NIGHTLY, *PACED, "--db", db_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _interrupt(store, db_url: str, sig: signal.Signals) -> tuple[int, list[dict], str]:
    """Start a run, wait until it has moved a chunk more than before, send `sig`; its exit and lines."""
    proc = _start(db_url)
    assert proc.stdout is not None
    first = json.loads(proc.stdout.readline())  # the plan id comes before any work
    plan_id = first["plan_id"]
    start = store.get_plan(plan_id)["chunks_done"]
    wait_for(lambda: store.get_plan(plan_id)["chunks_done"] > start, 30, "a chunk of this run")
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    got = [first] + [json.loads(line) for line in out.splitlines()]  # every line parses on its own
    return proc.returncode, got, err


@pytest.mark.slow  # real `chokaq` processes, interrupted and killed mid-run
def test_labelled_json_resurrect_survives_sigint_sigterm_and_sigkill(store, db_url, capsys) -> None:
    ids = seed_dlq(store, JOBS, queue="nightly", reason=FailureReason.Zombie)
    seed_dlq(store, 2, queue="other", reason=FailureReason.Zombie)  # outside the filter: never touched

    code, got, err = _interrupt(store, db_url, signal.SIGINT)
    assert code == 3, err
    plan_id = got[0]["plan_id"]
    assert {k: got[0][k] for k in ("event", "plan_id", "label", "resumed", "total", "remaining")} == {
        "event": "plan",
        "plan_id": plan_id,
        "label": "nightly",
        "resumed": False,
        "total": JOBS,
        "remaining": JOBS,
    }
    assert got[-1]["event"] == "interrupted" and got[-1]["signal"] == "SIGINT"
    assert 0 < got[-1]["resurrected"] < JOBS and got[-1]["plan_id"] == plan_id

    for sig, want in ((signal.SIGTERM, 3), (signal.SIGKILL, -signal.SIGKILL)):
        code, got, err = _interrupt(store, db_url, sig)
        assert code == want, err
        assert got[0]["plan_id"] == plan_id and got[0]["resumed"] is True, "the label resumed the plan"
        if sig is signal.SIGTERM:
            assert got[-1]["event"] == "interrupted" and got[-1]["signal"] == "SIGTERM"
        else:
            assert got[-1]["event"] in ("plan", "chunk"), "killed: no final line; what it printed parses"

    code, out, err = chokaq(capsys, db_url, *NIGHTLY, *PACED)
    assert code == 0, err
    got = lines(out)
    assert got[0]["plan_id"] == plan_id and got[0]["resumed"] is True
    last = got[-1]
    assert (last["event"], last["state"], last["resurrected"], last["remaining"]) == (
        "finished",
        "done",
        JOBS,
        0,
    )
    assert 0 < last["resurrected_this_run"] < JOBS

    audited = plan_audit_ids(store, plan_id, "resurrect")
    assert Counter(audited).most_common(1)[0][1] == 1, "a job was touched twice"
    assert sorted(audited) == sorted(ids)
    lifecycle = [
        r["action"]
        for r in reversed(store.list_audit(plan_id=plan_id, page_size=1000).items)
        if r["action"].startswith("plan_")
    ]
    # Each run takes the plan's lease; all but the killed one give it back.
    held = [a for a in lifecycle if a in ("plan_lease", "plan_release")]
    assert Counter(held) == Counter({"plan_lease": 4, "plan_release": 3})
    lifecycle = [a for a in lifecycle if a not in held]
    assert lifecycle[:2] == ["plan_create", "plan_start"] and lifecycle[-1] == "plan_finish"
    assert Counter(lifecycle) == Counter(
        {"plan_create": 1, "plan_start": 1, "plan_interrupt": 2, "plan_resume": 3, "plan_finish": 1}
    )

    # Done: the next night freezes a new plan for new failures, and an empty match is no plan at all.
    code, out, _ = chokaq(capsys, db_url, *NIGHTLY, *PACED)
    [nothing] = lines(out)  # one final line: nothing matched, no plan
    assert code == 0 and (nothing["event"], nothing["reason"]) == ("finished", "nothing_matched")
    assert (nothing["matched"], nothing["plan_id"], nothing["exit_code"]) == (0, None, 0)


def test_plans_and_audit_commands(store, db_url, capsys) -> None:
    seed_dlq(store, 4, queue="q2", reason=FailureReason.Timeout)
    client = DbClient(store, actor="alice")
    ready = client.plan_resurrect(queue="q2")
    code, out, _ = chokaq(capsys, db_url, "plans", "ls", "--format", "json")
    assert code == 0 and [(p["id"], p["state"], p["total"]) for p in rows(out)] == [(ready.id, "ready", 4)]
    code, out, _ = chokaq(capsys, db_url, "plans", "show", ready.id, "--format", "json")
    assert code == 0 and record(out)["action"] == "resurrect"

    code, out, err = chokaq(
        capsys, db_url, "plans", "resume", ready.id, "--format", "json", "--actor", "cron"
    )
    assert code == 0, err
    got = lines(out)
    assert got[0]["plan_id"] == ready.id and got[0]["resumed"] is True
    assert (got[-1]["event"], got[-1]["resurrected"]) == ("finished", 4)

    code, out, _ = chokaq(capsys, db_url, "audit", "ls", "--plan-id", ready.id, "--format", "json")
    actions = [r["action"] for r in rows(out)]
    assert code == 0 and actions.count("resurrect") == 4
    assert {"plan_create", "plan_resume", "plan_start", "plan_finish"} <= set(actions)

    seed_dlq(store, 2, queue="q3", reason=FailureReason.Timeout)
    other = client.plan_resurrect(queue="q3")
    code, out, _ = chokaq(capsys, db_url, "plans", "discard", other.id, "--format", "json", "--actor", "bob")
    assert code == 0 and record(out)["state"] == "discarded"
    code, out, _ = chokaq(capsys, db_url, "plans", "discard", other.id, "--format", "json", "--actor", "bob")
    assert code == 0 and record(out)["state"] == "discarded", "discarding twice is no error"
    code, out, _ = chokaq(capsys, db_url, "audit", "ls", "--action", "plan_discard", "--format", "json")
    assert [(r["plan_id"], r["actor"]) for r in rows(out)] == [(other.id, "bob")], "audited once"
    assert isinstance(rows(out)[0]["details"], dict), "details are objects, not JSON in a string"
    code, _, err = chokaq(capsys, db_url, "plans", "show", "nope")
    assert code == 2 and "nope" in err


def test_idempotent_only_uses_what_workers_declared(store, db_url, capsys) -> None:
    from chokaq_ops.engine.handlers import Registry
    from tests.engine.worker_support import fast_settings, hosted

    code, out, _ = chokaq(
        capsys, db_url, "dlq", "resurrect", "--queue", "z", "--idempotent-only", "--format", "json"
    )
    assert code == 0 and final(out)["matched"] == 0, "no worker declared anything yet"
    assert final(out)["plan_id"] is None

    safe = seed_dlq(store, 2, queue="z", type="thumb.v1", reason=FailureReason.Zombie)
    unsafe = seed_dlq(store, 2, queue="z", type="charge.v1", reason=FailureReason.Zombie)
    other = seed_dlq(store, 1, queue="z", type="mail.v1", reason=FailureReason.Zombie)
    reg = Registry()
    reg.job("thumb.v1", idempotent=True)(lambda payload, ctx: None)
    reg.job("mail.v1", idempotent=True)(lambda payload, ctx: None)
    reg.job("charge.v1")(lambda payload, ctx: None)
    with hosted(store, fast_settings(store, worker__queues=["nothing-here"]), reg):
        pass  # starting is enough: the worker registers its types' declarations
    assert store.idempotent_types() == ["mail.v1", "thumb.v1"]

    args = ["dlq", "resurrect", "--queue", "z", "--idempotent-only", "--type", "thumb.v1,charge.v1"]
    code, out, err = chokaq(capsys, db_url, *args, "--format", "json")
    assert code == 0, err
    assert final(out)["resurrected"] == 2
    assert {store.get_job(i)["location"] for i in safe} == {"hot"}
    assert {store.get_job(i)["location"] for i in unsafe + other} == {"dlq"}, (
        "not idempotent, or not asked for"
    )
