"""The kill/resume matrix of a labelled nightly resurrect, over the database and over the API
(docs/cli-json.md): real `chokaq` processes stopped by SIGINT, SIGTERM, SIGKILL of their process group
and a cut database (PostgreSQL, through the test proxy), each re-run with the same label resuming the
same plan. Afterwards
every job was touched once (one resurrect audit row each), none twice, none missed, and no plan row is
left that belongs to no plan. Also: a kill while freezing leaves rows that are listed and reclaimed; a
label re-run with another filter is refused naming both; two runs of one label at once: one works, the
other is told it is busy, and the plan's pace holds (measured from the items' done times)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field

import pytest

from chokaq_ops.models import Actor, FailureReason
from chokaq_ops.storage import Store
from crash.proxy import CuttableProxy
from tests.support.clients import served_api
from tests.support.contract import check_line, check_stream
from tests.support.dbprobe import age, scalar
from tests.support.polling import wait_for
from tests.support.seeds import seed_dlq
from tests.support.served import CHOKAQ, REPO

pytestmark = pytest.mark.slow  # real processes, signals, a cut database

JOBS = 30
PACED = ["--format", "json", "--chunk-size", "3", "--rate", "20"]
FAST_FAIL = {"CHOKAQ_STORAGE__MAX_TRANSIENT_RETRIES": "1", "CHOKAQ_STORAGE__CONNECT_TIMEOUT": "2"}


@dataclass
class Target:
    """How the CLI reaches the jobs: `--db URL` or `--api URL` with a token; `proxy` cuts the database
    (the CLI's own on --db, the API server's on --api), PostgreSQL only."""

    name: str
    argv: list[str]
    env: dict[str, str]
    proxy: CuttableProxy | None = None
    procs: list[subprocess.Popen[str]] = field(default_factory=list)

    def start(self, *argv: str, extra_env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHOKAQ_")}
        env |= {"PYTHONPATH": str(REPO), **FAST_FAIL, **self.env, **(extra_env or {})}
        proc = subprocess.Popen(
            [CHOKAQ, *argv, *self.argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,  # its own process group: SIGKILL takes the whole group
        )
        self.procs.append(proc)
        return proc

    def run(self, *argv: str) -> tuple[int, list[dict], str]:
        proc = self.start(*argv)
        out, err = proc.communicate(timeout=120)
        return proc.returncode, check_stream(out), err


@pytest.fixture(params=["db", "http"])
def where(request, store, db_url) -> Iterator[Target]:
    with ExitStack() as stack:
        proxy = None
        if store.dialect.name == "postgresql":
            proxy = CuttableProxy()
            stack.callback(proxy.close)
        if request.param == "db":
            url = proxy.url_for(db_url) if proxy else db_url
            target = Target(f"db-{store.dialect.name}", ["--db", url], {"CHOKAQ_ACTOR": "cron"}, proxy)
        else:
            served_store = store
            if proxy is not None:
                served_store = stack.enter_context(Store(proxy.url_for(db_url), max_transient_retries=0))
            url = stack.enter_context(served_api(served_store, db_url))
            token = store.create_token("cron", "operator", actor=Actor("setup"))
            target = Target(f"http-{store.dialect.name}", ["--api", url], {"CHOKAQ_API_TOKEN": token}, proxy)
        yield target
        for proc in target.procs:  # by pid: only the processes this test started
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def _stop_after_a_chunk(
    where: Target, store: Store, argv: list[str], stop: Callable[[subprocess.Popen[str]], None]
) -> tuple[int, list[dict]]:
    """Start a run, wait for a chunk more than before it, stop it with `stop`; its exit and lines."""
    proc = where.start(*argv)
    assert proc.stdout is not None
    first = check_line(proc.stdout.readline().rstrip("\n"))
    assert first["event"] == "plan", first
    start = store.get_plan(first["plan_id"])["chunks_done"]
    wait_for(lambda: store.get_plan(first["plan_id"])["chunks_done"] > start, 30, "a chunk of this run")
    stop(proc)
    out, _ = proc.communicate(timeout=60)
    rest = check_stream(out, complete=False)
    return proc.returncode, [first, *rest]


def _touched_once(store: Store, plan_id: str, ids: list[str]) -> None:
    per_job = Counter(
        a["job_id"] for a in store.list_audit(plan_id=plan_id, action="resurrect", page_size=1000).items
    )
    assert set(per_job) == set(ids), "none missed, none outside the filter"
    assert set(per_job.values()) == {1}, "none touched twice"
    assert {store.get_job(i)["location"] for i in ids} == {"hot"}
    orphans = scalar(
        store,
        "SELECT count(*) FROM plan_items i WHERE NOT EXISTS (SELECT 1 FROM plans p WHERE p.id = i.plan_id)",
    )
    assert orphans == 0 and store.list_orphans() == [], "no plan row belongs to no plan"


def test_a_labelled_resurrect_survives_every_kind_of_stop(where, store) -> None:
    ids = seed_dlq(store, JOBS, queue="kill", reason=FailureReason.Zombie)
    seed_dlq(store, 2, queue="bystander", reason=FailureReason.Zombie)
    nightly = ["dlq", "resurrect", "--queue", "kill", "--reason", "Zombie", "--label", "nightly", *PACED]

    code, lines = _stop_after_a_chunk(where, store, nightly, lambda p: p.send_signal(signal.SIGINT))
    plan_id = lines[0]["plan_id"]
    assert code == 3 and (lines[-1]["event"], lines[-1]["signal"]) == ("interrupted", "SIGINT"), lines[-1]

    code, lines = _stop_after_a_chunk(where, store, nightly, lambda p: p.send_signal(signal.SIGTERM))
    assert lines[0]["plan_id"] == plan_id and lines[0]["resumed"] is True
    assert code == 3 and (lines[-1]["event"], lines[-1]["signal"]) == ("interrupted", "SIGTERM")

    code, lines = _stop_after_a_chunk(where, store, nightly, lambda p: os.killpg(p.pid, signal.SIGKILL))
    assert code == -signal.SIGKILL and lines[0]["plan_id"] == plan_id
    assert lines[-1]["event"] in ("plan", "chunk"), "killed: no final line, and every line it printed parses"

    if where.proxy is not None:
        proxy = where.proxy
        code, lines = _stop_after_a_chunk(where, store, nightly, lambda _p: proxy.cut())
        proxy.restore()
        assert code == 4 and lines[-1]["event"] == "error", lines[-1]
        assert lines[-1]["reason"] == "database_unreachable" and lines[0]["plan_id"] == plan_id

    code, lines, err = where.run(*nightly)  # the killed runs' leases are taken over at once (same host)
    assert code == 0, err
    assert lines[0]["plan_id"] == plan_id and lines[-1]["event"] == "finished"
    assert lines[-1]["resurrected"] == JOBS and lines[-1]["remaining"] == 0
    _touched_once(store, plan_id, ids)
    audit = Counter(a["action"] for a in store.list_audit(plan_id=plan_id, page_size=1000).items)
    assert audit["plan_interrupt"] == 2 and audit["plan_create"] == 1 and audit["plan_finish"] == 1
    assert audit["plan_resume"] == (4 if where.proxy is not None else 3)


def test_a_kill_while_freezing_leaves_rows_that_are_listed_then_reclaimed(store, db_url, tmp_path) -> None:
    """One item per freeze transaction, so the kill lands mid-freeze: the items are the freeze's, listed
    by `plans ls --orphans`, reclaimed once the freeze is silent past its grace by the next plan made."""
    ids = seed_dlq(store, 200, queue="freeze", reason=FailureReason.Zombie)
    where = Target(
        "db", ["--db", db_url], {"CHOKAQ_ACTOR": "cron", "CHOKAQ_STORAGE__CLEANUP_BATCH_SIZE": "1"}
    )
    proc = where.start("dlq", "resurrect", "--queue", "freeze", "--label", "f", "--format", "json")
    wait_for(lambda: scalar(store, "SELECT count(*) FROM plan_items") >= 5, 30, "a freeze under way")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)
    assert store.list_plans()[1] == 0, "killed before the plan was sealed"
    code, lines, _ = where.run("plans", "ls", "--orphans", "--format", "json")
    [freeze] = [line["row"] for line in lines if line["event"] == "row"]
    assert code == 0 and freeze["items"] >= 5 and freeze["abandoned"] is False
    age(store, "plan_freezes", None, 3600, "beat_at")  # its process is gone: silent past the grace
    code, lines, err = where.run("dlq", "resurrect", "--queue", "freeze", "--label", "f", "--format", "json")
    assert code == 0 and lines[-1]["resurrected"] == 200, err
    _touched_once(store, lines[0]["plan_id"], ids)
    [reclaimed] = store.list_audit(action="plan_reclaim").items
    assert reclaimed["plan_id"] == freeze["plan_id"] and reclaimed["count"] == freeze["items"]


def test_label_misuse_is_refused_and_one_label_is_worked_by_one_run(where, store) -> None:
    seed_dlq(store, 24, queue="media", reason=FailureReason.Zombie)  # 6 s at the plan's pace
    seed_dlq(store, 4, queue="billing", reason=FailureReason.Zombie)
    media = [
        "dlq",
        "resurrect",
        "--queue",
        "media",
        "--label",
        "L1",
        "--format",
        "json",
        "--chunk-size",
        "2",
        "--rate",
        "4",
    ]
    code, lines = _stop_after_a_chunk(where, store, media, lambda p: p.send_signal(signal.SIGINT))
    assert code == 3
    bound = lines[0]["plan_id"]

    billing = ["dlq", "resurrect", "--queue", "billing", "--label", "L1", "--format", "json"]
    code, lines, _ = where.run(*billing, "--dry-run")
    assert code == 0 and lines[0]["plan_id"] == bound, "the dry run shows the plan the label would resume"
    code, lines, err = where.run(*billing)
    [end] = lines
    assert code == 2 and end["reason"] == "label_mismatch", end
    assert "queue=media" in end["message"] and "queue=billing" in end["message"] and "--new" in end["message"]
    assert store.get_plan(bound)["state"] == "running", "refused: nothing changed"

    # Two runs of the label at once: the second finds the plan held and says so (exit 7) at once.
    first = where.start(*media)
    assert first.stdout is not None and check_line(first.stdout.readline().rstrip("\n"))["plan_id"] == bound
    wait_for(lambda: store.get_plan(bound)["lease_holder"] is not None, 30, "the first run's lease")
    code, lines, err = where.run(*media)
    assert code == 7 and lines[-1]["reason"] == "busy" and "one run at a time" in lines[-1]["message"], err
    _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    done = [i["done_at"] for i in store.plan_items(bound) if i["outcome"] == "done"]
    # The pace: 4 jobs/s in chunks of 2, one chunk every 0.5 s at most, whoever runs them.
    spans = sorted(done)
    runs_since_resume = [t for t in spans if t >= spans[2]]
    pace = (len(runs_since_resume) - 2) / max(
        (runs_since_resume[-1] - runs_since_resume[0]).total_seconds(), 1e-9
    )
    print(f"{where.name}: measured pace {pace:.2f} jobs/s against the plan's 4")  # shown with -s
    assert pace <= 4 * 1.15, f"measured {pace:.2f} jobs/s against the plan's 4"

    code, lines, err = where.run(*billing, "--new")
    assert code == 0 and lines[0]["plan_id"] != bound and lines[-1]["resurrected"] == 4, err
