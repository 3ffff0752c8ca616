-- Named queries of recurring schedules for SQLite (chokaq_ops/storage/schedule_ops.py,
-- docs/schedules.md). Loaded with queries.sql into every store; format: chokaq_ops/storage/queries.py.
-- A tick's job is enqueued by queries.sql's `enqueue` inside the transaction that inserts the tick's row
-- into the ledger (schedule_runs) and advances the schedule's next_run_at (compare-and-set); writers run
-- in BEGIN IMMEDIATE, one at a time. Times are UTC text 'YYYY-MM-DD HH:MM:SS.fff'.

-- ---------------------------------------------------------------- fragments

-- fragment: now
strftime('%Y-%m-%d %H:%M:%f', 'now')

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
(:type IS NULL OR s.type = :type)
AND (:paused IS NULL OR s.paused = :paused)
AND (:source IS NULL OR s.source = :source)

-- ---------------------------------------------------------------- reads

-- name: schedule_get
SELECT {{schedule_row}} FROM schedules s {{schedule_joins}} WHERE s.name = :name;

-- name: schedule_list
SELECT {{schedule_row}} FROM schedules s {{schedule_joins}}
WHERE {{schedule_filter}}
ORDER BY s.name LIMIT :limit OFFSET :offset;

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
WHERE r.schedule = :name
ORDER BY r.tick_at DESC, r.kind LIMIT :limit OFFSET :offset;

-- name: schedule_runs_count
SELECT count(*) AS n FROM schedule_runs WHERE schedule = :name;

-- name: schedules_due
-- The schedules whose next tick is due on the database clock, oldest first, with that clock's now.
SELECT s.name, s.cron, s.tz, s.next_run_at, s.misfire, s.catch_up_max, s.misfire_grace_seconds,
       {{now}} AS now_at
FROM schedules s INDEXED BY ix_schedules_due
WHERE s.paused = 0 AND s.next_run_at IS NOT NULL AND s.next_run_at <= {{now}}
ORDER BY s.next_run_at LIMIT :limit;

-- ---------------------------------------------------------------- definition changes (audited by the caller)

-- name: schedule_lock
-- The stored row (the transaction holds SQLite's one write lock: changes compare with it and audit
-- before/after).
SELECT s.name, s.type, s.cron, s.tz, s.payload, s.queue, s.priority, s.tags, s.misfire, s.catch_up_max,
       s.misfire_grace_seconds, s.paused, s.source, s.next_run_at, {{now}} AS now_at
FROM schedules s WHERE s.name = :name;

-- name: schedule_insert
-- A new schedule; no row back when the name is taken.
INSERT INTO schedules (name, type, cron, tz, payload, queue, priority, tags, misfire, catch_up_max,
                       misfire_grace_seconds, paused, source, next_run_at, created_by, updated_by)
VALUES (:name, :type, :cron, :tz, :payload, :queue, :priority, :tags, :misfire, :catch_up_max,
        :misfire_grace_seconds, :paused, :source, :next_run_at, :actor, :actor)
ON CONFLICT (name) DO NOTHING
RETURNING name;

-- name: schedule_update
-- Replace a locked schedule's definition (and where its ticks start again).
UPDATE schedules SET type = :type, cron = :cron, tz = :tz, payload = :payload, queue = :queue,
       priority = :priority, tags = :tags, misfire = :misfire, catch_up_max = :catch_up_max,
       misfire_grace_seconds = :misfire_grace_seconds, paused = :paused, source = :source,
       next_run_at = :next_run_at, updated_at = {{now}}, updated_by = :actor
WHERE name = :name;

-- name: schedule_delete
DELETE FROM schedules WHERE name = :name RETURNING name;

-- name: schedule_runs_delete
-- One batch of a deleted schedule's ledger (run_batches; bounded transactions).
DELETE FROM schedule_runs WHERE rowid IN (
    SELECT rowid FROM schedule_runs WHERE schedule = :name LIMIT :batch
);
SELECT changes() AS n;

-- ---------------------------------------------------------------- firing

-- name: schedule_advance
-- Claim the ticks from :expected on: moves next_run_at only if no other process (or operator) moved it
-- since it was read, and the schedule is not paused (the write lock orders racing processes: the later
-- one finds next_run_at moved and advances nothing). Returns the definition the ticks' jobs are made of.
UPDATE schedules SET next_run_at = :next_run_at, missed_total = missed_total + :missed
WHERE name = :name AND paused = 0 AND next_run_at = :expected
RETURNING name, type, payload, queue, priority, tags;

-- name: schedule_ledger_insert
-- The ledger rows of ticks about to run (:items: [{tick_at, late}]); a tick already in the ledger
-- comes back nowhere and gets no job.
INSERT INTO schedule_runs (schedule, tick_at, kind, late, fired_by)
SELECT :name, json_extract(i.value, '$.tick_at'), :kind, json_extract(i.value, '$.late'), :fired_by
FROM json_each(:items) i
WHERE true
ORDER BY json_extract(i.value, '$.tick_at')
ON CONFLICT (schedule, tick_at, kind) DO NOTHING
RETURNING tick_at, late;

-- name: schedule_ledger_jobs
-- Each inserted tick's job id (:items: [{tick_at, job_id}]).
UPDATE schedule_runs SET job_id = (
    SELECT json_extract(i.value, '$.job_id') FROM json_each(:items) i
    WHERE json_extract(i.value, '$.tick_at') = schedule_runs.tick_at
)
WHERE schedule = :name AND kind = :kind
  AND tick_at IN (SELECT json_extract(i.value, '$.tick_at') FROM json_each(:items) i);

-- name: schedule_fired
-- The schedule's newest run, after its ticks' (or a trigger's) jobs were enqueued; :tick_at is the
-- newest cron tick among them (null for a trigger, which leaves last_tick_at alone).
UPDATE schedules SET last_run_at = {{now}}, last_job_id = :job_id,
       last_tick_at = CASE WHEN :tick_at IS NULL THEN last_tick_at
                           WHEN last_tick_at IS NULL OR :tick_at > last_tick_at THEN :tick_at
                           ELSE last_tick_at END,
       runs_total = runs_total + :runs
WHERE name = :name;

-- name: schedule_now
SELECT {{now}} AS now_at;

-- ---------------------------------------------------------------- retention

-- name: prune_schedule_runs
-- One batch: the :batch oldest ledger rows fired before :older_than_s, through ix_schedule_runs_fired. A
-- pruned tick cannot run again anyway: next_run_at only moves forward past it.
DELETE FROM schedule_runs WHERE rowid IN (
    SELECT rowid FROM schedule_runs
    WHERE fired_at < strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || :older_than_s || ' seconds')
    ORDER BY fired_at LIMIT :batch);
SELECT changes() AS n, NULL AS last_at;
