"""`chokaq demo`: make a realistic job history in seconds, so the notebooks, the CLI and the API have
something true to show.

It enqueues jobs for a small shop (mail, billing, reports, webhooks, images; handlers in
chokaq_ops.demo_handlers) and runs two real `chokaq worker` processes with shortened timeouts. Jobs
succeed, retry, exhaust their retries (a few distinct error groups), fail fatally on malformed payloads
(the seeds' missing comma) and declined cards, time out, or are cancelled by an operator. The worker
serving `media` and `settlements` is killed with SIGKILL while its jobs run; the rescue sweep finds their
heartbeats stale and moves them to the DLQ as zombies. Finally the finished jobs are spread evenly over
--history (default 3 days, ending now) in the order they ended, so trends have days to show; each job
moves as a whole and keeps its own durations, and jobs that ended together stay together.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import suppress
from typing import IO, Any

from chokaq_ops import errors
from chokaq_ops.cli import common
from chokaq_ops.models import Actor, FailureReason, NewJob
from chokaq_ops.settings import Settings, parse_duration
from chokaq_ops.storage import Store, queries
from chokaq_ops.storage.migrate import migrate

DEMO = "chokaq-demo"
HANDLERS = "chokaq_ops.demo_handlers"
MAIN_WORKER, MEDIA_WORKER = "demo-worker-1", "demo-media-1"
MEDIA_JOBS = 4  # the media worker runs exactly these when it is killed: 3 renders and a settlement
# Shortened timings for the demo's workers (seconds): quick retries, fast heartbeats, early zombies.
WORKER_ENV = {
    "CHOKAQ_RETRY__BASE_DELAY": "0.05",
    "CHOKAQ_RETRY__MAX_DELAY": "0.2",
    "CHOKAQ_RETRY__JITTER_MAX_DELAY": "0.05",
    "CHOKAQ_RETRY__MAX_ATTEMPTS": "3",
    "CHOKAQ_EXECUTION__HEARTBEAT_INTERVAL_MIN": "0.2",
    "CHOKAQ_EXECUTION__HEARTBEAT_INTERVAL_MAX": "0.3",
    "CHOKAQ_RECOVERY__PROCESSING_ZOMBIE_TIMEOUT": "1.5",
    "CHOKAQ_RECOVERY__FETCHED_JOB_TIMEOUT": "2",
    "CHOKAQ_RECOVERY__SCAN_INTERVAL": "0.5",
    "CHOKAQ_WORKER__POLLING_INTERVAL": "0.05",
    "CHOKAQ_WORKER__SHUTDOWN_GRACE_PERIOD": "2",
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="make a realistic history of jobs, failures and zombies (for the notebooks)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common.add_common(p)
    common.add_format(p)
    p.add_argument(
        "--jobs", type=_count, default=400, metavar="N", help="jobs to make (default 400, 50 or more)"
    )
    p.add_argument(
        "--seconds", type=_seconds, default=60.0, metavar="S", help="longest the workers may run (default 60)"
    )
    p.add_argument(
        "--history",
        default="3d",
        metavar="DURATION",
        help="spread the history over this long (default 3d; 0: real times)",
    )
    p.add_argument("--seed", type=int, default=7, help="random seed of the job mix (default 7)")
    p.add_argument("--force", action="store_true", help="add to a database that already holds jobs")
    p.set_defaults(handler=run)


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if n < 50:
        raise argparse.ArgumentTypeError("the demo needs at least 50 jobs to show every kind of failure")
    return n


def _seconds(text: str) -> float:
    try:
        value = parse_duration(text)
    except errors.ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value < 5:
        raise argparse.ArgumentTypeError("give the workers at least 5 seconds")
    return value


# ---------------------------------------------------------------------- the job mix


def make_jobs(n: int, rng: random.Random) -> tuple[list[NewJob], list[NewJob]]:
    """(jobs to run now, jobs scheduled for later that an operator will cancel)."""
    now_jobs: list[NewJob] = []
    relays = ["mx-1.mail.example.net", "mx-3.mail.example.net"]

    def add(queue: str, type_: str, payload: dict[str, Any] | str, **kw: Any) -> None:
        text = payload if isinstance(payload, str) else _json(payload)
        now_jobs.append(NewJob(type=type_, queue=queue, payload=text, created_by=DEMO, **kw))

    for i in range(n):
        order = 10_000 + i * 7 + rng.randrange(7)
        roll = rng.random()
        kind = i % 20
        if kind < 6:  # mail
            outcome = "flaky" if roll < 0.3 else "ok"
            to = f"customer{rng.randrange(10_000)}@example.com"
            add("email", "demo.email.send.v1", {"to": to, "relay": rng.choice(relays), "outcome": outcome})
        elif kind < 11:  # billing
            outcome = "gateway_down" if roll < 0.14 else "declined" if roll < 0.24 else "ok"
            add(
                "billing",
                "demo.billing.charge.v1",
                {
                    "order_id": order,
                    "amount": round(rng.uniform(5, 500), 2),
                    "gateway": rng.choice(["stripe-eu-2", "adyen-1"]),
                    "card_last4": f"{rng.randrange(10_000):04d}",
                    "customer": f"cus_{rng.getrandbits(40):010x}",
                    "outcome": outcome,
                },
                tags="checkout",
            )
        elif kind < 14:  # reports
            outcome = "missing_region" if roll < 0.2 else "too_slow" if roll < 0.3 else "ok"
            region = rng.choice(
                ["apac-7", "us-east", "sa-2", "eu-west"] if outcome == "missing_region" else ["eu-west"]
            )
            add(
                "reports", "demo.report.render.v1", {"report_id": order, "region": region, "outcome": outcome}
            )
        elif kind < 17:  # webhooks: some producers build JSON by hand and forget a comma
            if roll < 0.25:
                add("webhooks", "demo.webhook.deliver.v1", f'{{"order_id": {order} "event": "paid"}}')
            else:
                add("webhooks", "demo.webhook.deliver.v1", {"order_id": order, "event": "paid"})
        else:  # thumbnails
            add("thumbnails", "demo.image.resize.v1", {"image_id": order, "size": "256x256", "seconds": 0.02})
    for i in range(MEDIA_JOBS - 1):  # long renders: running when their worker dies
        add("media", "demo.image.resize.v1", {"image_id": 90_000 + i, "size": "4096x4096", "seconds": 120})
    batch = f"2026-{rng.randrange(1, 12):02d}-night"
    add("settlements", "demo.billing.settle.v1", {"batch": batch, "seconds": 120})
    later = [
        NewJob(
            type="demo.report.render.v1",
            queue="reports",
            payload=_json({"report_id": 80_000 + i, "region": "eu-west", "outcome": "ok"}),
            delay_seconds=3600,
            created_by=DEMO,
            tags="nightly",
        )
        for i in range(max(3, n // 50))
    ]
    return now_jobs, later


def _json(value: Any) -> str:
    import json

    return json.dumps(value, separators=(", ", ": "))


# ---------------------------------------------------------------------- workers


class _Worker:
    """A `chokaq worker` subprocess. Its log goes to a temporary file, not a pipe: nobody reads a pipe
    while the demo waits, and a worker blocked on a full pipe would stop working."""

    def __init__(self, proc: subprocess.Popen[bytes], log: IO[bytes]) -> None:
        self.proc, self.log = proc, log

    def tail(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-1500:]


def _worker(url: str, worker_id: str, queues: str, concurrency: int) -> _Worker:
    env = {
        **os.environ,
        **WORKER_ENV,
        "CHOKAQ_WORKER__WORKER_ID": worker_id,
        "CHOKAQ_WORKER__QUEUES": queues,
        "CHOKAQ_WORKER__PREFETCH": str(concurrency),
        "CHOKAQ_WORKER__FETCH_BATCH_SIZE": str(concurrency),
    }
    code = "import sys; from chokaq_ops.cli import main; sys.exit(main())"
    argv = ["worker", "--db", url, "--handlers", HANDLERS, "--concurrency", str(concurrency)]
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by _stop
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "--log-level", "WARNING", *argv],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,  # a Ctrl-C on the demo is the demo's to handle, not the workers'
    )
    return _Worker(proc, log)


def _wait(what: str, done: Any, deadline: float, workers: list[_Worker]) -> None:
    while not done():
        for w in workers:
            if w.proc.poll() is not None and w.proc.returncode not in (0, -signal.SIGKILL):
                raise errors.ChokaqError(
                    f"a demo worker exited with {w.proc.returncode} while {what}: {w.tail()}"
                )
        if time.monotonic() > deadline:
            raise errors.ChokaqError(f"the demo timed out while {what} (raise --seconds?)")
        time.sleep(0.1)


def _stop(worker: _Worker) -> None:
    proc = worker.proc
    if proc.poll() is None:
        with suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    worker.log.close()


# ---------------------------------------------------------------------- the run


def run(args: argparse.Namespace) -> int:
    settings: Settings = common.settings_from(args)
    history = parse_duration(args.history, "history")
    if history < 0:
        raise errors.ValidationError("--history must not be negative", field="history")
    store = Store.from_settings(settings)
    try:
        migrate(store)
        store.queries = store.queries | queries.load(store.dialect.name, "demo")
        held = sum(int(v) for v in store.run("table_counts", write=False)[0].values())
        if held and not args.force:
            raise errors.ValidationError(
                f"{store.dialect.redacted_url()} already holds {held} jobs; the demo adds its own and "
                "rewrites their times: use a new database (--db sqlite:///demo.db) or pass --force",
                field="db",
            )
        out = _run(store, settings.storage.url, args, history)
    finally:
        store.close()
    if args.format == "json":
        common.print_json(out)
    else:
        print(
            f"demo history on {out['db']}: {out['archive']} succeeded, {out['dlq']} dead, "
            f"{out['hot']} waiting"
        )
        for reason, n in out["dlq_by_reason"].items():
            print(f"  {reason:<20} {n}")
        print("next: chokaq dlq summary, or open notebooks/01_dlq_triage.ipynb with CHOKAQ_DB set")
    return 0


def _run(store: Store, url: str, args: argparse.Namespace, history: float) -> dict[str, Any]:
    rng = random.Random(args.seed)
    now_jobs, later = make_jobs(args.jobs, rng)
    for start in range(0, len(now_jobs), 500):
        store.enqueue(now_jobs[start : start + 500])
    scheduled = [r.id for r in store.enqueue(later)]
    deadline = time.monotonic() + args.seconds
    main = _worker(url, MAIN_WORKER, "email,billing,reports,webhooks,thumbnails", 8)
    media = _worker(url, MEDIA_WORKER, "media,settlements", MEDIA_JOBS)
    workers = [main, media]
    try:
        # An operator calls off tomorrow's reports while the shop runs.
        store.cancel_many(scheduled, actor=Actor(DEMO))
        _wait(
            "waiting for the media worker to start its jobs",
            lambda: int(store.run("demo_running", worker_id=MEDIA_WORKER)[0]["n"]) == MEDIA_JOBS,
            deadline,
            workers,
        )
        time.sleep(1.0)  # let them run and heartbeat a while: the zombies carry that evidence
        os.kill(media.proc.pid, signal.SIGKILL)  # the host dies mid-job: no cleanup, no final heartbeat
        media.proc.wait(10)
        _wait(
            "waiting for the rescue sweep to find the zombies",
            lambda: store.count_dlq(_zombies()) >= MEDIA_JOBS,
            deadline,
            workers,
        )
        _wait(
            "waiting for the other jobs to finish",
            lambda: int(store.run("demo_busy")[0]["n"]) == 0,
            deadline,
            workers,
        )
    finally:
        for w in workers:
            _stop(w)
    if history > 0:
        now = store.now().timestamp()
        store.run("demo_spread", start_s=now - history, history_s=history)
    counts: Counter[str] = Counter()
    by_reason: dict[str, int] = {}
    for r in store.run("demo_outcomes", write=False):
        counts[r["location"]] += int(r["n"])
        if r["location"] == "dlq":
            by_reason[FailureReason(int(r["failure_reason"])).name] = int(r["n"])
    return {
        "db": store.dialect.redacted_url(),
        "archive": counts["archive"],
        "dlq": counts["dlq"],
        "hot": counts["hot"],
        "dlq_by_reason": dict(sorted(by_reason.items(), key=lambda kv: -kv[1])),
        "history_seconds": history,
    }


def _zombies() -> Any:
    from chokaq_ops.models import DlqFilter

    return DlqFilter(reason=FailureReason.Zombie)
