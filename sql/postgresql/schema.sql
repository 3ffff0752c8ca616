-- chokaq schema for PostgreSQL (>= 13). The truth for fresh installs; migrations/ replays to the same shape.
-- Statements end with ';' at the end of a line (the migration runner splits on that).

-- Active work: pending (0), fetched (1), processing (2). Kept small: finished rows move out.
CREATE TABLE jobs_hot (
    id                varchar(50)  NOT NULL,
    queue             varchar(255) NOT NULL,
    type              varchar(255) NOT NULL,
    payload           text,
    tags              varchar(1000),
    idempotency_key   varchar(255),
    priority          integer      NOT NULL DEFAULT 10,
    status            smallint     NOT NULL DEFAULT 0,
    attempt_count     integer      NOT NULL DEFAULT 0,
    worker_id         varchar(100),
    heartbeat_at      timestamptz,
    scheduled_at      timestamptz,
    due_at            timestamptz  NOT NULL,
    created_at        timestamptz  NOT NULL DEFAULT now(),
    started_at        timestamptz,
    updated_at        timestamptz  NOT NULL DEFAULT now(),
    created_by        varchar(100),
    last_modified_by  varchar(100),
    last_error        text,
    -- The transaction that last made the row pending (insert, release, retry, resurrect, edit): a claim
    -- reads the rows of transactions its previous claim could not see (docs/endurance.md).
    ready_xid         xid8         NOT NULL DEFAULT pg_current_xact_id(),
    trace_context     text,  -- the producer's W3C trace context, JSON (docs/tracing.md)
    renewed_at        timestamptz,  -- 0013: a renewing resurrect restarted the lifetime clock (MaxJobAge) here
    CONSTRAINT pk_jobs_hot PRIMARY KEY (id),
    CONSTRAINT ck_jobs_hot_status CHECK (status IN (0, 1, 2))
) WITH (fillfactor = 80, autovacuum_analyze_scale_factor = 0.02,
        -- Vacuumed once a few thousand versions are dead, without a cost delay (docs/endurance.md).
        autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
        autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 10000,
        autovacuum_vacuum_cost_delay = 0);

-- The claim's lanes (queue, priority), each read from the worker's position on (docs/endurance.md), and
-- per-queue lag.
CREATE INDEX ix_jobs_hot_lane ON jobs_hot (queue, priority DESC, due_at, id) WHERE status = 0;
-- Pending rows by the transaction that made them pending: the claim's guard for late commits.
CREATE INDEX ix_jobs_hot_ready_xid ON jobs_hot (ready_xid) WHERE status = 0;
-- The max_workers check (a capped queue's fetched + processing rows); pending rows are not in it, so an
-- enqueue never writes it (migration 0016).
CREATE INDEX ix_jobs_hot_inflight ON jobs_hot (queue) WHERE status IN (1, 2);
-- Abandoned-fetch recovery.
CREATE INDEX ix_jobs_hot_fetched ON jobs_hot (updated_at) WHERE status = 1;
-- Zombie sweep: only processing rows are indexed, so the sweep never touches the pending backlog.
CREATE INDEX ix_jobs_hot_processing ON jobs_hot ((coalesce(heartbeat_at, updated_at))) WHERE status = 2;
-- Active-work dedupe.
CREATE UNIQUE INDEX ux_jobs_hot_idempotency ON jobs_hot (idempotency_key) WHERE idempotency_key IS NOT NULL;
-- Operator listing, newest first. Partial on a predicate every row meets, which the listings state and the
-- worker's statements never do: only the primary key answers their lookups by id (migration 0015).
CREATE INDEX ix_jobs_hot_created ON jobs_hot (created_at, id) WHERE created_at IS NOT NULL;
CREATE INDEX ix_jobs_hot_due ON jobs_hot (due_at) WHERE status = 0 AND scheduled_at IS NOT NULL;

-- Succeeded jobs.
CREATE TABLE jobs_archive (
    id                varchar(50)  NOT NULL,
    queue             varchar(255) NOT NULL,
    type              varchar(255) NOT NULL,
    payload           text,
    tags              varchar(1000),
    idempotency_key   varchar(255),
    priority          integer      NOT NULL DEFAULT 10,
    attempt_count     integer      NOT NULL DEFAULT 1,
    worker_id         varchar(100),
    created_at        timestamptz  NOT NULL,
    started_at        timestamptz,
    finished_at       timestamptz  NOT NULL,
    duration_ms       double precision,
    created_by        varchar(100),
    last_modified_by  varchar(100),
    failure_count     integer      NOT NULL DEFAULT 0,
    trace_context     text,
    CONSTRAINT pk_jobs_archive PRIMARY KEY (id)
);
CREATE INDEX ix_jobs_archive_finished ON jobs_archive (finished_at, id);
CREATE INDEX ix_jobs_archive_queue ON jobs_archive (queue, finished_at, id);
CREATE INDEX ix_jobs_archive_type ON jobs_archive (type, finished_at, id);

-- Failure history: one row per failed attempt (retried or dead-lettered), written in the transaction of
-- the failure; survives resurrects. Pruned by Retention.FailureHistory.
CREATE TABLE job_failures (
    seq             bigint       GENERATED ALWAYS AS IDENTITY,
    job_id          varchar(50)  NOT NULL,
    queue           varchar(255) NOT NULL,
    type            varchar(255) NOT NULL,
    attempt         integer      NOT NULL,
    outcome         varchar(5)   NOT NULL CHECK (outcome IN ('retry', 'dead')),
    failure_reason  smallint     NOT NULL,
    fingerprint     varchar(32),
    error_line      varchar(500),
    error_details   text,
    worker_id       varchar(100),
    failed_at       timestamptz  NOT NULL DEFAULT now(),
    CONSTRAINT pk_job_failures PRIMARY KEY (seq)
);
CREATE INDEX ix_job_failures_job ON job_failures (job_id, seq);
CREATE INDEX ix_job_failures_failed ON job_failures (failed_at, seq);

-- Dead-letter queue: jobs a human must judge.
CREATE TABLE jobs_dlq (
    id                varchar(50)  NOT NULL,
    queue             varchar(255) NOT NULL,
    type              varchar(255) NOT NULL,
    payload           text,
    tags              varchar(1000),
    idempotency_key   varchar(255),
    priority          integer      NOT NULL DEFAULT 10,
    failure_reason    smallint     NOT NULL,
    error_details     text,
    fingerprint       varchar(32),
    attempt_count     integer      NOT NULL DEFAULT 0,
    worker_id         varchar(100),
    heartbeat_at      timestamptz,
    created_at        timestamptz  NOT NULL,
    started_at        timestamptz,
    failed_at         timestamptz  NOT NULL,
    duration_ms       double precision,
    created_by        varchar(100),
    last_modified_by  varchar(100),
    trace_context     text,
    CONSTRAINT pk_jobs_dlq PRIMARY KEY (id),
    CONSTRAINT ck_jobs_dlq_reason CHECK (failure_reason BETWEEN 0 AND 10)
);
-- Each index ends with id so that pages are read from the index alone before the row fetch.
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
    hour            timestamptz  NOT NULL,
    queue           varchar(255) NOT NULL,
    failure_reason  smallint     NOT NULL,
    n               bigint       NOT NULL,
    CONSTRAINT pk_dlq_counts PRIMARY KEY (hour, queue, failure_reason)
);
CREATE FUNCTION dlq_counts_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Sorted upserts: concurrent moves lock count rows in one order and cannot deadlock on them.
    INSERT INTO dlq_counts (hour, queue, failure_reason, n)
    SELECT date_trunc('hour', failed_at, 'UTC'), queue, failure_reason, count(*) FROM new_rows
    GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (hour, queue, failure_reason) DO UPDATE SET n = dlq_counts.n + excluded.n;
    RETURN NULL;
END $$;
CREATE FUNCTION dlq_counts_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dlq_counts AS c (hour, queue, failure_reason, n)
    SELECT date_trunc('hour', failed_at, 'UTC'), queue, failure_reason, -count(*) FROM old_rows
    GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (hour, queue, failure_reason) DO UPDATE SET n = c.n + excluded.n;
    DELETE FROM dlq_counts c
    USING (SELECT DISTINCT date_trunc('hour', failed_at, 'UTC') AS hour, queue, failure_reason FROM old_rows) o
    WHERE c.n <= 0 AND c.hour = o.hour AND c.queue = o.queue AND c.failure_reason = o.failure_reason;
    RETURN NULL;
END $$;
CREATE FUNCTION dlq_counts_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Only a change of queue, reason or failure hour moves a count (edits of payload or tags do not).
    INSERT INTO dlq_counts AS c (hour, queue, failure_reason, n)
    SELECT hour, queue, failure_reason, sum(d) FROM (
        SELECT date_trunc('hour', o.failed_at, 'UTC') AS hour, o.queue, o.failure_reason, -1 AS d
        FROM old_rows o JOIN new_rows n ON n.id = o.id
        WHERE (n.queue, n.failure_reason, n.failed_at) IS DISTINCT FROM (o.queue, o.failure_reason, o.failed_at)
        UNION ALL
        SELECT date_trunc('hour', n.failed_at, 'UTC'), n.queue, n.failure_reason, 1
        FROM new_rows n JOIN old_rows o ON o.id = n.id
        WHERE (n.queue, n.failure_reason, n.failed_at) IS DISTINCT FROM (o.queue, o.failure_reason, o.failed_at)
    ) moved GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (hour, queue, failure_reason) DO UPDATE SET n = c.n + excluded.n;
    DELETE FROM dlq_counts c
    USING (SELECT DISTINCT date_trunc('hour', failed_at, 'UTC') AS hour, queue, failure_reason FROM old_rows) o
    WHERE c.n <= 0 AND c.hour = o.hour AND c.queue = o.queue AND c.failure_reason = o.failure_reason;
    RETURN NULL;
END $$;
CREATE FUNCTION dlq_counts_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM dlq_counts;
    RETURN NULL;
END $$;
CREATE TRIGGER tr_dlq_counts_insert AFTER INSERT ON jobs_dlq
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION dlq_counts_insert();
CREATE TRIGGER tr_dlq_counts_delete AFTER DELETE ON jobs_dlq
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION dlq_counts_delete();
CREATE TRIGGER tr_dlq_counts_update AFTER UPDATE ON jobs_dlq
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION dlq_counts_update();
CREATE TRIGGER tr_dlq_counts_truncate AFTER TRUNCATE ON jobs_dlq
    FOR EACH STATEMENT EXECUTE FUNCTION dlq_counts_truncate();

-- Names of the failure reasons stored as numbers in jobs_dlq and metric_buckets (for messages and for people
-- reading the database directly).
CREATE TABLE failure_reasons (
    code  smallint    NOT NULL,
    name  varchar(30) NOT NULL,
    CONSTRAINT pk_failure_reasons PRIMARY KEY (code)
);
INSERT INTO failure_reasons (code, name) VALUES (0, 'MaxRetriesExceeded'), (1, 'Cancelled'), (2, 'Zombie'),
    (3, 'CircuitBreakerOpen'), (4, 'Rejected'), (5, 'Throttled'), (6, 'Fatal'), (7, 'Timeout'), (8, 'Transient'),
    (9, 'HeartbeatFailure'), (10, 'RetryLifetimeExpired');

-- Control plane. A queue with no row is active, unpaused and unlimited.
CREATE TABLE queues (
    name                    varchar(255) NOT NULL,
    paused                  boolean      NOT NULL DEFAULT false,
    active                  boolean      NOT NULL DEFAULT true,
    zombie_timeout_seconds  integer,
    max_workers             integer,
    updated_at              timestamptz  NOT NULL DEFAULT now(),
    CONSTRAINT pk_queues PRIMARY KEY (name),
    CONSTRAINT ck_queues_zombie CHECK (zombie_timeout_seconds IS NULL OR zombie_timeout_seconds > 0),
    CONSTRAINT ck_queues_max_workers CHECK (max_workers IS NULL OR max_workers > 0)
);
INSERT INTO queues (name) VALUES ('default');

-- Per-queue counters: the totals of folded queue_counts deltas (below), which change in the same
-- transaction as the row moves they count.
CREATE TABLE stats_summary (
    queue             varchar(255) NOT NULL,
    enqueued_total    bigint       NOT NULL DEFAULT 0,
    succeeded_total   bigint       NOT NULL DEFAULT 0,
    failed_total      bigint       NOT NULL DEFAULT 0,
    retried_total     bigint       NOT NULL DEFAULT 0,
    last_activity_at  timestamptz,
    folded_xb         bigint       NOT NULL DEFAULT 0,  -- queue_counts buckets before this one are folded in
    pending           bigint       NOT NULL DEFAULT 0,  -- hot jobs per status, folded like the totals
    fetched           bigint       NOT NULL DEFAULT 0,
    processing        bigint       NOT NULL DEFAULT 0,
    CONSTRAINT pk_stats_summary PRIMARY KEY (queue)
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 200, autovacuum_vacuum_cost_delay = 0);
INSERT INTO stats_summary (queue) VALUES ('default');

-- Counter deltas (queries.sql, count_deltas): one row per queue and transaction (its id as bucket of
-- 1,024 ids and slot, the id % 1024), never written again once it ends; fold_counters adds finished
-- buckets into stats_summary. No row two transactions update (docs/endurance.md).
CREATE TABLE queue_counts (
    queue      varchar(255) NOT NULL,
    xb         bigint       NOT NULL,  -- transaction id >> 10
    slot       smallint     NOT NULL,  -- transaction id % 1024
    enqueued   bigint       NOT NULL DEFAULT 0,
    succeeded  bigint       NOT NULL DEFAULT 0,
    failed     bigint       NOT NULL DEFAULT 0,
    retried    bigint       NOT NULL DEFAULT 0,
    at         timestamptz  NOT NULL,
    pending    bigint       NOT NULL DEFAULT 0,  -- hot jobs per status (hot_status_counts)
    fetched    bigint       NOT NULL DEFAULT 0,
    processing bigint       NOT NULL DEFAULT 0,
    CONSTRAINT pk_queue_counts PRIMARY KEY (queue, xb, slot)
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000,
        autovacuum_vacuum_cost_delay = 0);

-- Workers waiting for work: enqueues NOTIFY only while one is marked (engine/wakeup.py).
CREATE TABLE idle_workers (
    worker_id  varchar(100) NOT NULL,
    seen_at    timestamptz  NOT NULL,
    CONSTRAINT pk_idle_workers PRIMARY KEY (worker_id)
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 200, autovacuum_vacuum_cost_delay = 0);
-- Enqueues ask for marks of the last minute only: through this index they never read older versions.
CREATE INDEX ix_idle_workers_seen ON idle_workers (seen_at);

-- One-second outcome counts, written with every terminal move; never rewritten by resurrect/purge.
CREATE TABLE metric_buckets (
    bucket_start       timestamptz      NOT NULL,
    queue              varchar(255)     NOT NULL,
    outcome            smallint         NOT NULL,
    failure_reason     smallint         NOT NULL,
    completed_count    bigint           NOT NULL DEFAULT 0,
    duration_count     bigint           NOT NULL DEFAULT 0,
    total_duration_ms  double precision NOT NULL DEFAULT 0,
    max_duration_ms    double precision,
    CONSTRAINT pk_metric_buckets PRIMARY KEY (bucket_start, queue, outcome, failure_reason),
    CONSTRAINT ck_metric_buckets_outcome CHECK (outcome IN (0, 1))
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000, autovacuum_vacuum_cost_delay = 0);

-- Who changed what. One row per job for job-level actions; one per batch for archive purges.
CREATE TABLE audit_log (
    id        bigint GENERATED ALWAYS AS IDENTITY,
    at        timestamptz  NOT NULL DEFAULT now(),
    actor     varchar(100) NOT NULL,
    action    varchar(50)  NOT NULL,
    job_id    varchar(50),
    plan_id   varchar(50),
    count     integer      NOT NULL DEFAULT 1,
    details   text,
    CONSTRAINT pk_audit_log PRIMARY KEY (id)
);
CREATE INDEX ix_audit_log_at ON audit_log (at);
CREATE INDEX ix_audit_log_job ON audit_log (job_id) WHERE job_id IS NOT NULL;
CREATE INDEX ix_audit_log_plan ON audit_log (plan_id) WHERE plan_id IS NOT NULL;
CREATE INDEX ix_audit_log_actor ON audit_log (actor, at);

-- Durable outbox behind the live event stream. `xid` lets readers wait for in-flight writers, so a
-- reader never skips an event whose id was taken by a transaction that commits later.
CREATE TABLE events (
    id       bigint GENERATED ALWAYS AS IDENTITY,
    at       timestamptz NOT NULL DEFAULT now(),
    kind     varchar(50) NOT NULL,
    message  text        NOT NULL,
    data     text,
    xid      xid8        NOT NULL DEFAULT pg_current_xact_id(),
    CONSTRAINT pk_events PRIMARY KEY (id)
);
CREATE INDEX ix_events_at ON events (at);

CREATE TABLE api_tokens (
    name          varchar(100) NOT NULL,
    role          varchar(20)  NOT NULL,
    token_hash    char(64)     NOT NULL,
    created_at    timestamptz  NOT NULL DEFAULT now(),
    created_by    varchar(100),
    revoked_at    timestamptz,
    last_used_at  timestamptz,
    CONSTRAINT pk_api_tokens PRIMARY KEY (name),
    CONSTRAINT ck_api_tokens_role CHECK (role IN ('reader', 'operator', 'admin'))
);
CREATE UNIQUE INDEX ux_api_tokens_hash ON api_tokens (token_hash);

-- Leases: one holder per name until expires_at (the rescue sweep, retention).
CREATE TABLE leases (
    name        varchar(100) NOT NULL,
    holder      varchar(100) NOT NULL,
    expires_at  timestamptz  NOT NULL,
    CONSTRAINT pk_leases PRIMARY KEY (name)
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 100, autovacuum_vacuum_cost_delay = 0);

-- Where each phase of the rescue sweep starts its next index scan (engine/rescue.py, docs/endurance.md).
CREATE TABLE sweep_marks (
    phase  varchar(30)  NOT NULL,
    at     timestamptz  NOT NULL,
    CONSTRAINT pk_sweep_marks PRIMARY KEY (phase)
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 100, autovacuum_vacuum_cost_delay = 0);

-- Bulk-decision plans (chokaq_ops.storage.plan_ops): the frozen set of jobs a resurrect / purge / cancel
-- acts on, and how far its execution got. A chunk's items are marked done in the same transaction as the
-- move, so an interrupted plan resumes where it stopped and never touches a job twice.
CREATE TABLE plans (
    id           varchar(50)  NOT NULL,
    action       varchar(20)  NOT NULL,
    actor        varchar(100) NOT NULL,
    state        varchar(20)  NOT NULL DEFAULT 'ready',
    created_at   timestamptz  NOT NULL DEFAULT now(),
    updated_at   timestamptz  NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    chunk_size   integer      NOT NULL,
    total        integer      NOT NULL DEFAULT 0,
    chunks       integer      NOT NULL DEFAULT 0,
    chunks_done  integer      NOT NULL DEFAULT 0,
    done         integer      NOT NULL DEFAULT 0,
    skipped      integer      NOT NULL DEFAULT 0,
    details      text,
    approved_by  varchar(100),  -- four-eyes approval (0003): a token name other than actor
    approved_at  timestamptz,
    label        varchar(200),  -- the CLI's --label: a re-run resumes the unfinished plan with it
    rate         double precision,  -- 0008: the plan's pace in jobs/s, shared by every process working it
    not_before   timestamptz,       -- the earliest start of the next chunk under that pace
    lease_holder varchar(200),      -- the run working the plan (one at a time) ...
    lease_until  timestamptz,       -- ... until then, renewed by each chunk it runs
    CONSTRAINT pk_plans PRIMARY KEY (id),
    CONSTRAINT ck_plans_action CHECK (action IN ('resurrect', 'purge', 'cancel')),
    CONSTRAINT ck_plans_state CHECK (state IN ('ready', 'running', 'done', 'discarded'))
);
CREATE INDEX ix_plans_label ON plans (label, action, created_at) WHERE label IS NOT NULL;
CREATE UNIQUE INDEX ux_plans_open_label ON plans (label, action)
    WHERE label IS NOT NULL AND state IN ('ready', 'running');
CREATE INDEX ix_plans_created ON plans (created_at, id);

-- One row per job of a plan. `outcome`: done (acted on) or skipped (no longer where the plan found it).
CREATE TABLE plan_items (
    plan_id   varchar(50)   NOT NULL,
    job_id    varchar(50)   NOT NULL,
    chunk     integer       NOT NULL,
    ord       integer       NOT NULL,
    payload   text,
    tags      varchar(1000),
    priority  integer,
    done_at   timestamptz,
    outcome   varchar(10),
    CONSTRAINT pk_plan_items PRIMARY KEY (plan_id, job_id),
    CONSTRAINT ck_plan_items_outcome CHECK (outcome IS NULL OR outcome IN ('done', 'skipped'))
);
-- The next chunk to run: only unfinished items are indexed, so a resumed 1M-item plan finds it at once.
CREATE INDEX ix_plan_items_pending ON plan_items (plan_id, chunk) WHERE done_at IS NULL;
CREATE INDEX ix_plan_items_order ON plan_items (plan_id, ord);

-- Plans being frozen (0008): from the first batch of items to the plan's creation, beaten every batch; the
-- items of a freeze whose process died are reclaimed (chokaq plans ls --orphans).
CREATE TABLE plan_freezes (
    plan_id     varchar(50)  NOT NULL,
    actor       varchar(100) NOT NULL,
    state       varchar(10)  NOT NULL DEFAULT 'freezing',
    started_at  timestamptz  NOT NULL DEFAULT now(),
    beat_at     timestamptz  NOT NULL DEFAULT now(),
    CONSTRAINT pk_plan_freezes PRIMARY KEY (plan_id),
    CONSTRAINT ck_plan_freezes_state CHECK (state IN ('freezing', 'reclaiming'))
);

-- Trigram indexes behind DLQ `search` when pg_trgm is available (see migrations/0004_dlq_search_trigram.sql).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm')
       AND EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
        BEGIN
            CREATE EXTENSION pg_trgm;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE NOTICE 'pg_trgm could not be created here; DLQ search stays a scan';
        END;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        CREATE INDEX IF NOT EXISTS ix_jobs_dlq_search_id ON jobs_dlq USING gin (lower(id) gin_trgm_ops);
        CREATE INDEX IF NOT EXISTS ix_jobs_dlq_search_type ON jobs_dlq USING gin (lower(type) gin_trgm_ops);
        CREATE INDEX IF NOT EXISTS ix_jobs_dlq_search_tags ON jobs_dlq USING gin (lower(tags) gin_trgm_ops);
        CREATE INDEX IF NOT EXISTS ix_jobs_dlq_search_error ON jobs_dlq USING gin (lower(error_details) gin_trgm_ops);
    END IF;
END
$$;

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
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 200, autovacuum_vacuum_cost_delay = 0);
CREATE INDEX ix_workers_seen ON workers (last_seen_at);

-- What workers declared per job type when they started (@job(idempotent=True)): --idempotent-only.
CREATE TABLE job_types (
    type        varchar(255) NOT NULL PRIMARY KEY,
    idempotent  boolean NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Alerts (docs/alerts.md): receivers and rules made over the API or the CLI, and the rule loop's state.
CREATE TABLE alert_receivers (
    name           varchar(100) NOT NULL,
    kind           varchar(20)  NOT NULL,
    url            text         NOT NULL,
    secret         text,
    send_resolved  boolean      NOT NULL DEFAULT true,
    timeout_s      double precision NOT NULL DEFAULT 10,
    max_alerts     integer      NOT NULL DEFAULT 0,
    created_at     timestamptz  NOT NULL DEFAULT now(),
    created_by     varchar(100),
    updated_at     timestamptz  NOT NULL DEFAULT now(),
    updated_by     varchar(100),
    CONSTRAINT pk_alert_receivers PRIMARY KEY (name),
    CONSTRAINT ck_alert_receivers_kind CHECK (kind IN ('webhook', 'slack'))
);
CREATE TABLE alert_rules (
    name               varchar(100) NOT NULL,
    kind               varchar(30)  NOT NULL,
    receivers          text         NOT NULL,
    severity           varchar(20)  NOT NULL DEFAULT 'warning',
    threshold          double precision,
    window_s           double precision,
    for_s              double precision NOT NULL DEFAULT 0,
    repeat_interval_s  double precision,
    group_by           text,
    queues             text,
    by_label           varchar(20),
    inhibited_by       text,
    inhibit_equal      text,
    enabled            boolean      NOT NULL DEFAULT true,
    created_at         timestamptz  NOT NULL DEFAULT now(),
    created_by         varchar(100),
    updated_at         timestamptz  NOT NULL DEFAULT now(),
    updated_by         varchar(100),
    CONSTRAINT pk_alert_rules PRIMARY KEY (name)
);
-- One row per active (pending or firing) alert, and per resolved one until its resolve is sent.
CREATE TABLE alert_state (
    rule           varchar(100) NOT NULL,
    alert_key      varchar(40)  NOT NULL,
    labels         text         NOT NULL,
    annotations    text         NOT NULL,
    value          double precision,
    status         varchar(10)  NOT NULL,
    active_at   timestamptz  NOT NULL,
    firing_at   timestamptz,
    resolved_at    timestamptz,
    updated_at     timestamptz  NOT NULL DEFAULT now(),
    CONSTRAINT pk_alert_state PRIMARY KEY (rule, alert_key),
    CONSTRAINT ck_alert_state_status CHECK (status IN ('pending', 'firing', 'resolved'))
);
-- One row per notification group (receiver, rule, values of the rule's group_by labels).
CREATE TABLE alert_groups (
    receiver       varchar(100) NOT NULL,
    group_key      varchar(40)  NOT NULL,
    rule           varchar(100) NOT NULL,
    group_labels   text         NOT NULL,
    sent_keys      text         NOT NULL DEFAULT '[]',
    seq            integer      NOT NULL DEFAULT 0,
    created_at     timestamptz  NOT NULL,
    last_sent_at   timestamptz,
    CONSTRAINT pk_alert_groups PRIMARY KEY (receiver, group_key)
);
-- Recurring schedules and their tick ledger (docs/schedules.md; migration 0014).
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
