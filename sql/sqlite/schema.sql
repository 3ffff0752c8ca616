-- chokaq schema for SQLite (the embedded default). The truth for fresh installs; migrations/ replays to
-- the same shape. Times are UTC text 'YYYY-MM-DD HH:MM:SS.fff', which sorts and compares correctly.
-- Statements end with ';' at the end of a line (the migration runner splits on that).

-- Active work: pending (0), fetched (1), processing (2). Kept small: finished rows move out.
CREATE TABLE jobs_hot (
    id                TEXT    NOT NULL PRIMARY KEY,
    queue             TEXT    NOT NULL,
    type              TEXT    NOT NULL,
    payload           TEXT,
    tags              TEXT,
    idempotency_key   TEXT,
    priority          INTEGER NOT NULL DEFAULT 10,
    status            INTEGER NOT NULL DEFAULT 0 CHECK (status IN (0, 1, 2)),
    attempt_count     INTEGER NOT NULL DEFAULT 0,
    worker_id         TEXT,
    heartbeat_at      TEXT,
    scheduled_at      TEXT,
    due_at            TEXT    NOT NULL,
    created_at        TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    started_at        TEXT,
    updated_at        TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    created_by        TEXT,
    last_modified_by  TEXT,
    last_error        TEXT,
    trace_context     TEXT,  -- the producer's W3C trace context, JSON (docs/tracing.md)
    renewed_at        TEXT  -- 0009: a renewing resurrect restarted the lifetime clock (MaxJobAge) here
);
CREATE INDEX ix_jobs_hot_fetch ON jobs_hot (priority DESC, due_at) WHERE status = 0;
CREATE INDEX ix_jobs_hot_queue_fetch ON jobs_hot (queue, priority DESC, due_at) WHERE status = 0;
CREATE INDEX ix_jobs_hot_queue_status ON jobs_hot (queue, status);
CREATE INDEX ix_jobs_hot_fetched ON jobs_hot (updated_at) WHERE status = 1;
CREATE INDEX ix_jobs_hot_processing ON jobs_hot (coalesce(heartbeat_at, updated_at)) WHERE status = 2;
CREATE UNIQUE INDEX ux_jobs_hot_idempotency ON jobs_hot (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX ix_jobs_hot_created ON jobs_hot (created_at, id);
CREATE INDEX ix_jobs_hot_due ON jobs_hot (due_at) WHERE status = 0 AND scheduled_at IS NOT NULL;

CREATE TABLE jobs_archive (
    id                TEXT    NOT NULL PRIMARY KEY,
    queue             TEXT    NOT NULL,
    type              TEXT    NOT NULL,
    payload           TEXT,
    tags              TEXT,
    idempotency_key   TEXT,
    priority          INTEGER NOT NULL DEFAULT 10,
    attempt_count     INTEGER NOT NULL DEFAULT 1,
    worker_id         TEXT,
    created_at        TEXT    NOT NULL,
    started_at        TEXT,
    finished_at       TEXT    NOT NULL,
    duration_ms       REAL,
    created_by        TEXT,
    last_modified_by  TEXT,
    failure_count     INTEGER NOT NULL DEFAULT 0,
    trace_context     TEXT
);
CREATE INDEX ix_jobs_archive_finished ON jobs_archive (finished_at, id);
CREATE INDEX ix_jobs_archive_queue ON jobs_archive (queue, finished_at, id);
CREATE INDEX ix_jobs_archive_type ON jobs_archive (type, finished_at, id);

-- Failure history: one row per failed attempt (retried or dead-lettered), written in the transaction of
-- the failure; survives resurrects. Pruned by Retention.FailureHistory.
CREATE TABLE job_failures (
    seq             INTEGER NOT NULL PRIMARY KEY,
    job_id          TEXT    NOT NULL,
    queue           TEXT    NOT NULL,
    type            TEXT    NOT NULL,
    attempt         INTEGER NOT NULL,
    outcome         TEXT    NOT NULL CHECK (outcome IN ('retry', 'dead')),
    failure_reason  INTEGER NOT NULL,
    fingerprint     TEXT,
    error_line      TEXT,
    error_details   TEXT,
    worker_id       TEXT,
    failed_at       TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);
CREATE INDEX ix_job_failures_job ON job_failures (job_id, seq);
CREATE INDEX ix_job_failures_failed ON job_failures (failed_at, seq);

CREATE TABLE jobs_dlq (
    id                TEXT    NOT NULL PRIMARY KEY,
    queue             TEXT    NOT NULL,
    type              TEXT    NOT NULL,
    payload           TEXT,
    tags              TEXT,
    idempotency_key   TEXT,
    priority          INTEGER NOT NULL DEFAULT 10,
    failure_reason    INTEGER NOT NULL CHECK (failure_reason BETWEEN 0 AND 10),
    error_details     TEXT,
    fingerprint       TEXT,
    attempt_count     INTEGER NOT NULL DEFAULT 0,
    worker_id         TEXT,
    heartbeat_at      TEXT,
    created_at        TEXT    NOT NULL,
    started_at        TEXT,
    failed_at         TEXT    NOT NULL,
    duration_ms       REAL,
    created_by        TEXT,
    last_modified_by  TEXT,
    trace_context     TEXT
);
CREATE INDEX ix_jobs_dlq_failed ON jobs_dlq (failed_at, id);
CREATE INDEX ix_jobs_dlq_reason ON jobs_dlq (failure_reason, failed_at, id);
CREATE INDEX ix_jobs_dlq_queue_reason ON jobs_dlq (queue, failure_reason, failed_at, id);
CREATE INDEX ix_jobs_dlq_queue ON jobs_dlq (queue, failed_at, id);
CREATE INDEX ix_jobs_dlq_type ON jobs_dlq (type, failed_at, id);
CREATE INDEX ix_jobs_dlq_fingerprint ON jobs_dlq (fingerprint, failed_at, id);
CREATE INDEX ix_jobs_dlq_created ON jobs_dlq (created_at, id);

-- Dead jobs per hour of failure (UTC), queue and reason, kept exact by triggers in the transaction of every
-- DLQ insert, delete and update. GET /dlq reads its X-Pagination total here instead of counting a million
-- rows, and a deep page seeks to the hour that holds its first row instead of OFFSET-scanning the list.
CREATE TABLE dlq_counts (
    hour            TEXT    NOT NULL,
    queue           TEXT    NOT NULL,
    failure_reason  INTEGER NOT NULL,
    n               INTEGER NOT NULL,
    PRIMARY KEY (hour, queue, failure_reason)
) WITHOUT ROWID;
CREATE TRIGGER tr_dlq_counts_insert AFTER INSERT ON jobs_dlq BEGIN
    INSERT INTO dlq_counts (hour, queue, failure_reason, n)
    VALUES (substr(NEW.failed_at, 1, 13) || ':00:00.000', NEW.queue, NEW.failure_reason, 1)
    ON CONFLICT (hour, queue, failure_reason) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER tr_dlq_counts_delete AFTER DELETE ON jobs_dlq BEGIN
    UPDATE dlq_counts SET n = n - 1
    WHERE hour = substr(OLD.failed_at, 1, 13) || ':00:00.000' AND queue = OLD.queue
      AND failure_reason = OLD.failure_reason;
    DELETE FROM dlq_counts
    WHERE hour = substr(OLD.failed_at, 1, 13) || ':00:00.000' AND queue = OLD.queue
      AND failure_reason = OLD.failure_reason AND n <= 0;
END;
CREATE TRIGGER tr_dlq_counts_update AFTER UPDATE OF queue, failure_reason, failed_at ON jobs_dlq BEGIN
    UPDATE dlq_counts SET n = n - 1
    WHERE hour = substr(OLD.failed_at, 1, 13) || ':00:00.000' AND queue = OLD.queue
      AND failure_reason = OLD.failure_reason;
    DELETE FROM dlq_counts
    WHERE hour = substr(OLD.failed_at, 1, 13) || ':00:00.000' AND queue = OLD.queue
      AND failure_reason = OLD.failure_reason AND n <= 0;
    INSERT INTO dlq_counts (hour, queue, failure_reason, n)
    VALUES (substr(NEW.failed_at, 1, 13) || ':00:00.000', NEW.queue, NEW.failure_reason, 1)
    ON CONFLICT (hour, queue, failure_reason) DO UPDATE SET n = n + 1;
END;

-- Names of the failure reasons stored as numbers in jobs_dlq and metric_buckets (for messages and for people
-- reading the database directly).
CREATE TABLE failure_reasons (
    code  INTEGER NOT NULL PRIMARY KEY,
    name  TEXT    NOT NULL
);
INSERT INTO failure_reasons (code, name) VALUES (0, 'MaxRetriesExceeded'), (1, 'Cancelled'), (2, 'Zombie'),
    (3, 'CircuitBreakerOpen'), (4, 'Rejected'), (5, 'Throttled'), (6, 'Fatal'), (7, 'Timeout'), (8, 'Transient'),
    (9, 'HeartbeatFailure'), (10, 'RetryLifetimeExpired');

CREATE TABLE queues (
    name                    TEXT    NOT NULL PRIMARY KEY,
    paused                  INTEGER NOT NULL DEFAULT 0,
    active                  INTEGER NOT NULL DEFAULT 1,
    zombie_timeout_seconds  INTEGER CHECK (zombie_timeout_seconds IS NULL OR zombie_timeout_seconds > 0),
    max_workers             INTEGER CHECK (max_workers IS NULL OR max_workers > 0),
    updated_at              TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);
INSERT INTO queues (name) VALUES ('default');

CREATE TABLE stats_summary (
    queue             TEXT    NOT NULL PRIMARY KEY,
    enqueued_total    INTEGER NOT NULL DEFAULT 0,
    succeeded_total   INTEGER NOT NULL DEFAULT 0,
    failed_total      INTEGER NOT NULL DEFAULT 0,
    retried_total     INTEGER NOT NULL DEFAULT 0,
    last_activity_at  TEXT
);
INSERT INTO stats_summary (queue) VALUES ('default');

CREATE TABLE metric_buckets (
    bucket_start       TEXT    NOT NULL,
    queue              TEXT    NOT NULL,
    outcome            INTEGER NOT NULL CHECK (outcome IN (0, 1)),
    failure_reason     INTEGER NOT NULL,
    completed_count    INTEGER NOT NULL DEFAULT 0,
    duration_count     INTEGER NOT NULL DEFAULT 0,
    total_duration_ms  REAL    NOT NULL DEFAULT 0,
    max_duration_ms    REAL,
    PRIMARY KEY (bucket_start, queue, outcome, failure_reason)
);

CREATE TABLE audit_log (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    at       TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    actor    TEXT    NOT NULL,
    action   TEXT    NOT NULL,
    job_id   TEXT,
    plan_id  TEXT,
    count    INTEGER NOT NULL DEFAULT 1,
    details  TEXT
);
CREATE INDEX ix_audit_log_at ON audit_log (at);
CREATE INDEX ix_audit_log_job ON audit_log (job_id) WHERE job_id IS NOT NULL;
CREATE INDEX ix_audit_log_plan ON audit_log (plan_id) WHERE plan_id IS NOT NULL;
CREATE INDEX ix_audit_log_actor ON audit_log (actor, at);

-- SQLite has one writer at a time, so ids commit in order and readers need no extra guard.
CREATE TABLE events (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    at       TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    kind     TEXT NOT NULL,
    message  TEXT NOT NULL,
    data     TEXT
);
CREATE INDEX ix_events_at ON events (at);

CREATE TABLE api_tokens (
    name          TEXT NOT NULL PRIMARY KEY,
    role          TEXT NOT NULL CHECK (role IN ('reader', 'operator', 'admin')),
    token_hash    TEXT NOT NULL,
    created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    created_by    TEXT,
    revoked_at    TEXT,
    last_used_at  TEXT
);
CREATE UNIQUE INDEX ux_api_tokens_hash ON api_tokens (token_hash);

CREATE TABLE leases (
    name        TEXT NOT NULL PRIMARY KEY,
    holder      TEXT NOT NULL,
    expires_at  TEXT NOT NULL
);

-- Bulk-decision plans (chokaq_ops.storage.plan_ops): the frozen set of jobs a resurrect / purge / cancel
-- acts on, and how far its execution got. A chunk's items are marked done in the same transaction as the
-- move, so an interrupted plan resumes where it stopped and never touches a job twice.
CREATE TABLE plans (
    id           TEXT    NOT NULL PRIMARY KEY,
    action       TEXT    NOT NULL CHECK (action IN ('resurrect', 'purge', 'cancel')),
    actor        TEXT    NOT NULL,
    state        TEXT    NOT NULL DEFAULT 'ready' CHECK (state IN ('ready', 'running', 'done', 'discarded')),
    created_at   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    updated_at   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    finished_at  TEXT,
    chunk_size   INTEGER NOT NULL,
    total        INTEGER NOT NULL DEFAULT 0,
    chunks       INTEGER NOT NULL DEFAULT 0,
    chunks_done  INTEGER NOT NULL DEFAULT 0,
    done         INTEGER NOT NULL DEFAULT 0,
    skipped      INTEGER NOT NULL DEFAULT 0,
    details      TEXT,
    approved_by  TEXT,  -- four-eyes approval (0003): a token name other than actor
    approved_at  TEXT,
    label        TEXT,  -- the CLI's --label: a re-run resumes the unfinished plan with it
    rate         REAL,  -- 0007: the plan's pace in jobs/s, shared by every process working it
    not_before   TEXT,  -- the earliest start of the next chunk under that pace
    lease_holder TEXT,  -- the run working the plan (one at a time) ...
    lease_until  TEXT   -- ... until then, renewed by each chunk it runs
);
CREATE INDEX ix_plans_label ON plans (label, action, created_at) WHERE label IS NOT NULL;
CREATE UNIQUE INDEX ux_plans_open_label ON plans (label, action)
    WHERE label IS NOT NULL AND state IN ('ready', 'running');
CREATE INDEX ix_plans_created ON plans (created_at, id);

-- One row per job of a plan. `outcome`: done (acted on) or skipped (no longer where the plan found it).
CREATE TABLE plan_items (
    plan_id   TEXT    NOT NULL,
    job_id    TEXT    NOT NULL,
    chunk     INTEGER NOT NULL,
    ord       INTEGER NOT NULL,
    payload   TEXT,
    tags      TEXT,
    priority  INTEGER,
    done_at   TEXT,
    outcome   TEXT    CHECK (outcome IS NULL OR outcome IN ('done', 'skipped')),
    PRIMARY KEY (plan_id, job_id)
);
-- The next chunk to run: only unfinished items are indexed, so a resumed 1M-item plan finds it at once.
CREATE INDEX ix_plan_items_pending ON plan_items (plan_id, chunk) WHERE done_at IS NULL;
CREATE INDEX ix_plan_items_order ON plan_items (plan_id, ord);

-- Plans being frozen (0007): from the first batch of items to the plan's creation, beaten every batch; the
-- items of a freeze whose process died are reclaimed (chokaq plans ls --orphans).
CREATE TABLE plan_freezes (
    plan_id     TEXT NOT NULL PRIMARY KEY,
    actor       TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'freezing' CHECK (state IN ('freezing', 'reclaiming')),
    started_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    beat_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);

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

-- What workers declared per job type when they started (@job(idempotent=True)): --idempotent-only.
CREATE TABLE job_types (
    type        TEXT NOT NULL PRIMARY KEY,
    idempotent  INTEGER NOT NULL,
    updated_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);

-- Alerts (docs/alerts.md): receivers and rules made over the API or the CLI, and the rule loop's state.
CREATE TABLE alert_receivers (
    name           TEXT NOT NULL,
    kind           TEXT  NOT NULL,
    url            TEXT         NOT NULL,
    secret         TEXT,
    send_resolved  INTEGER NOT NULL DEFAULT 1,
    timeout_s      REAL NOT NULL DEFAULT 10,
    max_alerts     INTEGER      NOT NULL DEFAULT 0,
    created_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    created_by     TEXT,
    updated_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    updated_by     TEXT,
    CONSTRAINT pk_alert_receivers PRIMARY KEY (name),
    CONSTRAINT ck_alert_receivers_kind CHECK (kind IN ('webhook', 'slack'))
);
CREATE TABLE alert_rules (
    name               TEXT NOT NULL,
    kind               TEXT  NOT NULL,
    receivers          TEXT         NOT NULL,
    severity           TEXT  NOT NULL DEFAULT 'warning',
    threshold          REAL,
    window_s           REAL,
    for_s              REAL NOT NULL DEFAULT 0,
    repeat_interval_s  REAL,
    group_by           TEXT,
    queues             TEXT,
    by_label           TEXT,
    inhibited_by       TEXT,
    inhibit_equal      TEXT,
    enabled            INTEGER NOT NULL DEFAULT 1,
    created_at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    created_by         TEXT,
    updated_at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    updated_by         TEXT,
    CONSTRAINT pk_alert_rules PRIMARY KEY (name)
);
-- One row per active (pending or firing) alert, and per resolved one until its resolve is sent.
CREATE TABLE alert_state (
    rule           TEXT NOT NULL,
    alert_key      TEXT  NOT NULL,
    labels         TEXT         NOT NULL,
    annotations    TEXT         NOT NULL,
    value          REAL,
    status         TEXT  NOT NULL,
    active_at   TEXT  NOT NULL,
    firing_at   TEXT,
    resolved_at    TEXT,
    updated_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    CONSTRAINT pk_alert_state PRIMARY KEY (rule, alert_key),
    CONSTRAINT ck_alert_state_status CHECK (status IN ('pending', 'firing', 'resolved'))
);
-- One row per notification group (receiver, rule, values of the rule's group_by labels).
CREATE TABLE alert_groups (
    receiver       TEXT NOT NULL,
    group_key      TEXT  NOT NULL,
    rule           TEXT NOT NULL,
    group_labels   TEXT         NOT NULL,
    sent_keys      TEXT         NOT NULL DEFAULT '[]',
    seq            INTEGER      NOT NULL DEFAULT 0,
    created_at     TEXT  NOT NULL,
    last_sent_at   TEXT,
    CONSTRAINT pk_alert_groups PRIMARY KEY (receiver, group_key)
);
-- Recurring schedules and their tick ledger (docs/schedules.md; migration 0010).
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
