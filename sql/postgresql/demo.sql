-- `chokaq demo` on PostgreSQL (loaded by name: queries.load(dialect, "demo")). Never used by the Store.
-- The demo runs for seconds; these queries move its finished jobs into a longer history so trend charts
-- have hours and days to show. Each job moves as a whole (all its times by one offset), so durations,
-- heartbeat ages and retries keep their real values. Rows: created_by 'chokaq-demo'.

-- name: demo_ends
-- When each finished demo job ended (epoch seconds), and the worker that held a dead one.
SELECT id, extract(epoch FROM finished_at) AS end_s, CAST(NULL AS text) AS worker_id
FROM jobs_archive WHERE created_by = 'chokaq-demo'
UNION ALL
SELECT id, extract(epoch FROM failed_at), worker_id FROM jobs_dlq WHERE created_by = 'chokaq-demo';

-- name: demo_shift
-- Moves each job of :shifts (a JSON object {id: seconds}) by its offset. A zombie's error message quotes
-- its last heartbeat: that time moves with the column, so the two keep saying the same.
CREATE TEMP TABLE demo_moves ON COMMIT DROP AS
SELECT key AS id, make_interval(secs => CAST(value AS double precision)) AS d
FROM json_each_text(CAST(:shifts AS json));
UPDATE jobs_archive a
SET created_at = a.created_at + m.d, started_at = a.started_at + m.d, finished_at = a.finished_at + m.d
FROM demo_moves m WHERE a.id = m.id;
UPDATE jobs_dlq q
SET created_at = q.created_at + m.d, started_at = q.started_at + m.d, heartbeat_at = q.heartbeat_at + m.d,
    failed_at = q.failed_at + m.d,
    error_details = CASE WHEN q.failure_reason = 2 AND q.heartbeat_at IS NOT NULL THEN replace(
        q.error_details,
        'last heartbeat ' || to_char(q.heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        'last heartbeat ' || to_char((q.heartbeat_at + m.d) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
    ) ELSE q.error_details END
FROM demo_moves m WHERE q.id = m.id;
-- A job's failure history moves with it: its failed attempts stay before its end, as they happened.
UPDATE job_failures f SET failed_at = f.failed_at + m.d FROM demo_moves m WHERE f.job_id = m.id;
-- The operator's cancellations happened when their jobs entered the DLQ.
UPDATE audit_log l SET at = q.failed_at FROM jobs_dlq q WHERE l.actor = 'chokaq-demo' AND l.job_id = q.id;

-- name: demo_sources
-- The finished demo jobs a larger demo copies (not the dead workers' zombies, not the operator's
-- cancellations: those are single events of the story), with when each ended (epoch seconds).
SELECT id, extract(epoch FROM finished_at) AS end_s FROM jobs_archive
WHERE created_by = 'chokaq-demo' AND id NOT LIKE '%.c%'
UNION ALL
SELECT id, extract(epoch FROM failed_at) FROM jobs_dlq
WHERE created_by = 'chokaq-demo' AND failure_reason NOT IN (1, 2) AND id NOT LIKE '%.c%'
ORDER BY 1;

-- name: demo_copy
-- One batch of copies (:copies, JSON [{"src", "id", "s"}]): each a finished demo job again under a new
-- id, every time (its failure history's too) moved by s seconds, so a copy is its original at another
-- moment of the story; the queue counters count them as the workers counted the originals.
CREATE TEMP TABLE demo_copies ON COMMIT DROP AS
SELECT src, id, make_interval(secs => s) AS d
FROM json_to_recordset(CAST(:copies AS json)) AS c(src text, id text, s double precision);
INSERT INTO jobs_archive (id, queue, type, payload, tags, idempotency_key, priority, attempt_count, worker_id,
                          created_at, started_at, finished_at, duration_ms, created_by, last_modified_by,
                          failure_count)
SELECT c.id, a.queue, a.type, a.payload, a.tags, NULL, a.priority, a.attempt_count, a.worker_id,
       a.created_at + c.d, a.started_at + c.d, a.finished_at + c.d, a.duration_ms, a.created_by,
       a.last_modified_by, a.failure_count
FROM demo_copies c JOIN jobs_archive a ON a.id = c.src;
INSERT INTO jobs_dlq (id, queue, type, payload, tags, idempotency_key, priority, failure_reason, error_details,
                      fingerprint, attempt_count, worker_id, heartbeat_at, created_at, started_at, failed_at,
                      duration_ms, created_by, last_modified_by)
SELECT c.id, d.queue, d.type, d.payload, d.tags, NULL, d.priority, d.failure_reason, d.error_details,
       d.fingerprint, d.attempt_count, d.worker_id, d.heartbeat_at + c.d, d.created_at + c.d,
       d.started_at + c.d, d.failed_at + c.d, d.duration_ms, d.created_by, d.last_modified_by
FROM demo_copies c JOIN jobs_dlq d ON d.id = c.src;
INSERT INTO job_failures (job_id, queue, type, attempt, outcome, failure_reason, fingerprint, error_line,
                          error_details, worker_id, failed_at)
SELECT c.id, f.queue, f.type, f.attempt, f.outcome, f.failure_reason, f.fingerprint, f.error_line,
       f.error_details, f.worker_id, f.failed_at + c.d
FROM demo_copies c JOIN job_failures f ON f.job_id = c.src ORDER BY c.id, f.seq;
INSERT INTO stats_summary (queue, enqueued_total, succeeded_total, failed_total, retried_total)
SELECT queue, count(*), sum(ok), sum(1 - ok), sum(retried) FROM (
    SELECT a.queue, 1 AS ok, a.failure_count AS retried FROM demo_copies c JOIN jobs_archive a ON a.id = c.src
    UNION ALL
    SELECT d.queue, 0, 0 FROM demo_copies c JOIN jobs_dlq d ON d.id = c.src
) x GROUP BY queue
ON CONFLICT (queue) DO UPDATE SET enqueued_total = stats_summary.enqueued_total + excluded.enqueued_total,
                                  succeeded_total = stats_summary.succeeded_total + excluded.succeeded_total,
                                  failed_total = stats_summary.failed_total + excluded.failed_total,
                                  retried_total = stats_summary.retried_total + excluded.retried_total;

-- name: demo_outcomes
-- What the demo made, for its closing summary.
SELECT 'archive' AS location, NULL AS failure_reason, count(*) AS n FROM jobs_archive WHERE created_by = 'chokaq-demo'
UNION ALL
SELECT 'dlq', failure_reason, count(*) FROM jobs_dlq WHERE created_by = 'chokaq-demo' GROUP BY failure_reason
UNION ALL
SELECT 'hot', NULL, count(*) FROM jobs_hot WHERE created_by = 'chokaq-demo';

-- name: demo_busy
-- Demo jobs a worker could still run, or that are running: in hot and due within a minute (a retry's
-- backoff, or a circuit breaker's short delay, is part of the story; a far-future schedule is not).
SELECT count(*) AS n FROM jobs_hot WHERE created_by = 'chokaq-demo' AND due_at <= now() + interval '1 minute';

-- name: demo_running
SELECT count(*) AS n FROM jobs_hot WHERE status = 2 AND worker_id = CAST(:worker_id AS text);
