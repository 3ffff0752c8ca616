"""PostgreSQL claims read lanes from remembered positions (docs/endurance.md): they find every job that
lands behind a position (a late commit, a release, a rescued fetch, a retry, an edit, a reopened queue, a
row another session held), and their cost does not grow with the dead versions an old snapshot keeps."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from storage_factories import OPS, age

from chokaq_ops.models import NewJob
from chokaq_ops.storage import Retry, Store
from chokaq_ops.storage.dialects import HOT, from_url


@pytest.fixture
def pg(pg_url: str) -> Iterator[Store]:
    with Store(pg_url, pool_size=8, transient_retry_base_delay=0.02) as s:
        yield s


def _claim(store: Store, worker: str = "w", n: int = 1000, queues: list[str] | None = None) -> list[str]:
    return [r["id"] for r in store.fetch(worker, n, queues)]


def _session(url: str):
    """A connection of another application, in a transaction of its own."""
    conn = from_url(url).connect()
    conn.autocommit = False
    return conn


def test_a_job_whose_transaction_commits_after_claims_moved_past_it_is_claimed(pg, pg_url):
    """A producer's transaction began first (its job is due at that start), claims read past that
    position meanwhile, then it committed: the next claim takes it."""
    pg.enqueue([NewJob(type="t", id="before")])
    app = _session(pg_url)
    try:
        pg.enqueue_on(app, [NewJob(type="t", id="early")])
        time.sleep(0.05)
        pg.enqueue([NewJob(type="t", id=f"after{i}") for i in range(3)])
        assert _claim(pg) == ["before", "after0", "after1", "after2"]
        assert _claim(pg) == []
        app.commit()
    finally:
        app.close()
    assert _claim(pg) == ["early"]


def test_jobs_put_back_behind_the_position_are_claimed_again(pg):
    """Releases, rescued fetches and retries due at once land behind a lane's position; each names its
    transaction (ready_xid) and the next claim reads them."""
    pg.enqueue([NewJob(type="t", id=f"j{i}") for i in range(6)])
    assert [r["id"] for r in pg.fetch("holder", 3)] == ["j0", "j1", "j2"]  # fetched, not started
    assert _claim(pg) == ["j3", "j4", "j5"]
    assert pg.release("holder", ["j0"]) == ["j0"]
    assert _claim(pg) == ["j0"]
    age(pg, "jobs_hot", ["j1"], 700, "updated_at")  # untouched for ten minutes: the sweep rescues it
    assert [r["id"] for r in pg.recover_abandoned(600)] == ["j1"]
    assert _claim(pg) == ["j1"]
    pg.enqueue([NewJob(type="t", id="low", priority=1)])
    assert [r["id"] for r in pg.fetch("runner", 1, start=1)] == ["low"]
    assert _claim(pg) == []
    assert pg.reschedule("runner", [Retry("low", 0.0, "boom")]) == ["low"]
    assert _claim(pg) == ["low"]


def test_a_priority_edit_puts_a_waiting_job_ahead_in_another_lane(pg):
    pg.enqueue([NewJob(type="t", id=f"j{i}") for i in range(3)] + [NewJob(type="t", id="late", priority=5)])
    assert _claim(pg, n=2) == ["j0", "j1"]  # the worker now knows lanes 10 and 5, positioned
    pg.edit_pending("late", actor=OPS, priority=20)  # a lane the worker never read
    assert _claim(pg) == ["late", "j2"]


def test_a_paused_queue_resumed_gives_its_old_jobs_back(pg):
    pg.enqueue([NewJob(type="t", id=f"p{i}", queue="paused") for i in range(3)])
    pg.enqueue([NewJob(type="t", id="other", queue="open")])
    pg.set_queue("paused", actor=OPS, paused=True)
    assert _claim(pg) == ["other"]  # the paused queue's lane is left out, and forgotten
    pg.enqueue([NewJob(type="t", id="p-new", queue="paused")])
    assert _claim(pg) == []
    pg.set_queue("paused", actor=OPS, paused=False)
    assert _claim(pg) == ["p0", "p1", "p2", "p-new"]


def test_a_job_another_session_holds_is_passed_then_claimed_when_released(pg, pg_url, monkeypatch):
    """An operator's transaction keeps the first pending job locked: claims skip it (SKIP LOCKED),
    pass it after STUCK_S so the lane reads on, and take it once the lock goes."""
    from chokaq_ops.storage import lanes

    monkeypatch.setattr(lanes, "STUCK_S", 0.2)
    pg.enqueue([NewJob(type="t", id=f"j{i}") for i in range(4)])
    assert _claim(pg, n=0) == []
    op = _session(pg_url)
    try:
        op.cursor().execute("SELECT id FROM jobs_hot WHERE id = 'j0' FOR UPDATE")
        assert _claim(pg, n=1) == ["j1"]
        time.sleep(0.3)
        assert _claim(pg, n=1) == ["j2"]
        book = pg.worker.lanes.of("w", None)
        assert set(book.stuck) == {"j0"}  # passed: looked up by its ctid from now on
        assert _claim(pg, n=1) == ["j3"]
    finally:
        op.rollback()
        op.close()
    assert _claim(pg) == ["j0"]
    assert pg.worker.lanes.of("w", None).stuck == {}


def _claim_buffers(store: Store, worker: str, *, first: bool = False) -> int:
    """Shared buffers one claim of 32 touches (EXPLAIN ANALYZE of the prepared claim, rolled back): the
    worker's next claim, or with `first` a new worker's first (its lanes found, read from their start)."""
    lanes = store.worker.lanes.of(worker, None)
    if first:
        lanes._discovered(store.db.run("discover_lanes", write=False, queues=None), first=True)
        lanes.known = True
    else:
        store.fetch(worker, 0)
    params = {"worker_id": worker, "limit": 32, "start": 32, "queues": None, **lanes._params(32)}
    st = store.queries["fetch"].statements[0]
    name, order, prepare, _ = store.db.dialect._prepared[id(st)]
    with store.pool.connection(HOT) as conn:
        cur = conn.cursor()
        cur.execute("SELECT 1 FROM pg_prepared_statements WHERE name = ?", name)
        if not cur.fetchall():
            cur.execute(prepare)
        conn.autocommit = False
        try:
            cur.execute(f"EXPLAIN (ANALYZE, BUFFERS) EXECUTE {name}({', '.join('?' * len(order))})",
                        [store.db._param(params[k]) for k in order])  # fmt: skip
            plan = "\n".join(r[0] for r in cur.fetchall())
        finally:
            conn.rollback()
            conn.autocommit = True
    top = next(ln for ln in plan.splitlines() if "Buffers:" in ln)
    return sum(int(n) for n in re.findall(r"(?:hit|read)=(\d+)", top))


def test_claim_cost_stays_flat_while_a_snapshot_keeps_50000_dead_versions(pg, pg_url):
    """A session holds a repeatable-read snapshot while 50,000 jobs are enqueued and claimed past it
    (their old versions cannot be vacuumed). A claim touches about as many buffers after 25,000 such
    versions as after 50,000, and within half again of a fresh table (the indexes' trees are a level
    deeper, for every write); a worker without positions walks them all, as every claim did before."""

    def churn(n: int) -> None:
        for _ in range(n // 2000):
            pg.enqueue([NewJob(type="t") for _ in range(2000)])
            while len(pg.fetch("w", 500)) == 500:
                pass
        pg.enqueue([NewJob(type="t") for _ in range(200)])
        with pg.connection() as conn:
            conn.cursor().execute("VACUUM jobs_hot")  # removes nothing the held snapshot may see

    pg.enqueue([NewJob(type="t") for _ in range(200)])
    fresh = _claim_buffers(pg, "w")
    holder = _session(pg_url)
    try:
        cur = holder.cursor()
        cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cur.execute("SET LOCAL idle_in_transaction_session_timeout = 0")
        cur.execute("SELECT count(*) FROM jobs_archive")
        cur.fetchall()
        churn(25_000)
        half = _claim_buffers(pg, "w")
        churn(25_000)
        full = _claim_buffers(pg, "w")
        newcomer = _claim_buffers(pg, "newcomer", first=True)
    finally:
        holder.rollback()
        holder.close()
    assert full <= half * 1.1 + 20, (fresh, half, full)
    assert full <= fresh * 1.5, (fresh, half, full)
    # Buffers undercount a walk (consecutive dead entries share heap pages), yet it shows.
    assert newcomer > 2 * full, (full, newcomer)


def test_claim_cost_stays_flat_as_the_backlog_grows(pg):
    """Issue 28's shape: a claim of 32 touches about as many buffers with 200,000 jobs waiting as with
    1,000 (the lanes read from their positions, never the backlog behind them); counted, never timed."""
    pg.enqueue([NewJob(type="t", priority=p % 3) for p in range(1000)])
    small = _claim_buffers(pg, "w")
    for _ in range(199):
        pg.enqueue([NewJob(type="t", priority=p % 3) for p in range(1000)])
    with pg.connection() as conn:
        conn.cursor().execute("VACUUM ANALYZE jobs_hot")
    large = _claim_buffers(pg, "w")
    # The indexes' trees are a level deeper at 200,000 rows: a few more buffers per lane read.
    print(f"\nbuffers per claim of 32: {small} at 1,000 waiting, {large} at 200,000")
    assert large <= small * 1.5 + 20, (small, large)


def test_queue_lag_is_read_through_lanes_and_sees_jobs_put_back_behind_them(pg, pg_url):
    """GET /queues, the metrics and readiness read the lag like claims read jobs: from remembered
    positions, plus the jobs made pending behind them since."""

    def lag(queue: str = "default") -> tuple[int, float]:
        q = next(q for q in pg.queue_stats() if q["name"] == queue)
        return q["due_pending"], q["max_lag_seconds"]

    pg.enqueue([NewJob(type="t", id=f"j{i}") for i in range(5)])
    age(pg, "jobs_hot", None, 30, "due_at")
    n, oldest = lag()
    assert n == 5 and 29 < oldest < 60
    assert [r["id"] for r in pg.fetch("w", 3)] == ["j0", "j1", "j2"]
    n, oldest = lag()
    assert n == 2 and 29 < oldest < 60
    assert pg.release("w", ["j0"]) == ["j0"]  # back behind the reader's position
    assert lag()[0] == 3
    app = _session(pg_url)
    try:
        pg.enqueue_on(app, [NewJob(type="t", id="late")])
        assert lag()[0] == 3  # not committed yet
        app.commit()
    finally:
        app.close()
    assert lag()[0] == 4
    assert len(pg.fetch("w2", 10)) == 4
    assert lag() == (0, 0.0)


def test_a_producer_transaction_left_open_holds_up_no_other_statement(pg_url):
    """Each transaction counts its moves in a counter row of its own: 1,000 enqueues and claims while a
    producer's transaction stays open all finish, none waiting for its row (with a row shared by the 16
    transactions of a bucket, most such runs met the open one's row and waited out the lock timeout)."""
    with Store(pg_url, lock_timeout=1.0, max_transient_retries=0) as quick:
        app = _session(pg_url)
        try:
            quick.enqueue_on(app, [NewJob(type="t", id="open")])
            began = time.monotonic()
            for i in range(500):
                quick.enqueue([NewJob(type="t")])
                quick.fetch(f"w{i % 4}", 1)
            assert time.monotonic() - began < 10  # no lock wait (each would be 1 s and an error)
        finally:
            app.rollback()
            app.close()
