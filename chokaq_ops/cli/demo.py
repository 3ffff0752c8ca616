"""`chokaq demo`: make a realistic job history in seconds, so the notebooks, the CLI and the API have
something true to show.

It enqueues jobs for a small shop (mail, billing, reports, webhooks, images; handlers in
chokaq_ops.demo_handlers) and runs real `chokaq worker` processes with shortened timeouts. Jobs succeed,
retry, exhaust their retries, fail fatally on malformed payloads (a producer that built JSON by hand and
forgot a comma) and declined cards, time out, or are cancelled by an operator. Three workers die
mid-job (SIGKILL: no cleanup, no last heartbeat): a media host with three renders of different ages
running, the settlement host in its nightly batch, and later a second media host with two renders. The
rescue sweep finds their heartbeats stale and moves those jobs to the DLQ as zombies, each with its own
runtime and heartbeat age (the media queue's zombie timeout is shorter than the settlement queue's).

Then every job is moved, as a whole, to its own time in a --history window (default 3 days, ending now):
busy days and quiet nights (UTC), a flash-sale burst of orders, a payment-gateway outage, a webhook
producer that sent malformed JSON for a day until it was fixed, a mail relay that degrades over the
last day and a half, and a report bug that appears after a deploy in the last day. Each job keeps its
real durations, retries and heartbeat ages; the zombies of one dead worker keep their real spacing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import suppress
from datetime import UTC, datetime
from typing import IO, Any

from chokaq_ops import errors
from chokaq_ops.cli import common
from chokaq_ops.demo_story import BILLING, DEMO, MEDIA_1, MEDIA_2, Story, make_jobs, payload_json
from chokaq_ops.filters import dlq_filter
from chokaq_ops.models import Actor, FailureReason, NewJob
from chokaq_ops.settings import Settings, parse_duration
from chokaq_ops.storage import Store, queries
from chokaq_ops.storage.migrate import migrate

HANDLERS = "chokaq_ops.demo_handlers"
SHOP_QUEUES = "email,billing,reports,webhooks,thumbnails"
SHOP_WORKERS = (("demo-worker-1", 8), ("demo-worker-2", 4))
# Shortened timings for the demo's workers (seconds): quick retries, fast heartbeats, early zombies. The
# queues' own zombie timeouts differ, so the zombies' heartbeat ages do too.
WORKER_ENV = {
    "CHOKAQ_RETRY__BASE_DELAY": "0.05",
    "CHOKAQ_RETRY__MAX_DELAY": "0.2",
    "CHOKAQ_RETRY__JITTER_MAX_DELAY": "0.05",
    "CHOKAQ_RETRY__MAX_ATTEMPTS": "3",
    # Days of history run in seconds: the circuit breaker counts failures in a window scaled down with
    # them, so only a real burst (the gateway outage) opens a circuit, which probes again at once. At the
    # default's 60 s window every failure of the replay would fall in one window and the circuits would
    # flap for the whole run, deferring most jobs (a 90,000-job demo never finished that way).
    "CHOKAQ_RETRY__CIRCUIT_BREAKER_DELAY": "0.2",
    "CHOKAQ_CIRCUIT__BREAK_DURATION": "0.3",
    "CHOKAQ_CIRCUIT__FAILURE_WINDOW": "0.5",
    "CHOKAQ_CIRCUIT__FAILURE_THRESHOLD": "8",
    "CHOKAQ_CIRCUIT__REFRESH_INTERVAL": "0.2",
    "CHOKAQ_EXECUTION__HEARTBEAT_INTERVAL_MIN": "0.2",
    "CHOKAQ_EXECUTION__HEARTBEAT_INTERVAL_MAX": "0.3",
    "CHOKAQ_RECOVERY__PROCESSING_ZOMBIE_TIMEOUT": "1.5",
    "CHOKAQ_QUEUES__SETTLEMENTS__ZOMBIE_TIMEOUT_SECONDS": "3",
    "CHOKAQ_RECOVERY__FETCHED_JOB_TIMEOUT": "2",
    "CHOKAQ_RECOVERY__SCAN_INTERVAL": "0.4",
    "CHOKAQ_WORKER__POLLING_INTERVAL": "0.05",
    "CHOKAQ_WORKER__SHUTDOWN_GRACE_PERIOD": "2",
}
RENDER = {"size": "4096x4096", "seconds": 120}  # long enough to be running when its worker dies
# Jobs real workers run: the story in full (every failure, three dead workers). A larger --jobs adds copies
# of these in the database, each at its own moment near its original's (docs/notebooks.md, "chokaq demo").
REAL_JOBS = 1200
MAX_JOBS = 10_000_000
COPY_BATCH = 10_000  # copies per transaction
COPY_JITTER_S = 15 * 60  # a copy lands within this of its original's moment in the story


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
        "--jobs",
        type=_count,
        default=REAL_JOBS,
        metavar="N",
        help=f"jobs to make (default {REAL_JOBS}, 50 to {MAX_JOBS:,}); real workers run up to {REAL_JOBS}, "
        "the rest are copies of their outcomes placed elsewhere in the story",
    )
    p.add_argument(
        "--real-jobs",
        type=_count,
        default=REAL_JOBS,
        metavar="N",
        help=f"of --jobs, how many real workers run (default {REAL_JOBS}); the rest are copies",
    )
    p.add_argument(
        "--seconds", type=_seconds, default=90.0, metavar="S", help="longest the workers may run (default 90)"
    )
    p.add_argument(
        "--history",
        default="3d",
        metavar="DURATION",
        help="spread the history over this long (default 3d, ending now; 0: keep the real times)",
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
    if n > MAX_JOBS:
        raise argparse.ArgumentTypeError(f"at most {MAX_JOBS:,} jobs")
    return n


def _seconds(text: str) -> float:
    try:
        value = parse_duration(text)
    except errors.ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value < 5:
        raise argparse.ArgumentTypeError("give the workers at least 5 seconds")
    return value


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
        say = _Say(args.format != "json")
        real = min(args.jobs, args.real_jobs)
        say(
            f"making a demo history of {args.jobs:,} jobs on {store.dialect.redacted_url()}: {real:,} run by "
            "real workers (three of them die mid-job)"
            + (
                f", then {args.jobs - real:,} copies of their outcomes (timed once the first batch is in)"
                if args.jobs > real
                else ""
            )
        )
        out = _run(store, settings.storage.url, args, history, real, say)
        if args.jobs > real:
            out["copies"] = _copy(store, args.jobs - real, history, random.Random(args.seed), say)
            out |= _outcomes(store)
        out["seconds"] = round(say.elapsed(), 1)
    finally:
        store.close()
    if args.format == "json":
        common.print_json(out)
    else:
        print(
            f"demo history on {out['db']}: {out['archive']:,} succeeded, {out['dlq']:,} dead, "
            f"{out['hot']:,} waiting, over {args.history}, made in {out['seconds']:g} s"
        )
        for reason, n in out["dlq_by_reason"].items():
            print(f"  {reason:<20} {n}")
        print(f"next: CHOKAQ_DB={out['db']} chokaq dlq summary, or `make notebooks`")
    return 0


class _Say:
    """Progress on stderr with the time so far (nothing in JSON mode): what the demo is doing, measured."""

    def __init__(self, on: bool) -> None:
        self.on, self.started = on, time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def __call__(self, text: str) -> None:
        if self.on:
            print(f"[{self.elapsed():6.1f}s] {text}", file=sys.stderr, flush=True)


def _run(
    store: Store, url: str, args: argparse.Namespace, history: float, real: int, say: _Say
) -> dict[str, Any]:
    end = store.now().timestamp()
    story = Story(end - max(history, 1.0), end, random.Random(args.seed))
    plan = make_jobs(real, story)
    targets: dict[str, float] = {}
    for start in range(0, len(plan.now), 500):
        chunk = plan.now[start : start + 500]
        for result, (_, t) in zip(store.enqueue([j for j, _ in chunk]), chunk, strict=True):
            targets[result.id] = t
    scheduled = [r.id for r in store.enqueue(plan.cancelled)]
    deadline = time.monotonic() + args.seconds
    workers = [_worker(url, wid, SHOP_QUEUES, n) for wid, n in SHOP_WORKERS]

    running = lambda worker_id, n: _running(store, worker_id, n)  # noqa: E731

    def zombies(n: int) -> Any:
        return lambda: store.count_dlq(dlq_filter(reason=FailureReason.Zombie.name)) >= n

    say(f"{len(workers)} shop workers started")
    try:
        # An operator calls off the nightly reports while the shop runs (at most 1000 per call).
        for start in range(0, len(scheduled), 1000):
            store.cancel_many(scheduled[start : start + 1000], actor=Actor(DEMO))
        media = _worker(url, MEDIA_1, "media", 4)
        billing = _worker(url, BILLING, "settlements", 2)
        workers += [media, billing]
        store.enqueue([_settlement(story)])
        _wait("waiting for the settlement to start", running(BILLING, 1), deadline, workers)
        # Renders start 0.8 s apart, so each has run a different time when its host dies.
        _start_renders(store, media, MEDIA_1, 3, 0.8, deadline, workers)
        time.sleep(0.8)
        os.kill(media.proc.pid, signal.SIGKILL)  # the host dies: no cleanup, no final heartbeat
        media.proc.wait(10)
        time.sleep(0.6)
        # Killed too, not stopped: a stopped SQLite writer could hold the write lock and stall the demo.
        os.kill(billing.proc.pid, signal.SIGKILL)  # the settlement host dies in its nightly batch
        billing.proc.wait(10)
        media2 = _worker(url, MEDIA_2, "media", 4)
        workers.append(media2)
        _wait("waiting for the sweep to find the first zombies", zombies(4), deadline, workers)
        _start_renders(store, media2, MEDIA_2, 2, 1.3, deadline, workers)
        time.sleep(0.5)
        os.kill(media2.proc.pid, signal.SIGKILL)
        media2.proc.wait(10)
        _wait("waiting for the sweep to find the last zombies", zombies(6), deadline, workers)
        say("three workers died mid-job; the rescue sweep found their 6 zombies")
        _wait(
            "waiting for the other jobs to finish",
            lambda: int(store.run("demo_busy")[0]["n"]) == 0,
            deadline,
            workers,
        )
        say(f"the shop's {real:,} jobs are done")
    finally:
        for w in workers:
            _stop(w)
    if history > 0:
        _move_into_history(store, story, targets, set(scheduled))
        say(f"moved into a {history / 3600:g} h history ending now")
    return {"db": store.dialect.redacted_url(), **_outcomes(store), "history_seconds": history}


def _outcomes(store: Store) -> dict[str, Any]:
    counts: Counter[str] = Counter()
    by_reason: dict[str, int] = {}
    for r in store.run("demo_outcomes", write=False):
        counts[r["location"]] += int(r["n"])
        if r["location"] == "dlq":
            by_reason[FailureReason(int(r["failure_reason"])).name] = int(r["n"])
    return {
        "archive": counts["archive"],
        "dlq": counts["dlq"],
        "hot": counts["hot"],
        "dlq_by_reason": dict(sorted(by_reason.items(), key=lambda kv: -kv[1])),
    }


def _copy(store: Store, n: int, history: float, rng: random.Random, say: _Say) -> int:
    """`n` copies of the finished demo jobs (not the zombies, not the cancellations), in transactions of
    COPY_BATCH, each near its original's moment (within COPY_JITTER_S, inside the history), its failure
    history moved with it. Says, after the first batch, how long the rest will take at the measured rate."""
    sources = [(r["id"], float(r["end_s"])) for r in store.run("demo_sources", write=False)]
    if not sources:
        raise errors.ChokaqError("the demo's real run left no finished job to copy")
    end = store.now().timestamp()
    start = end - max(history, 0.0)
    jitter = min(COPY_JITTER_S, max(history, 0.0) / 20) if history > 0 else 0.0
    done, began = 0, time.monotonic()
    window = (0, began)  # the rate of the latest stretch: inserts slow down as the tables grow
    while done < n:
        batch = []
        for k in range(done, min(n, done + COPY_BATCH)):
            src, at = sources[k % len(sources)]
            target = min(end, max(start, at + rng.uniform(-jitter, jitter)))
            batch.append({"src": src, "id": f"{src}.c{k // len(sources):x}", "s": round(target - at, 3)})
        store.run("demo_copy", copies=json.dumps(batch))
        done += len(batch)
        now = time.monotonic()
        if done >= n:
            say(f"copies: {done:,} of {n:,} ({done / max(now - began, 1e-6):,.0f} jobs/s)")
        elif done == len(batch) or done % (COPY_BATCH * 10) == 0:
            rate = (done - window[0]) / max(now - window[1], 1e-6)
            say(
                f"copies: {done:,} of {n:,} at {rate:,.0f} jobs/s (measured): about "
                f"{(n - done) / rate:,.0f} s more"
            )
            window = (done, now)
    return done


def _start_renders(
    store: Store,
    worker: _Worker,
    worker_id: str,
    n: int,
    spacing: float,
    deadline: float,
    all_: list[_Worker],
) -> None:
    """Long renders on `worker`, one every `spacing` seconds, each enqueued once the one before runs."""
    for i in range(n):
        if i:
            time.sleep(spacing)
        payload = payload_json({"image_id": (90_000 if worker_id == MEDIA_1 else 91_000) + i, **RENDER})
        store.enqueue([NewJob(type="demo.image.resize.v1", queue="media", payload=payload, created_by=DEMO)])
        _wait(
            f"waiting for {worker_id} to start render {i + 1}",
            _running(store, worker_id, i + 1),
            deadline,
            all_,
        )


def _running(store: Store, worker_id: str, n: int) -> Any:
    return lambda: int(store.run("demo_running", worker_id=worker_id)[0]["n"]) == n


def _settlement(story: Story) -> NewJob:
    batch = datetime.fromtimestamp(story.incidents[BILLING], UTC).strftime("%Y-%m-%d-night")
    payload = payload_json({"batch": batch, "seconds": 120})
    return NewJob(type="demo.billing.settle.v1", queue="settlements", payload=payload, created_by=DEMO)


def _move_into_history(store: Store, story: Story, targets: dict[str, float], cancelled: set[str]) -> None:
    """Shift every demo job to its time in the story: a job to the time it was made for, the zombies of one
    dead worker by one offset (so their spacing stays real), the cancellations to the operator's moment."""
    ends = store.run("demo_ends", write=False)
    shifts: dict[str, float] = {}
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in ends:
        if row["id"] in cancelled:
            groups.setdefault("cancelled", []).append(row)
        elif row["id"] in targets:
            shifts[row["id"]] = targets[row["id"]] - float(row["end_s"])
        else:  # a render or the settlement: grouped by the worker that died running it
            groups.setdefault(row["worker_id"] or "cancelled", []).append(row)
    for name, rows in groups.items():
        anchor = story.cancelled_at if name == "cancelled" else story.incidents.get(name, story.end)
        offset = anchor - max(float(r["end_s"]) for r in rows)
        shifts.update((r["id"], offset) for r in rows)
    store.run("demo_shift", shifts=json.dumps(shifts))
