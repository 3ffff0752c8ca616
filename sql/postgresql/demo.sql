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
-- The operator's cancellations happened when their jobs entered the DLQ.
UPDATE audit_log l SET at = q.failed_at FROM jobs_dlq q WHERE l.actor = 'chokaq-demo' AND l.job_id = q.id;

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
