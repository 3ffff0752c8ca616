-- `chokaq demo` on PostgreSQL (loaded by name: queries.load(dialect, "demo")). Never used by the Store.
-- The demo runs for seconds; these queries spread its finished jobs over a longer history so trend charts
-- have hours and days to show. Each job moves as a whole (all its times by one offset), so durations,
-- heartbeat ages and retries keep their real values; jobs keep their order. Rows: created_by 'chokaq-demo'.

-- name: demo_span
-- First and last finish (archive) or failure (DLQ) of the demo's jobs, in epoch seconds.
SELECT min(t) AS first_s, max(t) AS last_s, extract(epoch FROM now()) AS now_s FROM (
    SELECT extract(epoch FROM finished_at) AS t FROM jobs_archive WHERE created_by = 'chokaq-demo'
    UNION ALL
    SELECT extract(epoch FROM failed_at) FROM jobs_dlq WHERE created_by = 'chokaq-demo'
) x;

-- name: demo_spread
-- Moves each demo job so its end time maps linearly from [:first_s, :last_s] to [:start_s, :end_s].
UPDATE jobs_archive a
SET created_at = a.created_at + s.d, started_at = a.started_at + s.d, finished_at = a.finished_at + s.d
FROM (SELECT id, make_interval(secs => CAST(:start_s AS double precision)
                                + (extract(epoch FROM finished_at) - CAST(:first_s AS double precision))
                                  * CAST(:scale AS double precision)
                                - extract(epoch FROM finished_at)) AS d
      FROM jobs_archive WHERE created_by = 'chokaq-demo') s
WHERE a.id = s.id;
UPDATE jobs_dlq q
SET created_at = q.created_at + s.d, started_at = q.started_at + s.d, heartbeat_at = q.heartbeat_at + s.d,
    failed_at = q.failed_at + s.d
FROM (SELECT id, make_interval(secs => CAST(:start_s AS double precision)
                                + (extract(epoch FROM failed_at) - CAST(:first_s AS double precision))
                                  * CAST(:scale AS double precision)
                                - extract(epoch FROM failed_at)) AS d
      FROM jobs_dlq WHERE created_by = 'chokaq-demo') s
WHERE q.id = s.id;
UPDATE audit_log
SET at = at + make_interval(secs => CAST(:start_s AS double precision)
                                    + (extract(epoch FROM at) - CAST(:first_s AS double precision))
                                      * CAST(:scale AS double precision)
                                    - extract(epoch FROM at))
WHERE actor = 'chokaq-demo' AND at <= to_timestamp(CAST(:last_s AS double precision));

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
