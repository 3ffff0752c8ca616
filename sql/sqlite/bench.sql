-- Seeding and housekeeping for `chokaq bench` on SQLite (loaded by name: queries.load(dialect, "bench")).
-- Never used by the Store. Rows are generated inside the database (recursive CTEs), so a million rows
-- take seconds. Seeded ids start with 'bench-', queues with 'bench.'. Times are julian days turned into
-- the store's text format.

-- fragment: ts
'%Y-%m-%d %H:%M:%f'

-- name: bench_db_version
SELECT 'SQLite ' || sqlite_version() AS version;

-- name: bench_reset
-- Empties the job tables and everything a bench writes (a bench database is scratch by contract).
DELETE FROM jobs_hot;
DELETE FROM jobs_archive;
DELETE FROM jobs_dlq;
DELETE FROM audit_log;
DELETE FROM events;
DELETE FROM metric_buckets;
DELETE FROM plan_items;
DELETE FROM plans;
DELETE FROM queues WHERE name LIKE 'bench.%';
DELETE FROM stats_summary WHERE queue LIKE 'bench.%';

-- name: bench_vacuum
-- Folds the seed's write-ahead log back into the database file, so the run does not pay for it.
PRAGMA wal_checkpoint(TRUNCATE);

-- name: bench_queues
INSERT INTO queues (name)
WITH RECURSIVE s(q) AS (SELECT 0 UNION ALL SELECT q + 1 FROM s WHERE q + 1 < :queues)
SELECT 'bench.q' || q FROM s WHERE true ON CONFLICT DO NOTHING;
INSERT INTO stats_summary (queue, enqueued_total, succeeded_total, failed_total, last_activity_at)
WITH RECURSIVE s(q) AS (SELECT 0 UNION ALL SELECT q + 1 FROM s WHERE q + 1 < :queues)
SELECT 'bench.q' || q, :rows, :succeeded, :failed, strftime({{ts}}, 'now') FROM s WHERE true
ON CONFLICT (queue) DO UPDATE SET enqueued_total = excluded.enqueued_total,
    succeeded_total = excluded.succeeded_total, failed_total = excluded.failed_total;

-- name: bench_seed_archive
-- :rows succeeded jobs finished over the week before :days_ago days ago, in finishing order, over
-- 4 queues and 8 types.
INSERT INTO jobs_archive (id, queue, type, payload, tags, priority, attempt_count, worker_id, created_at,
                          started_at, finished_at, duration_ms, created_by)
WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < :rows),
x AS (SELECT g, julianday('now') - (:days_ago + 7) + g * (7.0 / :rows) AS t FROM s)
SELECT 'bench-a-' || printf('%010d', g), 'bench.q' || (g % 4), 'bench.type' || (g % 8) || '.v1',
       '{"order_id":' || g || ',"amount":' || (g % 997) || '.5,"currency":"EUR","customer":"c-' || (g % 50021) || '"}',
       CASE WHEN g % 3 = 0 THEN 'bench,batch-' || (g % 10) END,
       10, 1 + (g % 5 = 0), 'bench-worker-' || (g % 16),
       strftime({{ts}}, t - 3.0 / 86400), strftime({{ts}}, t - 0.25 / 86400), strftime({{ts}}, t), 250.0, 'bench'
FROM x;

-- name: bench_seed_dlq
-- :rows dead jobs with reason :reason (the ones a bench moves) and :noise others with reason
-- MaxRetriesExceeded that must stay, interleaved over the last :days days, 4 queues, 8 types.
INSERT INTO jobs_dlq (id, queue, type, payload, tags, priority, failure_reason, error_details, fingerprint,
                      attempt_count, worker_id, heartbeat_at, created_at, started_at, failed_at, duration_ms,
                      created_by)
WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < :rows + :noise),
x AS (
    SELECT g,
           CASE WHEN :noise > 0 AND g % ((:rows + :noise) / :noise) = 0 AND g / ((:rows + :noise) / :noise) <= :noise
                THEN 0 ELSE :reason END AS reason,
           julianday('now') - :days + g * (CAST(:days AS REAL) / (:rows + :noise)) AS t
    FROM s
)
SELECT 'bench-d-' || printf('%010d', g), 'bench.q' || (g % 4), 'bench.type' || (g % 8) || '.v1',
       '{"order_id":' || g || ',"amount":' || (g % 997) || '.5,"currency":"EUR","customer":"c-' || (g % 50021) || '"}',
       CASE WHEN g % 3 = 0 THEN 'bench,batch-' || (g % 10) END,
       10, reason,
       CASE WHEN reason = 2 THEN 'Zombie detected: heartbeat expired; last heartbeat ' || strftime('%Y-%m-%dT%H:%M:%S', t) || 'Z, worker bench-worker-' || (g % 16)
            ELSE 'Traceback (most recent call last):' || char(10) || '  File "handlers/orders.py", line 42, in charge' || char(10)
                 || '    gateway.charge(order)' || char(10) || 'TimeoutError: payment gateway did not answer within 30s (order ' || g || ')' END,
       CASE WHEN reason = 2 THEN 'bench-zombie' ELSE 'bench-timeout-' || (g % 3) END,
       3, 'bench-worker-' || (g % 16), strftime({{ts}}, t - 11.0 / 1440), strftime({{ts}}, t - 1.0 / 24),
       strftime({{ts}}, t - 20.0 / 1440), strftime({{ts}}, t), NULL, 'bench'
FROM x;

-- name: bench_dlq_ids
SELECT id FROM jobs_dlq WHERE failure_reason = :reason ORDER BY failed_at, id;

-- name: bench_count_dlq
SELECT failure_reason AS reason, count(*) AS n FROM jobs_dlq GROUP BY failure_reason ORDER BY failure_reason;

-- name: bench_count_hot
SELECT status, count(*) AS n FROM jobs_hot GROUP BY status ORDER BY status;

-- name: bench_seed_hot
-- :rows hot jobs over :queues queues. The oldest ones are held by workers: first :zombies processing
-- rows whose heartbeat stopped an hour ago, then :abandoned fetched rows untouched for an hour, then
-- :fetched live fetched rows and :processing live processing rows; the rest are pending with mixed
-- priorities (0, 5, 10, 20), one in twenty scheduled an hour ahead, one in ten with an idempotency key.
INSERT INTO jobs_hot (id, queue, type, payload, tags, idempotency_key, priority, status, attempt_count, worker_id,
                      heartbeat_at, scheduled_at, due_at, created_at, started_at, updated_at, created_by)
WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < :rows),
k AS (
    SELECT g, julianday('now') - 2.0 / 24 + g * (1.0 / 24 / :rows) AS t,
           CASE WHEN g <= :zombies THEN 'zombie'
                WHEN g <= :zombies + :abandoned THEN 'abandoned'
                WHEN g <= :zombies + :abandoned + :fetched THEN 'fetched'
                WHEN g <= :zombies + :abandoned + :fetched + :processing THEN 'processing'
                ELSE 'pending' END AS kind
    FROM s
),
x AS (
    SELECT g, t, kind,
           CASE kind WHEN 'pending' THEN 0 WHEN 'fetched' THEN 1 WHEN 'abandoned' THEN 1 ELSE 2 END AS status
    FROM k
)
SELECT 'bench-h-' || printf('%010d', g), 'bench.q' || (g % :queues), 'bench.type' || (g % 8) || '.v1',
       '{"order_id":' || g || ',"amount":' || (g % 997) || '.5,"currency":"EUR","customer":"c-' || (g % 50021) || '"}',
       CASE WHEN g % 3 = 0 THEN 'bench,batch-' || (g % 10) END,
       CASE WHEN g % 10 = 3 THEN 'bench-key-' || g END,
       CASE g % 10 WHEN 0 THEN 20 WHEN 1 THEN 5 WHEN 2 THEN 0 ELSE 10 END,
       status, CASE WHEN status = 2 THEN 1 ELSE 0 END,
       CASE WHEN status > 0 THEN 'bench-worker-' || (g % 16) END,
       CASE WHEN kind = 'zombie' THEN strftime({{ts}}, 'now', '-1 hour')
            WHEN kind = 'processing' THEN strftime({{ts}}, 'now', '-5 seconds') END,
       CASE WHEN kind = 'pending' AND g % 20 = 7 THEN strftime({{ts}}, 'now', '+1 hour') END,
       CASE WHEN kind = 'pending' AND g % 20 = 7 THEN strftime({{ts}}, 'now', '+1 hour') ELSE strftime({{ts}}, t) END,
       strftime({{ts}}, t),
       CASE WHEN status = 2 THEN strftime({{ts}}, t + 1.0 / 86400) END,
       CASE WHEN kind IN ('zombie', 'abandoned') THEN strftime({{ts}}, 'now', '-1 hour')
            WHEN kind IN ('fetched', 'processing') THEN strftime({{ts}}, 'now', '-5 seconds')
            ELSE strftime({{ts}}, t) END,
       'bench'
FROM x;

-- name: bench_seed_telemetry
-- :rows metric buckets and :rows events from before :days_ago days ago (what retention prunes), then
-- :keep of each from the last hours (what it must leave). Buckets cover 16 queues a minute apart, events
-- one a second, both in time order as the store appends them.
INSERT INTO metric_buckets (bucket_start, queue, outcome, failure_reason, completed_count, duration_count,
                            total_duration_ms, max_duration_ms)
WITH RECURSIVE s(g) AS (SELECT 0 UNION ALL SELECT g + 1 FROM s WHERE g + 1 < :rows + :keep)
SELECT strftime({{ts}}, CASE WHEN g < :rows THEN julianday('now') - :days_ago - (:rows - g) / 16 / 1440.0
                             ELSE julianday('now') - (:rows + :keep - g) / 16 / 1440.0 END),
       'bench.q' || (g % 16), 0, 0, 5, 5, 1250.0, 400.0
FROM s;
INSERT INTO events (at, kind, message, data)
WITH RECURSIVE s(g) AS (SELECT 0 UNION ALL SELECT g + 1 FROM s WHERE g + 1 < :rows + :keep)
SELECT strftime({{ts}}, CASE WHEN g < :rows THEN julianday('now') - :days_ago - (:rows - g) / 86400.0
                             ELSE julianday('now') - (:rows + :keep - g) / 86400.0 END),
       'bench', 'bench event ' || g, '{"n":' || g || '}'
FROM s;

-- name: bench_count_telemetry
SELECT (SELECT count(*) FROM metric_buckets) AS buckets, (SELECT count(*) FROM events) AS events;

-- name: bench_rearm_sweep
-- Puts the sweep's victims back for the next run: zombies return from the DLQ to hot with a stale
-- heartbeat, recovered fetches become abandoned again.
INSERT INTO jobs_hot (id, queue, type, payload, tags, priority, status, attempt_count, worker_id, heartbeat_at,
                      due_at, created_at, started_at, updated_at, created_by)
SELECT id, queue, type, payload, tags, priority, 2, 1, worker_id, strftime({{ts}}, 'now', '-1 hour'), created_at,
       created_at, strftime({{ts}}, created_at, '+1 second'), strftime({{ts}}, 'now', '-1 hour'), created_by
FROM jobs_dlq WHERE id LIKE 'bench-h-%';
DELETE FROM jobs_dlq WHERE id LIKE 'bench-h-%';
UPDATE jobs_hot SET status = 1, worker_id = 'bench-worker-0', updated_at = strftime({{ts}}, 'now', '-1 hour')
WHERE id IN (WITH RECURSIVE s(g) AS (SELECT :zombies + 1 UNION ALL SELECT g + 1 FROM s WHERE g < :zombies + :abandoned)
             SELECT 'bench-h-' || printf('%010d', g) FROM s WHERE :abandoned > 0);

-- name: bench_checkpoint
-- The seed's log is already folded back by bench_vacuum.
SELECT 1 AS done;

-- name: bench_plain_insert
-- The baseline of `chokaq bench enqueue`: the row enqueue_one inserts, as plainly as SQL allows (no
-- idempotency, conflict, queue or counter work), in its own autocommit transaction.
INSERT INTO jobs_hot (id, queue, type, payload, tags, priority, status, attempt_count, scheduled_at, due_at,
                      created_at, updated_at, created_by, trace_context)
VALUES (:id, :queue, :type, :payload, :tags, :priority, 0, 0, NULL, strftime({{ts}}, 'now'),
        strftime({{ts}}, 'now'), strftime({{ts}}, 'now'), :created_by, :trace_context);

-- name: bench_plain_insert_many
-- The baseline of enqueue_many (kind plain_many): the same rows as one bare multi-row INSERT from one JSON
-- parameter.
INSERT INTO jobs_hot (id, queue, type, payload, tags, priority, status, attempt_count, scheduled_at, due_at,
                      created_at, updated_at, created_by, trace_context)
SELECT json_extract(j.value, '$.id'), json_extract(j.value, '$.queue'), json_extract(j.value, '$.type'),
       json_extract(j.value, '$.payload'), json_extract(j.value, '$.tags'), json_extract(j.value, '$.priority'),
       0, 0, NULL, strftime({{ts}}, 'now'), strftime({{ts}}, 'now'), strftime({{ts}}, 'now'),
       json_extract(j.value, '$.created_by'), json_extract(j.value, '$.trace_context')
FROM json_each(:items) j;

-- name: bench_pickup_ms
-- Enqueue -> start of the archived jobs of :queue on the database clock, in milliseconds.
SELECT (julianday(started_at) - julianday(created_at)) * 86400000.0 AS ms FROM jobs_archive WHERE queue = :queue;

-- name: bench_backend_pids
-- No server processes: the database runs inside the worker, whose CPU is counted already.
SELECT NULL AS pid WHERE 0;

-- ---------------------------------------------------------------- soak (chokaq_ops/bench/soak*.py)

-- name: bench_soak_outcomes
SELECT coalesce(sum(CASE WHEN outcome = 0 THEN completed_count END), 0) AS archived,
       coalesce(sum(CASE WHEN outcome = 1 THEN completed_count END), 0) AS dead
FROM metric_buckets WHERE queue = :queue;

-- name: bench_soak_tables
-- SQLite removes deleted rows from its b-trees at once: no dead versions; the size is the file's pages.
SELECT 'database' AS name, NULL AS live, 0 AS dead,
       (SELECT page_count FROM pragma_page_count()) * (SELECT page_size FROM pragma_page_size()) AS bytes;

-- name: bench_soak_horizon
-- SQLite cannot tell another connection's read transaction from here (the soak knows its own holder).
SELECT NULL AS age_s;

-- name: bench_soak_lock_waits
SELECT NULL AS ms WHERE 0;

-- name: bench_soak_hold
-- A reader that keeps one snapshot: a read transaction the soak leaves open (run in Database.snapshot),
-- which keeps the WAL from being checkpointed past the point it reads.
SELECT count(*) AS n FROM jobs_archive;

-- name: bench_soak_analytics
-- One long analytics read on the archive: the soak keeps its read transaction open for :seconds.
SELECT count(*) AS n, max(duration_ms) AS longest, :seconds AS slept FROM jobs_archive;
