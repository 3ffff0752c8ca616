-- 0005: the circuit breaker per job type (docs/circuits.md) and the worker registry.
-- The circuit breaker of each job type, shared by every worker (docs/circuits.md). state: 0 closed,
-- 1 open, 2 half-open; forced 1: opened by an operator, stays open until an operator closes it. The
-- policy columns are the numbers the reporting worker applies (Circuit.* or the type's @job policy).
-- prev_state is the state before the last statement that touched the row (its transitions' events).
CREATE TABLE circuits (
    type                 varchar(255)     NOT NULL,
    state                smallint         NOT NULL DEFAULT 0,
    prev_state           smallint         NOT NULL DEFAULT 0,
    forced               smallint         NOT NULL DEFAULT 0,
    failures             integer          NOT NULL DEFAULT 0,
    last_failure_at      timestamptz,
    opened_at            timestamptz,
    open_until           timestamptz,
    probes               integer          NOT NULL DEFAULT 0,
    probe_until          timestamptz,
    successes            integer          NOT NULL DEFAULT 0,
    transitions          integer          NOT NULL DEFAULT 0,
    failure_threshold    integer          NOT NULL DEFAULT 5,
    failure_window_s     double precision NOT NULL DEFAULT 60,
    break_duration_s     double precision NOT NULL DEFAULT 30,
    half_open_max_calls  integer          NOT NULL DEFAULT 1,
    updated_at           timestamptz      NOT NULL DEFAULT now(),
    CONSTRAINT pk_circuits PRIMARY KEY (type),
    CONSTRAINT ck_circuits_state CHECK (state IN (0, 1, 2))
);

-- The worker registry (docs/worker.md "Registry"): each worker upserts its row on every heartbeat.
-- desired_concurrency: an operator's target (PATCH /workers/{id}); the worker applies it at its next beat.
CREATE TABLE workers (
    id                   varchar(100) NOT NULL,
    host                 varchar(255) NOT NULL,
    pid                  integer      NOT NULL,
    queues               text,
    concurrency          integer      NOT NULL,
    desired_concurrency  integer,
    running              integer      NOT NULL DEFAULT 0,
    prefetched           integer      NOT NULL DEFAULT 0,
    started_at           timestamptz  NOT NULL DEFAULT now(),
    last_seen_at         timestamptz  NOT NULL DEFAULT now(),
    CONSTRAINT pk_workers PRIMARY KEY (id),
    CONSTRAINT ck_workers_desired CHECK (desired_concurrency IS NULL OR desired_concurrency >= 1)
);
CREATE INDEX ix_workers_seen ON workers (last_seen_at);
