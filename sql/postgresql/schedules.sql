-- Named queries of recurring schedules for PostgreSQL (chokaq_ops/storage/schedule_ops.py,
-- docs/schedules.md). Loaded with queries.sql into every store; format: chokaq_ops/storage/queries.py.
-- A tick's job is enqueued by queries.sql's `enqueue` inside the transaction that inserts the tick's row
-- into the ledger (schedule_runs) and advances the schedule's next_run_at (compare-and-set).

-- ---------------------------------------------------------------- fragments

-- fragment: schedule_row
-- A schedule's columns and where its newest job is now (hot with its status, archive, DLQ with its
-- reason, or gone: purged by retention), for the views; `s` is the schedule.
s.name, s.type, s.cron, s.tz, s.payload, s.queue, s.priority, s.tags, s.misfire, s.catch_up_max,
s.misfire_grace_seconds, s.paused, s.source, s.next_run_at, s.last_tick_at, s.last_run_at, s.last_job_id,
s.runs_total, s.missed_total, s.created_at, s.created_by, s.updated_at, s.updated_by,
CASE WHEN s.last_job_id IS NULL THEN NULL
     WHEN h.id IS NOT NULL THEN (CASE h.status WHEN 0 THEN 'pending' WHEN 1 THEN 'fetched' ELSE 'processing' END)
     WHEN a.id IS NOT NULL THEN 'succeeded'
     WHEN d.id IS NOT NULL THEN 'dead'
     ELSE 'gone' END AS last_outcome,
d.failure_reason AS last_failure_reason

-- fragment: schedule_joins
LEFT JOIN jobs_hot h ON h.id = s.last_job_id
LEFT JOIN jobs_archive a ON h.id IS NULL AND a.id = s.last_job_id
LEFT JOIN jobs_dlq d ON h.id IS NULL AND a.id IS NULL AND d.id = s.last_job_id

-- fragment: schedule_filter
(CAST(:type AS text) IS NULL OR s.type = CAST(:type AS text))
AND (CAST(:paused AS boolean) IS NULL OR s.paused = CAST(:paused AS boolean))
AND (CAST(:source AS text) IS NULL OR s.source = CAST(:source AS text))

-- ---------------------------------------------------------------- reads

-- name: schedule_get
SELECT {{schedule_row}} FROM schedules s {{schedule_joins}} WHERE s.name = CAST(:name AS text);

-- name: schedule_list
SELECT {{schedule_row}} FROM schedules s {{schedule_joins}}
WHERE {{schedule_filter}}
ORDER BY s.name LIMIT CAST(:limit AS integer) OFFSET CAST(:offset AS integer);

-- name: schedule_count
SELECT count(*) AS n FROM schedules s WHERE {{schedule_filter}};

-- name: schedule_runs
-- A schedule's ledger, newest tick first, each run with where its job is now.
SELECT r.schedule, r.tick_at, r.kind, r.late, r.job_id, r.fired_at, r.fired_by,
       CASE WHEN r.job_id IS NULL THEN NULL
            WHEN h.id IS NOT NULL THEN (CASE h.status WHEN 0 THEN 'pending' WHEN 1 THEN 'fetched' ELSE 'processing' END)
            WHEN a.id IS NOT NULL THEN 'succeeded'
            WHEN d.id IS NOT NULL THEN 'dead'
            ELSE 'gone' END AS outcome,
       d.failure_reason
FROM schedule_runs r
LEFT JOIN jobs_hot h ON h.id = r.job_id
LEFT JOIN jobs_archive a ON h.id IS NULL AND a.id = r.job_id
LEFT JOIN jobs_dlq d ON h.id IS NULL AND a.id IS NULL AND d.id = r.job_id
WHERE r.schedule = CAST(:name AS text)
ORDER BY r.tick_at DESC, r.kind LIMIT CAST(:limit AS integer) OFFSET CAST(:offset AS integer);

-- name: schedule_runs_count
SELECT count(*) AS n FROM schedule_runs WHERE schedule = CAST(:name AS text);

-- name: schedules_due
-- The schedules whose next tick is due on the database clock, oldest first, with that clock's now.
SELECT s.name, s.cron, s.tz, s.next_run_at, s.misfire, s.catch_up_max, s.misfire_grace_seconds,
       now() AS now_at
FROM schedules s
WHERE NOT s.paused AND s.next_run_at IS NOT NULL AND s.next_run_at <= now()
ORDER BY s.next_run_at LIMIT CAST(:limit AS integer);

-- ---------------------------------------------------------------- definition changes (audited by the caller)

-- name: schedule_lock
-- The stored row, locked until the transaction ends (changes compare with it and audit before/after).
SELECT s.name, s.type, s.cron, s.tz, s.payload, s.queue, s.priority, s.tags, s.misfire, s.catch_up_max,
       s.misfire_grace_seconds, s.paused, s.source, s.next_run_at, now() AS now_at
FROM schedules s WHERE s.name = CAST(:name AS text) FOR UPDATE;

-- name: schedule_insert
-- A new schedule; no row back when the name is taken.
INSERT INTO schedules (name, type, cron, tz, payload, queue, priority, tags, misfire, catch_up_max,
                       misfire_grace_seconds, paused, source, next_run_at, created_by, updated_by)
VALUES (CAST(:name AS text), CAST(:type AS text), CAST(:cron AS text), CAST(:tz AS text), CAST(:payload AS text),
        CAST(:queue AS text), CAST(:priority AS integer), CAST(:tags AS text), CAST(:misfire AS text),
        CAST(:catch_up_max AS integer), CAST(:misfire_grace_seconds AS double precision),
        CAST(:paused AS boolean), CAST(:source AS text), CAST(:next_run_at AS timestamptz),
        CAST(:actor AS text), CAST(:actor AS text))
ON CONFLICT (name) DO NOTHING
RETURNING name;

-- name: schedule_update
-- Replace a locked schedule's definition (and where its ticks start again).
UPDATE schedules SET type = CAST(:type AS text), cron = CAST(:cron AS text), tz = CAST(:tz AS text),
       payload = CAST(:payload AS text), queue = CAST(:queue AS text), priority = CAST(:priority AS integer),
       tags = CAST(:tags AS text), misfire = CAST(:misfire AS text), catch_up_max = CAST(:catch_up_max AS integer),
       misfire_grace_seconds = CAST(:misfire_grace_seconds AS double precision), paused = CAST(:paused AS boolean),
       source = CAST(:source AS text), next_run_at = CAST(:next_run_at AS timestamptz), updated_at = now(),
       updated_by = CAST(:actor AS text)
WHERE name = CAST(:name AS text);

-- name: schedule_delete
DELETE FROM schedules WHERE name = CAST(:name AS text) RETURNING name;

-- name: schedule_runs_delete
-- One batch of a deleted schedule's ledger (run_batches; bounded transactions).
WITH victims AS (
    SELECT ctid FROM schedule_runs WHERE schedule = CAST(:name AS text)
    LIMIT CAST(:batch AS integer) FOR UPDATE SKIP LOCKED
),
gone AS (DELETE FROM schedule_runs r WHERE r.ctid = ANY (ARRAY(SELECT ctid FROM victims)) RETURNING 1)
SELECT count(*) AS n FROM gone;

-- ---------------------------------------------------------------- firing

-- name: schedule_advance
-- Claim the ticks from :expected on: moves next_run_at only if no other process (or operator) moved it
-- since it was read, and the schedule is not paused. The row lock it takes orders processes that race
-- for the same tick: the later one finds next_run_at moved and advances nothing. Returns the definition
-- the ticks' jobs are made of.
UPDATE schedules SET next_run_at = CAST(:next_run_at AS timestamptz),
       missed_total = missed_total + CAST(:missed AS integer)
WHERE name = CAST(:name AS text) AND NOT paused AND next_run_at = CAST(:expected AS timestamptz)
RETURNING name, type, payload, queue, priority, tags;

-- name: schedule_ledger_insert
-- The ledger rows of ticks about to run (:items: [{tick_at, late}]); a tick already in the ledger
-- comes back nowhere and gets no job.
INSERT INTO schedule_runs (schedule, tick_at, kind, late, fired_by)
SELECT CAST(:name AS text), i.tick_at, CAST(:kind AS text), i.late, CAST(:fired_by AS text)
FROM jsonb_to_recordset(CAST(:items AS jsonb)) AS i(tick_at timestamptz, late boolean)
ORDER BY i.tick_at
ON CONFLICT (schedule, tick_at, kind) DO NOTHING
RETURNING tick_at, late;

-- name: schedule_ledger_jobs
-- Each inserted tick's job id (:items: [{tick_at, job_id}]).
UPDATE schedule_runs r SET job_id = i.job_id
FROM jsonb_to_recordset(CAST(:items AS jsonb)) AS i(tick_at timestamptz, job_id text)
WHERE r.schedule = CAST(:name AS text) AND r.kind = CAST(:kind AS text) AND r.tick_at = i.tick_at;

-- name: schedule_fired
-- The schedule's newest run, after its ticks' (or a trigger's) jobs were enqueued; :tick_at is the
-- newest cron tick among them (null for a trigger, which leaves last_tick_at alone).
UPDATE schedules SET last_run_at = now(), last_job_id = CAST(:job_id AS text),
       last_tick_at = greatest(last_tick_at, CAST(:tick_at AS timestamptz)),
       runs_total = runs_total + CAST(:runs AS integer)
WHERE name = CAST(:name AS text);

-- name: schedule_now
SELECT now() AS now_at;

-- ---------------------------------------------------------------- retention

-- name: prune_schedule_runs
-- One batch: the :batch oldest ledger rows fired before :older_than_s, from :after_at on. A pruned tick
-- cannot run again anyway: next_run_at only moves forward past it.
WITH victims AS (
    SELECT ctid FROM schedule_runs
    WHERE fired_at < now() - make_interval(secs => CAST(:older_than_s AS double precision))
      AND fired_at >= coalesce(CAST(:after_at AS timestamptz), '-infinity')
    ORDER BY fired_at LIMIT CAST(:batch AS integer) FOR UPDATE SKIP LOCKED
),
gone AS (DELETE FROM schedule_runs r WHERE r.ctid = ANY (ARRAY(SELECT ctid FROM victims)) RETURNING r.fired_at)
SELECT count(*) AS n, max(fired_at) AS last_at FROM gone;
