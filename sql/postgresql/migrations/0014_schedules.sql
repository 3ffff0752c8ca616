-- 0014: recurring schedules (docs/schedules.md). A schedule fires a job of its type at each tick of its
-- cron expression; every `chokaq serve` / `chokaq worker` process checks for due ones, and no leader is
-- needed: a tick's job is enqueued in the same transaction as its row in the tick ledger
-- (schedule_runs), whose key (schedule, tick_at, kind) lets one transaction per tick succeed, and keeps
-- a tick whose job already left the hot table (and so no longer holds its idempotency key) from ever
-- running again. next_run_at is the first tick not yet handled (NULL while paused); it is advanced in
-- that same transaction, compare-and-set, so processes racing for a tick do one insert between them.
CREATE TABLE schedules (
    name                   varchar(100) NOT NULL,
    type                   varchar(255) NOT NULL,
    cron                   varchar(200) NOT NULL,
    tz                     varchar(64)  NOT NULL DEFAULT 'UTC',
    payload                text,
    queue                  varchar(255) NOT NULL DEFAULT 'default',
    priority               integer      NOT NULL DEFAULT 10,
    tags                   varchar(1000),
    misfire                varchar(10)  NOT NULL DEFAULT 'once',
    catch_up_max           integer      NOT NULL DEFAULT 1,
    misfire_grace_seconds  double precision,
    paused                 boolean      NOT NULL DEFAULT false,
    source                 varchar(10)  NOT NULL DEFAULT 'api',
    next_run_at            timestamptz,
    last_tick_at           timestamptz,
    last_run_at            timestamptz,
    last_job_id            varchar(50),
    runs_total             bigint       NOT NULL DEFAULT 0,
    missed_total           bigint       NOT NULL DEFAULT 0,
    created_at             timestamptz  NOT NULL DEFAULT now(),
    created_by             varchar(100),
    updated_at             timestamptz  NOT NULL DEFAULT now(),
    updated_by             varchar(100),
    CONSTRAINT pk_schedules PRIMARY KEY (name),
    CONSTRAINT ck_schedules_misfire CHECK (misfire IN ('skip', 'once', 'catch_up')),
    CONSTRAINT ck_schedules_catch_up CHECK (catch_up_max BETWEEN 1 AND 1000),
    CONSTRAINT ck_schedules_grace CHECK (misfire_grace_seconds IS NULL OR misfire_grace_seconds > 0),
    CONSTRAINT ck_schedules_source CHECK (source IN ('api', 'code'))
);
CREATE INDEX ix_schedules_due ON schedules (next_run_at) WHERE NOT paused AND next_run_at IS NOT NULL;
-- The tick ledger: one row per tick that ran (kind 'cron'; `late` when it ran after its misfire grace)
-- and per trigger-now (kind 'manual', tick_at = when it was asked for), with the job it enqueued.
CREATE TABLE schedule_runs (
    schedule  varchar(100) NOT NULL,
    tick_at   timestamptz  NOT NULL,
    kind      varchar(6)   NOT NULL,
    late      boolean      NOT NULL DEFAULT false,
    job_id    varchar(50),
    fired_at  timestamptz  NOT NULL DEFAULT now(),
    fired_by  varchar(100),
    CONSTRAINT pk_schedule_runs PRIMARY KEY (schedule, tick_at, kind),
    CONSTRAINT ck_schedule_runs_kind CHECK (kind IN ('cron', 'manual'))
);
CREATE INDEX ix_schedule_runs_fired ON schedule_runs (fired_at);
