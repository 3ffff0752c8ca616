-- Seeding and housekeeping for `chokaq bench` on PostgreSQL (loaded by name: queries.load(dialect, "bench")).
-- Never used by the Store. Rows are generated inside the server (generate_series), so a million rows
-- take seconds. Seeded ids start with 'bench-', queues with 'bench.'.

-- name: bench_db_version
SELECT 'PostgreSQL ' || current_setting('server_version') AS version;

-- name: bench_reset
-- Empties the job tables and everything a bench writes (a bench database is scratch by contract).
TRUNCATE jobs_hot, jobs_archive, jobs_dlq, audit_log, events, metric_buckets, plan_items, plans;
DELETE FROM queues WHERE name LIKE 'bench.%';
DELETE FROM stats_summary WHERE queue LIKE 'bench.%';
DELETE FROM queue_counts WHERE queue LIKE 'bench.%';
DELETE FROM sweep_marks;

-- name: bench_vacuum
-- Fresh statistics and visibility map after a bulk seed, as autovacuum would leave a settled table.
VACUUM ANALYZE jobs_hot, jobs_archive, jobs_dlq, audit_log, stats_summary, queues, events, metric_buckets;

-- name: bench_queues
-- The control and counter rows the seeded queues would have after their jobs were enqueued.
INSERT INTO queues (name)
SELECT 'bench.q' || q FROM generate_series(0, CAST(:queues AS integer) - 1) AS q ON CONFLICT DO NOTHING;
INSERT INTO stats_summary (queue, enqueued_total, succeeded_total, failed_total, last_activity_at)
SELECT 'bench.q' || q, CAST(:rows AS bigint), CAST(:succeeded AS bigint), CAST(:failed AS bigint), now()
FROM generate_series(0, CAST(:queues AS integer) - 1) AS q
ON CONFLICT (queue) DO UPDATE SET enqueued_total = excluded.enqueued_total,
    succeeded_total = excluded.succeeded_total, failed_total = excluded.failed_total;

-- name: bench_seed_archive
-- :rows succeeded jobs finished over the week before :days_ago days ago, in finishing order (as the
-- archive is appended to), over 4 queues and 8 types.
INSERT INTO jobs_archive (id, queue, type, payload, tags, priority, attempt_count, worker_id, created_at,
                          started_at, finished_at, duration_ms, created_by)
SELECT 'bench-a-' || lpad(CAST(g AS text), 10, '0'), 'bench.q' || (g % 4), 'bench.type' || (g % 8) || '.v1',
       '{"order_id":' || g || ',"amount":' || (g % 997) || '.5,"currency":"EUR","customer":"c-' || (g % 50021) || '"}',
       CASE WHEN g % 3 = 0 THEN 'bench,batch-' || (g % 10) END,
       10, 1 + CAST(g % 5 = 0 AS integer), 'bench-worker-' || (g % 16),
       t - interval '3 seconds', t - interval '250 milliseconds', t, 250.0, 'bench'
FROM generate_series(1, CAST(:rows AS integer)) AS g
CROSS JOIN LATERAL (
    SELECT now() - make_interval(days => CAST(:days_ago AS integer) + 7)
           + make_interval(secs => g * (7 * 86400.0 / CAST(:rows AS integer))) AS t
) x;

-- name: bench_seed_dlq
-- :rows dead jobs with reason :reason (the ones a bench moves) and :noise others with reason
-- MaxRetriesExceeded that must stay, interleaved over the last :days days, 4 queues, 8 types.
INSERT INTO jobs_dlq (id, queue, type, payload, tags, priority, failure_reason, error_details, fingerprint,
                      attempt_count, worker_id, heartbeat_at, created_at, started_at, failed_at, duration_ms,
                      created_by)
SELECT 'bench-d-' || lpad(CAST(g AS text), 10, '0'), 'bench.q' || (g % 4), 'bench.type' || (g % 8) || '.v1',
       '{"order_id":' || g || ',"amount":' || (g % 997) || '.5,"currency":"EUR","customer":"c-' || (g % 50021) || '"}',
       CASE WHEN g % 3 = 0 THEN 'bench,batch-' || (g % 10) END,
       10, r.reason,
       CASE WHEN r.reason = 2 THEN 'Zombie detected: heartbeat expired; last heartbeat ' || to_char(t, 'YYYY-MM-DD"T"HH24:MI:SS') || 'Z, worker bench-worker-' || (g % 16)
            ELSE E'Traceback (most recent call last):\n  File "handlers/orders.py", line 42, in charge\n    gateway.charge(order)\nTimeoutError: payment gateway did not answer within 30s (order ' || g || ')' END,
       CASE WHEN r.reason = 2 THEN 'bench-zombie' ELSE 'bench-timeout-' || (g % 3) END,
       3, 'bench-worker-' || (g % 16), t - interval '11 minutes', t - interval '1 hour', t - interval '20 minutes', t,
       NULL, 'bench'
FROM generate_series(1, CAST(:rows AS integer) + CAST(:noise AS integer)) AS g
CROSS JOIN LATERAL (
    SELECT CASE WHEN CAST(:noise AS integer) > 0
                     AND g % ((CAST(:rows AS integer) + CAST(:noise AS integer)) / CAST(:noise AS integer)) = 0
                     AND g / ((CAST(:rows AS integer) + CAST(:noise AS integer)) / CAST(:noise AS integer))
                         <= CAST(:noise AS integer)
                THEN 0 ELSE CAST(:reason AS integer) END AS reason,
           now() - make_interval(days => CAST(:days AS integer))
           + make_interval(secs => g * (CAST(:days AS integer) * 86400.0
                                       / (CAST(:rows AS integer) + CAST(:noise AS integer)))) AS t
) r;

-- name: bench_dlq_ids
SELECT id FROM jobs_dlq WHERE failure_reason = CAST(:reason AS integer) ORDER BY failed_at, id;

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
SELECT 'bench-h-' || lpad(CAST(g AS text), 10, '0'), 'bench.q' || (g % CAST(:queues AS integer)),
       'bench.type' || (g % 8) || '.v1',
       '{"order_id":' || g || ',"amount":' || (g % 997) || '.5,"currency":"EUR","customer":"c-' || (g % 50021) || '"}',
       CASE WHEN g % 3 = 0 THEN 'bench,batch-' || (g % 10) END,
       CASE WHEN g % 10 = 3 THEN 'bench-key-' || g END,
       CASE g % 10 WHEN 0 THEN 20 WHEN 1 THEN 5 WHEN 2 THEN 0 ELSE 10 END,
       x.status, CASE WHEN x.status = 2 THEN 1 ELSE 0 END,
       CASE WHEN x.status > 0 THEN 'bench-worker-' || (g % 16) END,
       CASE WHEN x.kind = 'zombie' THEN now() - interval '1 hour'
            WHEN x.kind = 'processing' THEN now() - interval '5 seconds' END,
       CASE WHEN x.kind = 'pending' AND g % 20 = 7 THEN now() + interval '1 hour' END,
       CASE WHEN x.kind = 'pending' AND g % 20 = 7 THEN now() + interval '1 hour' ELSE x.t END,
       x.t,
       CASE WHEN x.status = 2 THEN x.t + interval '1 second' END,
       CASE WHEN x.kind IN ('zombie', 'abandoned') THEN now() - interval '1 hour'
            WHEN x.kind IN ('fetched', 'processing') THEN now() - interval '5 seconds' ELSE x.t END,
       'bench'
FROM generate_series(1, CAST(:rows AS integer)) AS g
CROSS JOIN LATERAL (
    SELECT k.kind, CASE k.kind WHEN 'pending' THEN 0 WHEN 'fetched' THEN 1 WHEN 'abandoned' THEN 1 ELSE 2 END AS status,
           now() - interval '2 hours' + make_interval(secs => g * (3600.0 / CAST(:rows AS integer))) AS t
    FROM (SELECT CASE WHEN g <= CAST(:zombies AS integer) THEN 'zombie'
                      WHEN g <= CAST(:zombies AS integer) + CAST(:abandoned AS integer) THEN 'abandoned'
                      WHEN g <= CAST(:zombies AS integer) + CAST(:abandoned AS integer) + CAST(:fetched AS integer)
                          THEN 'fetched'
                      WHEN g <= CAST(:zombies AS integer) + CAST(:abandoned AS integer) + CAST(:fetched AS integer)
                                + CAST(:processing AS integer) THEN 'processing'
                      ELSE 'pending' END AS kind) k
) x;

-- name: bench_seed_telemetry
-- :rows metric buckets and :rows events from before :days_ago days ago (what retention prunes), then
-- :keep of each from the last hours (what it must leave). Buckets cover 16 queues a minute apart, events
-- one a second, both in time order as the store appends them.
INSERT INTO metric_buckets (bucket_start, queue, outcome, failure_reason, completed_count, duration_count,
                            total_duration_ms, max_duration_ms)
SELECT CASE WHEN g < CAST(:rows AS integer)
            THEN now() - make_interval(days => CAST(:days_ago AS integer),
                                       mins => (CAST(:rows AS integer) - g) / 16)
            ELSE now() - make_interval(mins => (CAST(:rows AS integer) + CAST(:keep AS integer) - g) / 16) END,
       'bench.q' || (g % 16), 0, 0, 5, 5, 1250.0, 400.0
FROM generate_series(0, CAST(:rows AS integer) + CAST(:keep AS integer) - 1) AS g;
INSERT INTO events (at, kind, message, data)
SELECT CASE WHEN g < CAST(:rows AS integer)
            THEN now() - make_interval(days => CAST(:days_ago AS integer), secs => CAST(:rows AS integer) - g)
            ELSE now() - make_interval(secs => CAST(:rows AS integer) + CAST(:keep AS integer) - g) END,
       'bench', 'bench event ' || g, '{"n":' || g || '}'
FROM generate_series(0, CAST(:rows AS integer) + CAST(:keep AS integer) - 1) AS g;

-- name: bench_count_telemetry
SELECT (SELECT count(*) FROM metric_buckets) AS buckets, (SELECT count(*) FROM events) AS events;

-- name: bench_rearm_sweep
-- Puts the sweep's victims back for the next run: zombies return from the DLQ to hot with a stale
-- heartbeat, recovered fetches become abandoned again.
WITH back AS (
    DELETE FROM jobs_dlq WHERE id LIKE 'bench-h-%' RETURNING *
)
INSERT INTO jobs_hot (id, queue, type, payload, tags, priority, status, attempt_count, worker_id, heartbeat_at,
                      due_at, created_at, started_at, updated_at, created_by)
SELECT id, queue, type, payload, tags, priority, 2, 1, worker_id, now() - interval '1 hour', created_at, created_at,
       created_at + interval '1 second', now() - interval '1 hour', created_by
FROM back;
UPDATE jobs_hot SET status = 1, worker_id = 'bench-worker-0', updated_at = now() - interval '1 hour'
WHERE id IN (SELECT 'bench-h-' || lpad(CAST(g AS text), 10, '0')
             FROM generate_series(CAST(:zombies AS integer) + 1,
                                  CAST(:zombies AS integer) + CAST(:abandoned AS integer)) AS g);
-- Rows put back an hour into the past lie behind where the last sweep left its marks (real time never
-- does that): the next sweep starts from the beginning, as the first one did.
DELETE FROM sweep_marks;

-- name: bench_checkpoint
-- Writes out what the seed dirtied, so a timed run does not share the disk with that checkpoint
-- (needs superuser or pg_checkpoint; the bench goes on without it).
CHECKPOINT;

-- name: bench_plain_insert
-- The baseline of `chokaq bench enqueue`: the row enqueue_one inserts (the same columns and values),
-- inserted as plainly as SQL allows (no idempotency, conflict, queue, counter or wake-up work), in its
-- own autocommit transaction; prepared on the producer's kind of connection, as enqueue_one is.
INSERT INTO jobs_hot (id, queue, type, payload, tags, priority, status, attempt_count, scheduled_at, due_at,
                      created_at, updated_at, created_by, trace_context)
VALUES (CAST(:id AS text), CAST(:queue AS text), CAST(:type AS text), CAST(:payload AS text), CAST(:tags AS text),
        CAST(:priority AS integer), 0, 0, NULL, now(), now(), now(), CAST(:created_by AS text),
        CAST(:trace_context AS text));

-- name: bench_plain_insert_many
-- The baseline of enqueue_many (`chokaq bench enqueue`, kind plain_many): the same rows as one bare
-- multi-row INSERT, the rows passed as one JSON parameter (values are never written into SQL text).
INSERT INTO jobs_hot (id, queue, type, payload, tags, priority, status, attempt_count, scheduled_at, due_at,
                      created_at, updated_at, created_by, trace_context)
SELECT i.id, i.queue, i.type, i.payload, i.tags, i.priority, 0, 0, NULL, now(), now(), now(), i.created_by,
       i.trace_context
FROM jsonb_to_recordset(CAST(:items AS jsonb)) AS i(id text, queue text, type text, payload text, tags text,
                                                     priority integer, created_by text, trace_context text);

-- name: bench_pickup_ms
-- Enqueue -> start of the archived jobs of :queue on the database clock, in milliseconds.
SELECT EXTRACT(EPOCH FROM (started_at - created_at)) * 1000.0 AS ms FROM jobs_archive WHERE queue = CAST(:queue AS text);

-- name: bench_backend_pids
-- The client backends connected to this database (the worker's and the bench's own): `chokaq bench
-- throughput` reads their CPU time from /proc before and after a drain.
SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend';

-- ---------------------------------------------------------------- soak (chokaq_ops/bench/soak*.py)

-- name: bench_soak_outcomes
-- Jobs of :queue finished so far, from the one-second metric buckets (archived: outcome 0, dead: 1):
-- cheap at any archive size, and a bucket row is updated only during its second.
SELECT coalesce(sum(completed_count) FILTER (WHERE outcome = 0), 0) AS archived,
       coalesce(sum(completed_count) FILTER (WHERE outcome = 1), 0) AS dead
FROM metric_buckets WHERE queue = CAST(:queue AS text);

-- name: bench_soak_tables
-- Dead row versions and size of the queue tables (the statistics collector's counts lag by a second or so).
SELECT s.relname AS name, s.n_live_tup AS live, s.n_dead_tup AS dead, pg_total_relation_size(s.relid) AS bytes
FROM pg_stat_user_tables s
WHERE s.relname IN ('jobs_hot', 'stats_summary', 'queue_counts', 'metric_buckets', 'idle_workers', 'workers',
                    'queues')
ORDER BY s.relname;

-- name: bench_soak_horizon
-- Age in seconds of the oldest snapshot any session of the server holds (0 when none).
SELECT coalesce(max(EXTRACT(EPOCH FROM (clock_timestamp() - coalesce(xact_start, query_start)))), 0) AS age_s
FROM pg_stat_activity WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid();

-- name: bench_soak_lock_waits
-- The sessions of this database waiting for a lock right now, and for how long (ms) their statement ran.
SELECT EXTRACT(EPOCH FROM (clock_timestamp() - query_start)) * 1000.0 AS ms
FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock';

-- name: bench_soak_hold
-- A reader that keeps one snapshot as an analyst's notebook or a nightly dump does: the first statement
-- of a repeatable-read transaction the soak leaves open (run in Database.snapshot). The server ends
-- idle transactions after idle_in_transaction_session_timeout: this session waives it.
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
SET LOCAL idle_in_transaction_session_timeout = 0;
SET LOCAL statement_timeout = 0;
SELECT count(*) AS n FROM jobs_archive;

-- name: bench_soak_analytics
-- One long analytics query on the archive (PlanetScale's scenario: a report that scans for minutes):
-- its snapshot is held for :seconds.
SET LOCAL statement_timeout = 0;
SELECT count(*) AS n, max(duration_ms) AS longest, (SELECT pg_sleep(CAST(:seconds AS double precision))) AS slept
FROM jobs_archive;
