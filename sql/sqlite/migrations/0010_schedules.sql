-- 0010: recurring schedules (docs/schedules.md). A schedule fires a job of its type at each tick of its
-- cron expression; every `chokaq serve` / `chokaq worker` process checks for due ones, and no leader is
-- needed: a tick's job is enqueued in the same transaction as its row in the tick ledger
-- (schedule_runs), whose key (schedule, tick_at, kind) lets one transaction per tick succeed, and keeps
-- a tick whose job already left the hot table (and so no longer holds its idempotency key) from ever
-- running again. next_run_at is the first tick not yet handled (NULL while paused); it is advanced in
-- that same transaction, compare-and-set, so processes racing for a tick do one insert between them.
CREATE TABLE schedules (
    name                   TEXT    NOT NULL PRIMARY KEY,
    type                   TEXT    NOT NULL,
    cron                   TEXT    NOT NULL,
    tz                     TEXT    NOT NULL DEFAULT 'UTC',
    payload                TEXT,
    queue                  TEXT    NOT NULL DEFAULT 'default',
    priority               INTEGER NOT NULL DEFAULT 10,
    tags                   TEXT,
    misfire                TEXT    NOT NULL DEFAULT 'once' CHECK (misfire IN ('skip', 'once', 'catch_up')),
    catch_up_max           INTEGER NOT NULL DEFAULT 1 CHECK (catch_up_max BETWEEN 1 AND 1000),
    misfire_grace_seconds  REAL    CHECK (misfire_grace_seconds IS NULL OR misfire_grace_seconds > 0),
    paused                 INTEGER NOT NULL DEFAULT 0,
    source                 TEXT    NOT NULL DEFAULT 'api' CHECK (source IN ('api', 'code')),
    next_run_at            TEXT,
    last_tick_at           TEXT,
    last_run_at            TEXT,
    last_job_id            TEXT,
    runs_total             INTEGER NOT NULL DEFAULT 0,
    missed_total           INTEGER NOT NULL DEFAULT 0,
    created_at             TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    created_by             TEXT,
    updated_at             TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    updated_by             TEXT
);
CREATE INDEX ix_schedules_due ON schedules (next_run_at) WHERE paused = 0 AND next_run_at IS NOT NULL;
-- The tick ledger: one row per tick that ran (kind 'cron'; `late` when it ran after its misfire grace)
-- and per trigger-now (kind 'manual', tick_at = when it was asked for), with the job it enqueued.
CREATE TABLE schedule_runs (
    schedule  TEXT    NOT NULL,
    tick_at   TEXT    NOT NULL,
    kind      TEXT    NOT NULL CHECK (kind IN ('cron', 'manual')),
    late      INTEGER NOT NULL DEFAULT 0,
    job_id    TEXT,
    fired_at  TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    fired_by  TEXT,
    PRIMARY KEY (schedule, tick_at, kind)
);
CREATE INDEX ix_schedule_runs_fired ON schedule_runs (fired_at);
