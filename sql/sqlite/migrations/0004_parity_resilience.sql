-- 0004 (PostgreSQL calls it 0005): the circuit breaker per job type (docs/circuits.md) and the worker registry.
-- The circuit breaker of each job type, shared by every worker (docs/circuits.md). state: 0 closed,
-- 1 open, 2 half-open; forced 1: opened by an operator, stays open until an operator closes it. The
-- policy columns are the numbers the reporting worker applies (Circuit.* or the type's @job policy).
-- prev_state is the state before the last statement that touched the row (its transitions' events).
CREATE TABLE circuits (
    type                 TEXT    NOT NULL PRIMARY KEY,
    state                INTEGER NOT NULL DEFAULT 0 CHECK (state IN (0, 1, 2)),
    prev_state           INTEGER NOT NULL DEFAULT 0,
    forced               INTEGER NOT NULL DEFAULT 0,
    failures             INTEGER NOT NULL DEFAULT 0,
    last_failure_at      TEXT,
    opened_at            TEXT,
    open_until           TEXT,
    probes               INTEGER NOT NULL DEFAULT 0,
    probe_until          TEXT,
    successes            INTEGER NOT NULL DEFAULT 0,
    transitions          INTEGER NOT NULL DEFAULT 0,
    failure_threshold    INTEGER NOT NULL DEFAULT 5,
    failure_window_s     REAL    NOT NULL DEFAULT 60,
    break_duration_s     REAL    NOT NULL DEFAULT 30,
    half_open_max_calls  INTEGER NOT NULL DEFAULT 1,
    updated_at           TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);

-- The worker registry (docs/worker.md "Registry"): each worker upserts its row on every heartbeat.
-- desired_concurrency: an operator's target (PATCH /workers/{id}); the worker applies it at its next beat.
CREATE TABLE workers (
    id                   TEXT    NOT NULL PRIMARY KEY,
    host                 TEXT    NOT NULL,
    pid                  INTEGER NOT NULL,
    queues               TEXT,
    concurrency          INTEGER NOT NULL,
    desired_concurrency  INTEGER CHECK (desired_concurrency IS NULL OR desired_concurrency >= 1),
    running              INTEGER NOT NULL DEFAULT 0,
    prefetched           INTEGER NOT NULL DEFAULT 0,
    started_at           TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    last_seen_at         TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);
CREATE INDEX ix_workers_seen ON workers (last_seen_at);
