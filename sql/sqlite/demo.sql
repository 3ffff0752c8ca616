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
-- A job's failure history moves with it: its failed attempts stay before its end, as they happened.
UPDATE job_failures SET failed_at = strftime('%Y-%m-%d %H:%M:%f', julianday(failed_at) + m.days)
FROM demo_moves m WHERE job_failures.job_id = m.id;
-- The operator's cancellations happened when their jobs entered the DLQ.
UPDATE audit_log SET at = (SELECT q.failed_at FROM jobs_dlq q WHERE q.id = audit_log.job_id)
WHERE actor = 'chokaq-demo' AND job_id IN (SELECT id FROM jobs_dlq);
DROP TABLE temp.demo_moves;

-- name: demo_sources
-- The finished demo jobs a larger demo copies (not the dead workers' zombies, not the operator's
-- cancellations: those are single events of the story), with when each ended (epoch seconds).
SELECT id, (julianday(finished_at) - 2440587.5) * 86400.0 AS end_s FROM jobs_archive
WHERE created_by = 'chokaq-demo' AND id NOT LIKE '%.c%'
UNION ALL
SELECT id, (julianday(failed_at) - 2440587.5) * 86400.0 FROM jobs_dlq
WHERE created_by = 'chokaq-demo' AND failure_reason NOT IN (1, 2) AND id NOT LIKE '%.c%'
ORDER BY 1;

-- name: demo_copy
-- One batch of copies (:copies, JSON [{"src", "id", "s"}]): each a finished demo job again under a new
-- id, every time (its failure history's too) moved by s seconds, so a copy is its original at another
-- moment of the story; the queue counters count them as the workers counted the originals.
DROP TABLE IF EXISTS temp.demo_copies;
CREATE TEMP TABLE demo_copies AS
SELECT json_extract(value, '$.src') AS src, json_extract(value, '$.id') AS id,
       json_extract(value, '$.s') / 86400.0 AS days
FROM json_each(:copies);
INSERT INTO jobs_archive (id, queue, type, payload, tags, idempotency_key, priority, attempt_count, worker_id,
                          created_at, started_at, finished_at, duration_ms, created_by, last_modified_by,
                          failure_count)
SELECT c.id, a.queue, a.type, a.payload, a.tags, NULL, a.priority, a.attempt_count, a.worker_id,
       strftime('%Y-%m-%d %H:%M:%f', julianday(a.created_at) + c.days),
       strftime('%Y-%m-%d %H:%M:%f', julianday(a.started_at) + c.days),
       strftime('%Y-%m-%d %H:%M:%f', julianday(a.finished_at) + c.days),
       a.duration_ms, a.created_by, a.last_modified_by, a.failure_count
FROM demo_copies c JOIN jobs_archive a ON a.id = c.src;
INSERT INTO jobs_dlq (id, queue, type, payload, tags, idempotency_key, priority, failure_reason, error_details,
                      fingerprint, attempt_count, worker_id, heartbeat_at, created_at, started_at, failed_at,
                      duration_ms, created_by, last_modified_by)
SELECT c.id, d.queue, d.type, d.payload, d.tags, NULL, d.priority, d.failure_reason, d.error_details,
       d.fingerprint, d.attempt_count, d.worker_id,
       strftime('%Y-%m-%d %H:%M:%f', julianday(d.heartbeat_at) + c.days),
       strftime('%Y-%m-%d %H:%M:%f', julianday(d.created_at) + c.days),
       strftime('%Y-%m-%d %H:%M:%f', julianday(d.started_at) + c.days),
       strftime('%Y-%m-%d %H:%M:%f', julianday(d.failed_at) + c.days),
       d.duration_ms, d.created_by, d.last_modified_by
FROM demo_copies c JOIN jobs_dlq d ON d.id = c.src;
INSERT INTO job_failures (job_id, queue, type, attempt, outcome, failure_reason, fingerprint, error_line,
                          error_details, worker_id, failed_at)
SELECT c.id, f.queue, f.type, f.attempt, f.outcome, f.failure_reason, f.fingerprint, f.error_line,
       f.error_details, f.worker_id, strftime('%Y-%m-%d %H:%M:%f', julianday(f.failed_at) + c.days)
FROM demo_copies c JOIN job_failures f ON f.job_id = c.src ORDER BY c.id, f.seq;
INSERT INTO stats_summary (queue, enqueued_total, succeeded_total, failed_total, retried_total)
SELECT queue, count(*), sum(ok), sum(1 - ok), sum(retried) FROM (
    SELECT a.queue, 1 AS ok, a.failure_count AS retried FROM demo_copies c JOIN jobs_archive a ON a.id = c.src
    UNION ALL
    SELECT d.queue, 0, 0 FROM demo_copies c JOIN jobs_dlq d ON d.id = c.src
) WHERE true GROUP BY queue
ON CONFLICT (queue) DO UPDATE SET enqueued_total = enqueued_total + excluded.enqueued_total,
                                  succeeded_total = succeeded_total + excluded.succeeded_total,
                                  failed_total = failed_total + excluded.failed_total,
                                  retried_total = retried_total + excluded.retried_total;
DROP TABLE temp.demo_copies;

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
