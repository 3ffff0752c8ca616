-- `chokaq demo` on PostgreSQL (loaded by name: queries.load(dialect, "demo")). Never used by the Store.
-- The demo runs for seconds; these queries spread its finished jobs over a longer history so trend charts
-- have hours and days to show. Each job moves as a whole (all its times by one offset), so durations,
-- heartbeat ages and retries keep their real values; jobs keep their order. Rows: created_by 'chokaq-demo'.

-- name: demo_spread
-- Moves each finished demo job so the k-th distinct end time (finish or failure) lands at
-- :start_s + k/(K-1) * :history_s: an even history ending now, jobs that ended together still together.
CREATE TEMP TABLE demo_moves ON COMMIT DROP AS
WITH ends AS (
    SELECT id, 'archive' AS tbl, finished_at AS e FROM jobs_archive WHERE created_by = 'chokaq-demo'
    UNION ALL
    SELECT id, 'dlq', failed_at FROM jobs_dlq WHERE created_by = 'chokaq-demo'
),
ranked AS (SELECT id, tbl, e, dense_rank() OVER (ORDER BY e) - 1 AS r FROM ends),
top AS (SELECT greatest(max(r), 1) AS m FROM ranked)
SELECT id, tbl, make_interval(secs => CAST(:start_s AS double precision)
                                      + r * CAST(:history_s AS double precision) / top.m
                                      - extract(epoch FROM e)) AS d
FROM ranked, top;
UPDATE jobs_archive a
SET created_at = a.created_at + m.d, started_at = a.started_at + m.d, finished_at = a.finished_at + m.d
FROM demo_moves m WHERE m.tbl = 'archive' AND a.id = m.id;
UPDATE jobs_dlq q
SET created_at = q.created_at + m.d, started_at = q.started_at + m.d, heartbeat_at = q.heartbeat_at + m.d,
    failed_at = q.failed_at + m.d
FROM demo_moves m WHERE m.tbl = 'dlq' AND q.id = m.id;
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
-- Demo jobs a worker could still run, or that are running: due and in hot.
SELECT count(*) AS n FROM jobs_hot WHERE created_by = 'chokaq-demo' AND due_at <= now();

-- name: demo_running
SELECT count(*) AS n FROM jobs_hot WHERE status = 2 AND worker_id = CAST(:worker_id AS text);
