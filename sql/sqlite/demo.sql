-- `chokaq demo` on SQLite (loaded by name: queries.load(dialect, "demo")). Never used by the Store.
-- The demo runs for seconds; these queries move its finished jobs into a longer history so trend charts
-- have hours and days to show. Each job moves as a whole (all its times by one offset), so durations,
-- heartbeat ages and retries keep their real values. Rows: created_by 'chokaq-demo'.

-- name: demo_ends
-- When each finished demo job ended (epoch seconds), and the worker that held a dead one.
SELECT id, (julianday(finished_at) - 2440587.5) * 86400.0 AS end_s, NULL AS worker_id
FROM jobs_archive WHERE created_by = 'chokaq-demo'
UNION ALL
SELECT id, (julianday(failed_at) - 2440587.5) * 86400.0, worker_id FROM jobs_dlq WHERE created_by = 'chokaq-demo';

-- name: demo_shift
-- Moves each job of :shifts (a JSON object {id: seconds}) by its offset. A zombie's error message quotes
-- its last heartbeat: that time moves with the column, so the two keep saying the same.
DROP TABLE IF EXISTS temp.demo_moves;
CREATE TEMP TABLE demo_moves AS SELECT key AS id, value / 86400.0 AS days FROM json_each(:shifts);
UPDATE jobs_archive SET
    created_at = strftime('%Y-%m-%d %H:%M:%f', julianday(created_at) + m.days),
    started_at = strftime('%Y-%m-%d %H:%M:%f', julianday(started_at) + m.days),
    finished_at = strftime('%Y-%m-%d %H:%M:%f', julianday(finished_at) + m.days)
FROM demo_moves m WHERE jobs_archive.id = m.id;
UPDATE jobs_dlq SET
    created_at = strftime('%Y-%m-%d %H:%M:%f', julianday(created_at) + m.days),
    started_at = strftime('%Y-%m-%d %H:%M:%f', julianday(started_at) + m.days),
    heartbeat_at = strftime('%Y-%m-%d %H:%M:%f', julianday(heartbeat_at) + m.days),
    failed_at = strftime('%Y-%m-%d %H:%M:%f', julianday(failed_at) + m.days),
    error_details = CASE WHEN failure_reason = 2 AND heartbeat_at IS NOT NULL THEN replace(
        error_details,
        'last heartbeat ' || replace(heartbeat_at, ' ', 'T') || 'Z',
        'last heartbeat ' || replace(strftime('%Y-%m-%d %H:%M:%f', julianday(heartbeat_at) + m.days), ' ', 'T') || 'Z'
    ) ELSE error_details END
FROM demo_moves m WHERE jobs_dlq.id = m.id;
-- The operator's cancellations happened when their jobs entered the DLQ.
UPDATE audit_log SET at = (SELECT q.failed_at FROM jobs_dlq q WHERE q.id = audit_log.job_id)
WHERE actor = 'chokaq-demo' AND job_id IN (SELECT id FROM jobs_dlq);
DROP TABLE temp.demo_moves;

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
SELECT count(*) AS n FROM jobs_hot
WHERE created_by = 'chokaq-demo' AND due_at <= strftime('%Y-%m-%d %H:%M:%f', 'now', '+60 seconds');

-- name: demo_running
SELECT count(*) AS n FROM jobs_hot WHERE status = 2 AND worker_id = :worker_id;
