-- `chokaq demo` on SQLite (loaded by name: queries.load(dialect, "demo")). Never used by the Store.
-- The demo runs for seconds; these queries spread its finished jobs over a longer history so trend charts
-- have hours and days to show. Each job moves as a whole (all its times by one offset), so durations,
-- heartbeat ages and retries keep their real values; jobs keep their order. Rows: created_by 'chokaq-demo'.

-- name: demo_span
-- First and last finish (archive) or failure (DLQ) of the demo's jobs, in epoch seconds.
SELECT min(e) AS first_s, max(e) AS last_s, (julianday('now') - 2440587.5) * 86400.0 AS now_s FROM (
    SELECT (julianday(finished_at) - 2440587.5) * 86400.0 AS e FROM jobs_archive WHERE created_by = 'chokaq-demo'
    UNION ALL
    SELECT (julianday(failed_at) - 2440587.5) * 86400.0 FROM jobs_dlq WHERE created_by = 'chokaq-demo'
);

-- name: demo_spread
-- Moves each demo job so its end time maps linearly from [:first_s, :last_s] to [:start_s, :end_s]. SET
-- expressions see the old row, so every column moves by the offset of the old end time.
UPDATE jobs_archive SET
    created_at = strftime('%Y-%m-%d %H:%M:%f', julianday(created_at)
        + (:start_s + ((julianday(finished_at) - 2440587.5) * 86400.0 - :first_s) * :scale
           - (julianday(finished_at) - 2440587.5) * 86400.0) / 86400.0),
    started_at = strftime('%Y-%m-%d %H:%M:%f', julianday(started_at)
        + (:start_s + ((julianday(finished_at) - 2440587.5) * 86400.0 - :first_s) * :scale
           - (julianday(finished_at) - 2440587.5) * 86400.0) / 86400.0),
    finished_at = strftime('%Y-%m-%d %H:%M:%f', julianday(finished_at)
        + (:start_s + ((julianday(finished_at) - 2440587.5) * 86400.0 - :first_s) * :scale
           - (julianday(finished_at) - 2440587.5) * 86400.0) / 86400.0)
WHERE created_by = 'chokaq-demo';
UPDATE jobs_dlq SET
    created_at = strftime('%Y-%m-%d %H:%M:%f', julianday(created_at)
        + (:start_s + ((julianday(failed_at) - 2440587.5) * 86400.0 - :first_s) * :scale
           - (julianday(failed_at) - 2440587.5) * 86400.0) / 86400.0),
    started_at = strftime('%Y-%m-%d %H:%M:%f', julianday(started_at)
        + (:start_s + ((julianday(failed_at) - 2440587.5) * 86400.0 - :first_s) * :scale
           - (julianday(failed_at) - 2440587.5) * 86400.0) / 86400.0),
    heartbeat_at = strftime('%Y-%m-%d %H:%M:%f', julianday(heartbeat_at)
        + (:start_s + ((julianday(failed_at) - 2440587.5) * 86400.0 - :first_s) * :scale
           - (julianday(failed_at) - 2440587.5) * 86400.0) / 86400.0),
    failed_at = strftime('%Y-%m-%d %H:%M:%f', julianday(failed_at)
        + (:start_s + ((julianday(failed_at) - 2440587.5) * 86400.0 - :first_s) * :scale
           - (julianday(failed_at) - 2440587.5) * 86400.0) / 86400.0)
WHERE created_by = 'chokaq-demo';
UPDATE audit_log SET
    at = strftime('%Y-%m-%d %H:%M:%f', julianday(at)
        + (:start_s + ((julianday(at) - 2440587.5) * 86400.0 - :first_s) * :scale
           - (julianday(at) - 2440587.5) * 86400.0) / 86400.0)
WHERE actor = 'chokaq-demo' AND (julianday(at) - 2440587.5) * 86400.0 <= :last_s;

-- name: demo_outcomes
-- What the demo made, for its closing summary.
SELECT 'archive' AS location, NULL AS failure_reason, count(*) AS n FROM jobs_archive WHERE created_by = 'chokaq-demo'
UNION ALL
SELECT 'dlq', failure_reason, count(*) FROM jobs_dlq WHERE created_by = 'chokaq-demo' GROUP BY failure_reason
UNION ALL
SELECT 'hot', NULL, count(*) FROM jobs_hot WHERE created_by = 'chokaq-demo';

-- name: demo_busy
-- Demo jobs a worker could still run, or that are running: due and in hot.
SELECT count(*) AS n FROM jobs_hot
WHERE created_by = 'chokaq-demo' AND due_at <= strftime('%Y-%m-%d %H:%M:%f', 'now');

-- name: demo_running
SELECT count(*) AS n FROM jobs_hot WHERE status = 2 AND worker_id = :worker_id;
