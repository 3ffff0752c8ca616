-- Named queries for SQLite. Format: see chokaq_ops/storage/queries.py.
-- Multi-statement blocks run inside BEGIN IMMEDIATE: SQLite has one writer at a time, so staging the
-- moved ids in a temporary table and then inserting/deleting is as atomic as PostgreSQL's single
-- statement. Times are UTC text 'YYYY-MM-DD HH:MM:SS.fff' from the database clock.

-- ---------------------------------------------------------------- fragments

-- fragment: now
strftime('%Y-%m-%d %H:%M:%f', 'now')

-- fragment: staging
CREATE TEMP TABLE IF NOT EXISTS staged (
    id TEXT, queue TEXT, ord INTEGER, num REAL, reason INTEGER, error TEXT, fingerprint TEXT,
    payload TEXT, tags TEXT, priority INTEGER, status TEXT, key TEXT, ref TEXT
);
CREATE INDEX IF NOT EXISTS temp.ix_staged_id ON staged (id);
-- Batch-internal idempotency dedupe looks keys up in staged: without this, O(n^2) per enqueue.
CREATE INDEX IF NOT EXISTS temp.ix_staged_key ON staged (key) WHERE key IS NOT NULL;
-- Older copies of moving ids found in a second table (staged_displace_twins, resurrect_rest).
CREATE TEMP TABLE IF NOT EXISTS displaced (id TEXT, queue TEXT, location TEXT, copy TEXT)

-- fragment: claimed_columns
-- What a claim returns per row (fetch, fetch_head, recover_claims): the job, its status and start, and
-- renewed_at (the lifetime clock's restart by a renewing resurrect: the retry decision reads it).
id, queue, type, payload, tags, priority, attempt_count, created_at, scheduled_at, due_at, idempotency_key,
created_by, status, started_at, trace_context, renewed_at

-- fragment: claim_and_start
-- The end of a claim (fetch, fetch_head): the rows of `picked` marked `go` are started (processing,
-- attempt + 1, started and heartbeat now), the others fetched; each row comes back with its status.
UPDATE jobs_hot SET status = CASE WHEN picked.go THEN 2 ELSE 1 END, worker_id = :worker_id,
                    attempt_count = attempt_count + picked.go,
                    started_at = CASE WHEN picked.go THEN {{now}} ELSE started_at END,
                    heartbeat_at = CASE WHEN picked.go THEN {{now}} ELSE heartbeat_at END, updated_at = {{now}}
FROM picked WHERE jobs_hot.id = picked.id
RETURNING {{claimed_columns}}

-- fragment: list_where
-- The filter grammar's lists and exclusions over rows aliased d (JSON arrays or null): DLQ and failure history.
(:queues IS NULL OR d.queue IN (SELECT value FROM json_each(:queues)))
AND (:not_queues IS NULL OR d.queue NOT IN (SELECT value FROM json_each(:not_queues)))
AND (:types IS NULL OR d.type IN (SELECT value FROM json_each(:types)))
AND (:not_types IS NULL OR d.type NOT IN (SELECT value FROM json_each(:not_types)))
AND (:reasons IS NULL OR d.failure_reason IN (SELECT value FROM json_each(:reasons)))
AND (:not_reasons IS NULL OR d.failure_reason NOT IN (SELECT value FROM json_each(:not_reasons)))
AND (:fingerprints IS NULL OR d.fingerprint IN (SELECT value FROM json_each(:fingerprints)))

-- fragment: dlq_where
(:queue IS NULL OR d.queue = :queue)
AND (:type IS NULL OR d.type = :type)
AND (:reason IS NULL OR d.failure_reason = :reason)
AND (:fingerprint IS NULL OR d.fingerprint = :fingerprint)
-- Times are half-open [from, to). List filters (chokaq_ops/filters.py) are JSON arrays or null.
AND (:failed_from IS NULL OR d.failed_at >= :failed_from)
AND (:failed_to IS NULL OR d.failed_at < :failed_to)
AND (:created_from IS NULL OR d.created_at >= :created_from)
AND (:created_to IS NULL OR d.created_at < :created_to)
AND (:tag_like IS NULL OR (',' || replace(coalesce(d.tags, ''), ' ', '') || ',') LIKE :tag_like ESCAPE '\')
AND (:search_like IS NULL OR d.id LIKE :search_like ESCAPE '\' OR d.type LIKE :search_like ESCAPE '\'
     OR d.tags LIKE :search_like ESCAPE '\' OR d.error_details LIKE :search_like ESCAPE '\')
AND (:ids IS NULL OR d.id IN (SELECT value FROM json_each(:ids)))
AND {{list_where}}

-- fragment: archive_where
(:queue IS NULL OR a.queue = :queue)
AND (:type IS NULL OR a.type = :type)
AND (:finished_from IS NULL OR a.finished_at >= :finished_from)
AND (:finished_to IS NULL OR a.finished_at <= :finished_to)
AND (:created_from IS NULL OR a.created_at >= :created_from)
AND (:created_to IS NULL OR a.created_at <= :created_to)
AND (:tag_like IS NULL OR (',' || replace(coalesce(a.tags, ''), ' ', '') || ',') LIKE :tag_like ESCAPE '\')
AND (:search_like IS NULL OR a.id LIKE :search_like ESCAPE '\' OR a.type LIKE :search_like ESCAPE '\'
     OR a.tags LIKE :search_like ESCAPE '\')

-- fragment: hot_where
(:status IS NULL OR h.status = :status)
AND (:queue IS NULL OR h.queue = :queue)
AND (:type IS NULL OR h.type = :type)
AND (:tag_like IS NULL OR (',' || replace(coalesce(h.tags, ''), ' ', '') || ',') LIKE :tag_like ESCAPE '\')
AND (:search_like IS NULL OR h.id LIKE :search_like ESCAPE '\' OR h.type LIKE :search_like ESCAPE '\'
     OR h.tags LIKE :search_like ESCAPE '\')

-- fragment: staged_to_dlq
INSERT INTO jobs_dlq (id, queue, type, payload, tags, idempotency_key, priority, failure_reason, error_details,
                      fingerprint, attempt_count, worker_id, heartbeat_at, created_at, started_at, failed_at,
                      duration_ms, created_by, last_modified_by, trace_context)
SELECT h.id, h.queue, h.type, h.payload, h.tags, h.idempotency_key, h.priority, s.reason, s.error, s.fingerprint,
       h.attempt_count, h.worker_id, h.heartbeat_at, h.created_at, h.started_at, {{now}}, s.num, h.created_by,
       coalesce(s.payload, h.last_modified_by), h.trace_context
FROM staged s JOIN jobs_hot h ON h.id = s.id;
{{failures_dead}}

-- fragment: failure_line
-- The first line of an error (at most 500 characters): what a failure-history listing shows.
substr(s.error, 1, min(500, instr(s.error || char(10), char(10)) - 1))

-- fragment: failures_dead
-- The failure history row of every staged row going to the DLQ (see job_failures in schema.sql).
INSERT INTO job_failures (job_id, queue, type, attempt, outcome, failure_reason, fingerprint, error_line,
                          error_details, worker_id, failed_at)
SELECT h.id, h.queue, h.type, h.attempt_count, 'dead', s.reason, s.fingerprint, {{failure_line}}, s.error,
       h.worker_id, {{now}}
FROM staged s JOIN jobs_hot h ON h.id = s.id

-- fragment: staged_counters_failed
INSERT INTO stats_summary (queue, failed_total, last_activity_at)
SELECT queue, count(*), {{now}} FROM staged WHERE true GROUP BY queue
ON CONFLICT (queue) DO UPDATE SET failed_total = failed_total + excluded.failed_total,
                                  last_activity_at = excluded.last_activity_at

-- fragment: staged_buckets_failed
INSERT INTO metric_buckets (bucket_start, queue, outcome, failure_reason, completed_count, duration_count,
                            total_duration_ms, max_duration_ms)
SELECT strftime('%Y-%m-%d %H:%M:%S.000', 'now'), queue, 1, reason, count(*), count(num), coalesce(sum(num), 0), max(num)
FROM staged WHERE true GROUP BY queue, reason
ON CONFLICT (bucket_start, queue, outcome, failure_reason) DO UPDATE SET
    completed_count = completed_count + excluded.completed_count,
    duration_count = duration_count + excluded.duration_count,
    total_duration_ms = total_duration_ms + excluded.total_duration_ms,
    max_duration_ms = max(coalesce(max_duration_ms, excluded.max_duration_ms), coalesce(excluded.max_duration_ms, max_duration_ms))

-- fragment: staged_counters_failed_down
UPDATE stats_summary SET failed_total = max(0, failed_total - (SELECT count(*) FROM staged s WHERE s.queue = stats_summary.queue)),
                         last_activity_at = {{now}}
WHERE queue IN (SELECT queue FROM staged)

-- fragment: dlq_copy
-- A DLQ row `d` as JSON, kept in the audit log when it is displaced (see staged_displace_twins).
json_object('id', d.id, 'queue', d.queue, 'type', d.type, 'payload', d.payload, 'tags', d.tags,
            'idempotency_key', d.idempotency_key, 'priority', d.priority, 'failure_reason', d.failure_reason,
            'error_details', d.error_details, 'fingerprint', d.fingerprint, 'attempt_count', d.attempt_count,
            'worker_id', d.worker_id, 'heartbeat_at', d.heartbeat_at, 'created_at', d.created_at,
            'started_at', d.started_at, 'failed_at', d.failed_at, 'duration_ms', d.duration_ms,
            'created_by', d.created_by, 'last_modified_by', d.last_modified_by, 'trace_context', d.trace_context)

-- fragment: displaced_event
-- The event of one displaced copy (`id`, `queue`, `location`); see staged_displace_twins.
SELECT 'conflict', 'Job ' || id || ' was in two tables; its older copy in the ' || location
                   || ' was replaced (kept in the audit log)',
       json_object('job_id', id, 'queue', queue, 'location', location)

-- fragment: staged_displace_twins
-- Copies of the staged ids (moving out of hot) already in the archive or the DLQ: an older life of the
-- id, left by a race of enqueue with a move or put there by hand. The row moving out of hot is the newer
-- one and wins: each older copy is deleted, kept verbatim in the audit log (actor `system`, action
-- `displace`, details {location, copy}), announced as a `conflict` event and taken off its table's
-- counter; staged.ref says where it was. The insert into the target then never meets a duplicate key,
-- so one such row never fails the move of the others.
UPDATE staged SET ref = CASE WHEN EXISTS (SELECT 1 FROM jobs_archive a WHERE a.id = staged.id)
                             THEN CASE WHEN EXISTS (SELECT 1 FROM jobs_dlq d WHERE d.id = staged.id)
                                       THEN 'archive,dlq' ELSE 'archive' END
                             ELSE 'dlq' END
WHERE EXISTS (SELECT 1 FROM jobs_archive a WHERE a.id = staged.id)
   OR EXISTS (SELECT 1 FROM jobs_dlq d WHERE d.id = staged.id);
DELETE FROM displaced;
INSERT INTO displaced (id, queue, location, copy)
SELECT a.id, a.queue, 'archive', json_object('id', a.id, 'queue', a.queue, 'type', a.type, 'payload', a.payload, 'tags', a.tags,
                   'idempotency_key', a.idempotency_key, 'priority', a.priority, 'attempt_count', a.attempt_count,
                   'worker_id', a.worker_id, 'created_at', a.created_at, 'started_at', a.started_at,
                   'finished_at', a.finished_at, 'duration_ms', a.duration_ms, 'created_by', a.created_by,
                   'last_modified_by', a.last_modified_by, 'trace_context', a.trace_context)
FROM jobs_archive a WHERE a.id IN (SELECT id FROM staged WHERE ref IS NOT NULL)
UNION ALL
SELECT d.id, d.queue, 'dlq', {{dlq_copy}}
FROM jobs_dlq d WHERE d.id IN (SELECT id FROM staged WHERE ref IS NOT NULL);
{{displaced_report}};
UPDATE stats_summary
SET succeeded_total = max(0, succeeded_total - (SELECT count(*) FROM displaced x
                                                 WHERE x.queue = stats_summary.queue AND x.location = 'archive')),
    failed_total = max(0, failed_total - (SELECT count(*) FROM displaced x
                                           WHERE x.queue = stats_summary.queue AND x.location = 'dlq'))
WHERE queue IN (SELECT queue FROM displaced);
DELETE FROM jobs_archive WHERE id IN (SELECT id FROM displaced WHERE location = 'archive');
DELETE FROM jobs_dlq WHERE id IN (SELECT id FROM displaced WHERE location = 'dlq')

-- fragment: displaced_report
-- The audit rows and events of the temp table `displaced` (id, queue, location, copy).
INSERT INTO audit_log (actor, action, job_id, details)
SELECT 'system', 'displace', id, json_object('location', location, 'copy', json(copy)) FROM displaced;
INSERT INTO events (kind, message, data) {{displaced_event}} FROM displaced

-- fragment: staged_audit
INSERT INTO audit_log (actor, action, job_id, plan_id, details)
SELECT :actor, :action, id, :plan_id, :details FROM staged ORDER BY ord

-- fragment: item_times
-- scheduled_at and due_at of the enqueue item `j` (a json_each row): the time given, or now plus its
-- delay; with neither, not scheduled and due now.
coalesce(json_extract(j.value, '$.scheduled_at'),
         strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || json_extract(j.value, '$.delay_s') || ' seconds')),
coalesce(json_extract(j.value, '$.scheduled_at'),
         strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || json_extract(j.value, '$.delay_s') || ' seconds'),
         {{now}})

-- fragment: queue_admitted
-- The API's cap on distinct queues (Api.MaxQueues; :max_queues NULL is no cap): a job may go to :queue
-- when that queue exists or fewer than :max_queues queues do. enqueue_one_audited applies it in its
-- statement; queue_admission tells a refusal from a lost reply, and guards the general path.
(:max_queues IS NULL OR EXISTS (SELECT 1 FROM queues q WHERE q.name = :queue)
 OR (SELECT count(*) FROM queues) < :max_queues)

-- fragment: one_job_select
-- enqueue_one's INSERT of the job row from its parameters, up to the conflict clause.
INSERT INTO jobs_hot (id, queue, type, payload, tags, idempotency_key, priority, status, attempt_count,
                      scheduled_at, due_at, created_at, updated_at, created_by, trace_context)
SELECT :id, :queue, :type, :payload, :tags, NULL, :priority, 0, 0,
       coalesce(:scheduled_at, strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || :delay_s || ' seconds')),
       coalesce(:scheduled_at, strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || :delay_s || ' seconds'), {{now}}),
       {{now}}, {{now}}, :created_by, :trace_context

-- fragment: one_job_counter
-- The queue's enqueue counter, counted only when the statement just before changed a row (the job's
-- INSERT, or a row written only with it).
INSERT INTO stats_summary (queue, enqueued_total, last_activity_at)
SELECT :queue, 1, {{now}} WHERE changes() = 1
ON CONFLICT (queue) DO UPDATE SET enqueued_total = enqueued_total + excluded.enqueued_total,
                                  last_activity_at = excluded.last_activity_at

-- fragment: one_job_insert
-- enqueue_one's job row and its counter. No row back: the job went in or the statement failed (a unique
-- violation, never for a generated id), as on PostgreSQL.
{{one_job_select}};
{{one_job_counter}}

-- ---------------------------------------------------------------- schema ledger

-- name: migrations_lock
-- BEGIN IMMEDIATE already holds the single write lock.
SELECT 1 AS locked;

-- name: migrations_ensure_ledger
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     INTEGER NOT NULL PRIMARY KEY,
    name        TEXT    NOT NULL,
    applied_at  TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);

-- name: migrations_applied
SELECT version, name, applied_at FROM schema_migrations ORDER BY version;

-- name: migrations_record
INSERT INTO schema_migrations (version, name) VALUES (:version, :name);

-- name: schema_has_jobs
SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'jobs_hot';

-- name: schema_ledger_exists
SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations';

-- name: mark_idle
-- PostgreSQL's NOTIFY gate; SQLite workers watch the file instead (PRAGMA data_version): nothing to mark.
SELECT :worker_id AS worker_id;

-- name: unmark_idle
SELECT :worker_id AS worker_id;

-- name: next_due
-- Seconds from now until the earliest pending job that is not due yet is due, of the named queues
-- (:queues, null for every queue); no row when none waits. The idle worker's timer.
SELECT (julianday(h.due_at) - julianday({{now}})) * 86400.0 AS wait_s FROM jobs_hot h INDEXED BY ix_jobs_hot_due
WHERE h.status = 0 AND h.scheduled_at IS NOT NULL AND h.due_at > {{now}}
  AND (:queues IS NULL OR h.queue IN (SELECT value FROM json_each(:queues)))
ORDER BY h.due_at LIMIT 1;

-- name: db_now
SELECT {{now}} AS now_at;

-- ---------------------------------------------------------------- producer

-- name: enqueue
-- Inserts new jobs; an idempotency key already held by a hot job (or by an earlier item of the same
-- batch), or an id already used anywhere, inserts nothing for that item.
{{staging}};
DELETE FROM staged;
INSERT INTO staged (id, ord, key, status)
SELECT json_extract(j.value, '$.id'), json_extract(j.value, '$.ord'), json_extract(j.value, '$.idempotency_key'), 'new'
FROM json_each(:items) j;
UPDATE staged SET status = 'duplicate', ref = (SELECT h.id FROM jobs_hot h WHERE h.idempotency_key = staged.key)
WHERE key IS NOT NULL AND EXISTS (SELECT 1 FROM jobs_hot h WHERE h.idempotency_key = staged.key);
UPDATE staged SET status = 'duplicate',
                  ref = (SELECT s2.id FROM staged s2 WHERE s2.key = staged.key AND s2.status = 'new' ORDER BY s2.ord LIMIT 1)
WHERE status = 'new' AND key IS NOT NULL
  AND EXISTS (SELECT 1 FROM staged s2 WHERE s2.key = staged.key AND s2.status = 'new' AND s2.ord < staged.ord);
UPDATE staged SET status = 'conflict'
WHERE status = 'new' AND (EXISTS (SELECT 1 FROM jobs_hot h WHERE h.id = staged.id)
                          OR EXISTS (SELECT 1 FROM jobs_archive a WHERE a.id = staged.id)
                          OR EXISTS (SELECT 1 FROM jobs_dlq d WHERE d.id = staged.id));
INSERT INTO jobs_hot (id, queue, type, payload, tags, idempotency_key, priority, status, attempt_count,
                      scheduled_at, due_at, created_at, updated_at, created_by, trace_context)
SELECT s.id, json_extract(j.value, '$.queue'), json_extract(j.value, '$.type'), json_extract(j.value, '$.payload'),
       json_extract(j.value, '$.tags'), s.key, json_extract(j.value, '$.priority'), 0, 0,
       {{item_times}},
       {{now}}, {{now}}, json_extract(j.value, '$.created_by'), json_extract(j.value, '$.trace_context')
FROM json_each(:items) j JOIN staged s ON s.id = json_extract(j.value, '$.id')
WHERE s.status = 'new'
ORDER BY s.ord;
INSERT INTO queues (name)
SELECT DISTINCT h.queue FROM staged s JOIN jobs_hot h ON h.id = s.id WHERE s.status = 'new'
ON CONFLICT DO NOTHING;
INSERT INTO stats_summary (queue, enqueued_total, last_activity_at)
SELECT h.queue, count(*), {{now}} FROM staged s JOIN jobs_hot h ON h.id = s.id WHERE s.status = 'new' GROUP BY h.queue
ON CONFLICT (queue) DO UPDATE SET enqueued_total = enqueued_total + excluded.enqueued_total,
                                  last_activity_at = excluded.last_activity_at;
SELECT ord, coalesce(ref, id) AS id, status FROM staged ORDER BY ord;

-- name: enqueue_one
-- enqueue's lean form for the commonest call: one job, an id the store generated (so it cannot be in the
-- archive or the DLQ) and no idempotency key: plain statements in the one writer transaction, no
-- staging. Nothing comes back (see one_job_insert); a call whose reply was lost goes again by `enqueue`
-- (Producer._enqueue_unsure). Each statement here costs about a tenth of the call: no SELECT after.
{{one_job_insert}};
INSERT INTO queues (name) VALUES (:queue) ON CONFLICT DO NOTHING;

-- name: enqueue_one_known
-- enqueue_one for a queue whose row the producer saw committed a moment ago (Producer, KNOWN_QUEUE_S).
{{one_job_insert}};

-- name: enqueue_one_audited
-- enqueue_one on an operator's behalf (the API's POST /jobs of a job with a generated id and no
-- idempotency key), in the one writer transaction: the job, then each later row only when the statement
-- before it changed one (`changes()`): the audit row, the counter, the queue row. With :max_queues, a job
-- for a queue that does not exist yet goes in only while fewer than that many queues exist; no row back
-- then, and the store reads queue_admission to tell why.
{{one_job_select}}
WHERE {{queue_admitted}}
ON CONFLICT DO NOTHING
RETURNING 0 AS ord, id, 'new' AS status;
INSERT INTO audit_log (actor, action, job_id, count) SELECT :actor, 'enqueue', :id, 1 WHERE changes() = 1;
{{one_job_counter}};
INSERT INTO queues (name) SELECT :queue WHERE changes() = 1 ON CONFLICT DO NOTHING;

-- fragment: fresh_insert
-- enqueue_fresh's counters and jobs, and how many it inserted. The counters first, of the items not in hot
-- yet: exactly those the INSERT then inserts (one writer transaction).
INSERT INTO stats_summary (queue, enqueued_total, last_activity_at)
SELECT json_extract(j.value, '$.queue'), count(*), {{now}} FROM json_each(:items) j
WHERE NOT EXISTS (SELECT 1 FROM jobs_hot h WHERE h.id = json_extract(j.value, '$.id'))
GROUP BY json_extract(j.value, '$.queue')
ON CONFLICT (queue) DO UPDATE SET enqueued_total = enqueued_total + excluded.enqueued_total,
                                  last_activity_at = excluded.last_activity_at;
INSERT INTO jobs_hot (id, queue, type, payload, tags, idempotency_key, priority, status, attempt_count,
                      scheduled_at, due_at, created_at, updated_at, created_by, trace_context)
SELECT json_extract(j.value, '$.id'), json_extract(j.value, '$.queue'), json_extract(j.value, '$.type'),
       json_extract(j.value, '$.payload'), json_extract(j.value, '$.tags'), NULL,
       json_extract(j.value, '$.priority'), 0, 0,
       {{item_times}},
       {{now}}, {{now}}, json_extract(j.value, '$.created_by'), json_extract(j.value, '$.trace_context')
FROM json_each(:items) j
-- `WHERE true`: SQLite's parser needs it between a SELECT and ON CONFLICT.
WHERE true
ON CONFLICT DO NOTHING;
SELECT changes() AS n

-- name: enqueue_fresh
-- enqueue_one for several jobs: enqueue_many of jobs with generated ids and no idempotency keys, and
-- single-job enqueues of concurrent threads that the producer sends together (storage/combining.py), as
-- enqueue_one's. One row back: how many jobs it inserted.
{{fresh_insert}};
INSERT INTO queues (name)
SELECT DISTINCT json_extract(j.value, '$.queue') FROM json_each(:items) j WHERE true ON CONFLICT DO NOTHING;

-- name: enqueue_fresh_known
-- enqueue_fresh when every item's queue row was seen committed a moment ago (KNOWN_QUEUE_S).
{{fresh_insert}};

-- name: find_idempotency_keys
SELECT idempotency_key, id FROM jobs_hot WHERE idempotency_key IN (SELECT value FROM json_each(:keys));

-- name: enqueue_undo_raced
-- PostgreSQL's second look at an enqueue's explicit ids (see there). SQLite runs the enqueue as one
-- writer transaction, which no move can interleave with, so the store never calls it here.
SELECT a.id FROM jobs_archive a WHERE a.id IN (SELECT value FROM json_each(:ids))
UNION
SELECT d.id FROM jobs_dlq d WHERE d.id IN (SELECT value FROM json_each(:ids));

-- name: enqueued_unseen
-- After an enqueue that may have committed and lost its reply: which of :items (the enqueue's own
-- items) exist, in any table, with the content that enqueue sent.
WITH items AS (
    SELECT json_extract(j.value, '$.id') AS id, json_extract(j.value, '$.queue') AS queue,
           json_extract(j.value, '$.type') AS type, json_extract(j.value, '$.payload') AS payload,
           json_extract(j.value, '$.tags') AS tags, json_extract(j.value, '$.idempotency_key') AS idempotency_key,
           json_extract(j.value, '$.priority') AS priority, json_extract(j.value, '$.created_by') AS created_by
    FROM json_each(:items) j
),
found AS (
    SELECT id, queue, type, payload, tags, idempotency_key, priority, created_by
    FROM jobs_hot WHERE id IN (SELECT id FROM items)
    UNION ALL
    SELECT id, queue, type, payload, tags, idempotency_key, priority, created_by
    FROM jobs_archive WHERE id IN (SELECT id FROM items)
    UNION ALL
    SELECT id, queue, type, payload, tags, idempotency_key, priority, created_by
    FROM jobs_dlq WHERE id IN (SELECT id FROM items)
)
SELECT f.id FROM found f JOIN items i ON i.id = f.id
WHERE f.queue = i.queue AND f.type = i.type AND f.payload IS i.payload AND f.tags IS i.tags
  AND f.idempotency_key IS i.idempotency_key AND f.priority = i.priority AND f.created_by IS i.created_by;

-- ---------------------------------------------------------------- worker (every write is fenced by worker_id)

-- name: lock_capped_queues
-- Nothing to do: a SQLite fetch runs under the single write lock, so max_workers is always exact.
SELECT name FROM queues WHERE 0;

-- name: fetch
-- Claims up to :limit due pending jobs, priority first then due time; queues with max_workers get at
-- most (max_workers - fetched - processing) of them. Every source is read in index order and stops
-- early (CROSS JOIN keeps the few queue names as the outer loop).
-- - Any queue: the first 4 x :limit due jobs of ix_jobs_hot_fetch, minus paused/inactive/capped queues.
-- - Only when those yield too few (a paused or capped queue's backlog at the top of the index): each
--   other queue with pending jobs from ix_jobs_hot_queue_fetch, the queues found by a loose index scan.
--   Filtering one scan of the whole index walked that backlog on every claim (0.9 s at 1M pending).
-- - Named queues (:queues) and capped queues one by one from ix_jobs_hot_queue_fetch.
-- Claim-and-start: the first :start rows in claim order (priority, due time, id) go straight to
-- processing (attempt + 1, started_at and heartbeat_at now), for execution slots the worker holds free
-- for them; the rest are fetched. Each row comes back with its status.
WITH RECURSIVE named AS (SELECT DISTINCT value AS name FROM json_each(:queues)),
free_head AS MATERIALIZED (
    SELECT h.id, h.priority, h.due_at
    FROM (SELECT id FROM jobs_hot INDEXED BY ix_jobs_hot_fetch
          WHERE :queues IS NULL AND status = 0 AND due_at <= {{now}}
          ORDER BY priority DESC, due_at LIMIT 4 * :limit) t
    CROSS JOIN jobs_hot h
    WHERE h.id = t.id
      AND NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = h.queue
                      AND (q.paused OR NOT q.active OR q.max_workers IS NOT NULL))
    ORDER BY h.priority DESC, h.due_at
    LIMIT :limit
),
pending_queues (name) AS (
    SELECT (SELECT queue FROM jobs_hot INDEXED BY ix_jobs_hot_queue_fetch WHERE status = 0
            ORDER BY queue LIMIT 1)
    WHERE :queues IS NULL AND (SELECT count(*) FROM free_head) < :limit
    UNION ALL
    SELECT (SELECT x.queue FROM jobs_hot x INDEXED BY ix_jobs_hot_queue_fetch
            WHERE x.status = 0 AND x.queue > pq.name ORDER BY x.queue LIMIT 1)
    FROM pending_queues pq WHERE pq.name IS NOT NULL
),
spill AS (
    SELECT h.id, h.priority, h.due_at FROM pending_queues pq CROSS JOIN jobs_hot h
    WHERE pq.name IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = pq.name
                      AND (q.paused OR NOT q.active OR q.max_workers IS NOT NULL))
      AND h.id IN (SELECT x.id FROM jobs_hot x INDEXED BY ix_jobs_hot_queue_fetch
                   WHERE x.queue = pq.name AND x.status = 0 AND x.due_at <= {{now}}
                   ORDER BY x.priority DESC, x.due_at LIMIT :limit)
),
free_named AS (
    SELECT h.id, h.priority, h.due_at FROM named n CROSS JOIN jobs_hot h
    WHERE NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = n.name
                      AND (q.paused OR NOT q.active OR q.max_workers IS NOT NULL))
      AND h.id IN (SELECT x.id FROM jobs_hot x INDEXED BY ix_jobs_hot_queue_fetch
                   WHERE x.queue = n.name AND x.status = 0 AND x.due_at <= {{now}}
                   ORDER BY x.priority DESC, x.due_at LIMIT :limit)
),
capped AS (
    SELECT q.name, q.max_workers - (SELECT count(*) FROM jobs_hot a WHERE a.queue = q.name AND a.status IN (1, 2))
           AS slots
    FROM queues q
    WHERE q.max_workers IS NOT NULL AND NOT q.paused AND q.active
      AND (:queues IS NULL OR q.name IN (SELECT name FROM named))
),
ranked AS (
    SELECT h.id, h.priority, h.due_at, c.slots,
           row_number() OVER (PARTITION BY h.queue ORDER BY h.priority DESC, h.due_at) AS rn
    FROM capped c CROSS JOIN jobs_hot h
    WHERE c.slots > 0
      AND h.id IN (SELECT x.id FROM jobs_hot x INDEXED BY ix_jobs_hot_queue_fetch
                   WHERE x.queue = c.name AND x.status = 0 AND x.due_at <= {{now}}
                   ORDER BY x.priority DESC, x.due_at LIMIT :limit)
),
picked AS (
    -- DISTINCT: a row of the head can come back from its queue's spill scan too.
    SELECT id, row_number() OVER (ORDER BY priority DESC, due_at, id) <= :start AS go
    FROM (SELECT DISTINCT id, priority, due_at FROM (
                        SELECT id, priority, due_at FROM free_head
                        UNION ALL SELECT id, priority, due_at FROM spill
                        UNION ALL SELECT id, priority, due_at FROM free_named
                        UNION ALL SELECT id, priority, due_at FROM ranked WHERE rn <= slots))
    ORDER BY priority DESC, due_at, id LIMIT :limit
)
{{claim_and_start}};

-- name: fetch_head
-- The claim of `fetch` restricted to its first source (see the PostgreSQL file): the first 4 x :limit
-- due jobs of ix_jobs_hot_fetch, minus paused and inactive queues; nothing while any queue is capped.
-- Claim-and-start as in fetch.
WITH free_head AS MATERIALIZED (
    SELECT h.id, h.priority, h.due_at
    FROM (SELECT id FROM jobs_hot INDEXED BY ix_jobs_hot_fetch
          WHERE status = 0 AND due_at <= {{now}}
            AND NOT EXISTS (SELECT 1 FROM queues c WHERE c.max_workers IS NOT NULL AND NOT c.paused AND c.active)
          ORDER BY priority DESC, due_at LIMIT 4 * :limit) t
    CROSS JOIN jobs_hot h
    WHERE h.id = t.id
      AND NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = h.queue
                      AND (q.paused OR NOT q.active OR q.max_workers IS NOT NULL))
    ORDER BY h.priority DESC, h.due_at, h.id
    LIMIT :limit
),
picked AS (
    SELECT id, row_number() OVER (ORDER BY priority DESC, due_at, id) <= :start AS go FROM free_head
)
{{claim_and_start}};

-- name: mark_processing
UPDATE jobs_hot SET status = 2, attempt_count = attempt_count + 1, started_at = {{now}}, heartbeat_at = {{now}},
                    updated_at = {{now}}
WHERE id IN (SELECT value FROM json_each(:ids)) AND worker_id = :worker_id AND status = 1
RETURNING id, attempt_count, started_at;

-- name: owned_processing
SELECT id, attempt_count, started_at FROM jobs_hot
WHERE id IN (SELECT value FROM json_each(:ids)) AND worker_id = :worker_id AND status = 2;

-- name: heartbeat
-- SQLite has no row locks (one writer at a time): every owned row is beaten.
UPDATE jobs_hot SET heartbeat_at = {{now}}, updated_at = {{now}}
WHERE id IN (SELECT value FROM json_each(:ids)) AND worker_id = :worker_id AND status = 2
RETURNING id, 1 AS beat;

-- name: release
UPDATE jobs_hot SET status = 0, worker_id = NULL, updated_at = {{now}}
WHERE id IN (SELECT value FROM json_each(:ids)) AND worker_id = :worker_id AND status = 1
RETURNING id;

-- name: release_unstarted
UPDATE jobs_hot SET status = 0, worker_id = NULL, attempt_count = max(attempt_count - 1, 0),
                    heartbeat_at = NULL, updated_at = {{now}}
WHERE id IN (SELECT value FROM json_each(:ids)) AND worker_id = :worker_id AND status = 2
RETURNING id;

-- name: recover_claims
-- Rows a claim of this worker committed although its reply was lost (see the PostgreSQL file).
UPDATE jobs_hot SET status = 1, updated_at = {{now}},
                    attempt_count = CASE WHEN status = 2 THEN max(attempt_count - 1, 0) ELSE attempt_count END,
                    heartbeat_at = CASE WHEN status = 2 THEN NULL ELSE heartbeat_at END
WHERE worker_id = :worker_id AND status IN (1, 2) AND id NOT IN (SELECT value FROM json_each(:ids))
RETURNING {{claimed_columns}};

-- name: finished_unseen
-- After a finishing write that failed transiently: which of :items this worker's write did apply (see
-- the PostgreSQL file).
WITH items AS (
    SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.kind') AS kind,
           json_extract(value, '$.reason') AS reason, json_extract(value, '$.error') AS error
    FROM json_each(:items)
)
SELECT a.id FROM items i JOIN jobs_archive a ON a.id = i.id
WHERE i.kind = 'ok' AND a.worker_id = :worker_id
UNION ALL
SELECT d.id FROM items i JOIN jobs_dlq d ON d.id = i.id
WHERE i.kind = 'dead' AND d.worker_id = :worker_id AND d.failure_reason = i.reason
UNION ALL
SELECT h.id FROM items i JOIN jobs_hot h ON h.id = i.id
WHERE i.kind = 'retry' AND NOT (h.status = 2 AND h.worker_id IS :worker_id) AND h.last_error IS i.error;

-- fragment: archive_stage
-- The worker's own processing rows among :items, staged with their durations.
{{staging}};
DELETE FROM staged;
INSERT INTO staged (id, queue, num)
SELECT h.id, h.queue, json_extract(j.value, '$.duration_ms')
FROM json_each(:items) j JOIN jobs_hot h ON h.id = json_extract(j.value, '$.id')
WHERE h.worker_id = :worker_id AND h.status = 2

-- fragment: archive_rest
INSERT INTO jobs_archive (id, queue, type, payload, tags, idempotency_key, priority, attempt_count, worker_id,
                          created_at, started_at, finished_at, duration_ms, created_by, last_modified_by,
                          failure_count, trace_context)
SELECT h.id, h.queue, h.type, h.payload, h.tags, h.idempotency_key, h.priority, h.attempt_count, h.worker_id,
       h.created_at, h.started_at, {{now}}, s.num, h.created_by, h.last_modified_by,
       (SELECT count(*) FROM job_failures f WHERE f.job_id = h.id), h.trace_context
FROM staged s JOIN jobs_hot h ON h.id = s.id;
INSERT INTO stats_summary (queue, succeeded_total, last_activity_at)
SELECT queue, count(*), {{now}} FROM staged WHERE true GROUP BY queue
ON CONFLICT (queue) DO UPDATE SET succeeded_total = succeeded_total + excluded.succeeded_total,
                                  last_activity_at = excluded.last_activity_at;
INSERT INTO metric_buckets (bucket_start, queue, outcome, failure_reason, completed_count, duration_count,
                            total_duration_ms, max_duration_ms)
SELECT strftime('%Y-%m-%d %H:%M:%S.000', 'now'), queue, 0, -1, count(*), count(num), coalesce(sum(num), 0), max(num)
FROM staged WHERE true GROUP BY queue
ON CONFLICT (bucket_start, queue, outcome, failure_reason) DO UPDATE SET
    completed_count = completed_count + excluded.completed_count,
    duration_count = duration_count + excluded.duration_count,
    total_duration_ms = total_duration_ms + excluded.total_duration_ms,
    max_duration_ms = max(coalesce(max_duration_ms, excluded.max_duration_ms), coalesce(excluded.max_duration_ms, max_duration_ms));
DELETE FROM jobs_hot WHERE id IN (SELECT id FROM staged);
SELECT id, queue, ref AS twin FROM staged

-- name: archive_succeeded
-- Leaves copies of the ids in other tables alone (a copy in the archive fails it on the duplicate key,
-- and the store runs archive_succeeded_displacing instead): displacing costs statements in every call.
{{archive_stage}};
{{archive_rest}};

-- name: archive_succeeded_displacing
-- archive_succeeded for rows whose id has a copy in the archive or the DLQ: see staged_displace_twins.
{{archive_stage}};
{{staged_displace_twins}};
{{archive_rest}};

-- fragment: dead_stage
-- The worker's own processing rows among :items, staged with reason, error, fingerprint and duration.
{{staging}};
DELETE FROM staged;
INSERT INTO staged (id, queue, reason, error, fingerprint, num)
SELECT h.id, h.queue, json_extract(j.value, '$.reason'), json_extract(j.value, '$.error'),
       json_extract(j.value, '$.fingerprint'), json_extract(j.value, '$.duration_ms')
FROM json_each(:items) j JOIN jobs_hot h ON h.id = json_extract(j.value, '$.id')
WHERE h.worker_id = :worker_id AND h.status = 2

-- fragment: dead_rest
{{staged_to_dlq}};
{{staged_counters_failed}};
{{staged_buckets_failed}};
INSERT INTO events (kind, message, data)
SELECT 'dlq', 'Job ' || h.id || ' (' || h.type || ') dead: '
              || coalesce((SELECT r.name FROM failure_reasons r WHERE r.code = s.reason), 'reason ' || s.reason),
       json_object('job_id', h.id, 'queue', h.queue, 'type', h.type, 'reason', s.reason)
FROM staged s JOIN jobs_hot h ON h.id = s.id;
DELETE FROM jobs_hot WHERE id IN (SELECT id FROM staged);
SELECT id, queue, reason AS failure_reason, ref AS twin FROM staged

-- name: move_to_dlq
{{dead_stage}};
{{dead_rest}};

-- name: move_to_dlq_displacing
-- move_to_dlq for rows whose id has a copy in the archive or the DLQ: see staged_displace_twins.
{{dead_stage}};
{{staged_displace_twins}};
{{dead_rest}};

-- name: reschedule
{{staging}};
DELETE FROM staged;
INSERT INTO staged (id, queue, num, error, fingerprint)
SELECT h.id, h.queue, json_extract(j.value, '$.delay_s'), json_extract(j.value, '$.error'),
       json_extract(j.value, '$.fingerprint')
FROM json_each(:items) j JOIN jobs_hot h ON h.id = json_extract(j.value, '$.id')
WHERE h.worker_id = :worker_id AND h.status = 2;
-- A retried attempt is a failure too (reason Transient): the history keeps it after the job succeeds.
INSERT INTO job_failures (job_id, queue, type, attempt, outcome, failure_reason, fingerprint, error_line,
                          error_details, worker_id, failed_at)
SELECT h.id, h.queue, h.type, h.attempt_count, 'retry', 8, s.fingerprint, {{failure_line}}, s.error,
       h.worker_id, {{now}}
FROM staged s JOIN jobs_hot h ON h.id = s.id;
UPDATE jobs_hot SET status = 0, worker_id = NULL, heartbeat_at = NULL,
    scheduled_at = (SELECT strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || s.num || ' seconds') FROM staged s WHERE s.id = jobs_hot.id),
    due_at = (SELECT strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || s.num || ' seconds') FROM staged s WHERE s.id = jobs_hot.id),
    last_error = (SELECT s.error FROM staged s WHERE s.id = jobs_hot.id),
    updated_at = {{now}}
WHERE id IN (SELECT id FROM staged);
INSERT INTO stats_summary (queue, retried_total, last_activity_at)
SELECT queue, count(*), {{now}} FROM staged WHERE true GROUP BY queue
ON CONFLICT (queue) DO UPDATE SET retried_total = retried_total + excluded.retried_total,
                                  last_activity_at = excluded.last_activity_at;
SELECT s.id, s.queue, h.scheduled_at FROM staged s JOIN jobs_hot h ON h.id = s.id;

-- ---------------------------------------------------------------- rescue

-- name: recover_abandoned
-- One batch of phase 1: the :batch oldest fetched rows untouched for :timeout_s go back to pending.
UPDATE jobs_hot SET status = 0, worker_id = NULL, updated_at = {{now}}
WHERE id IN (SELECT id FROM jobs_hot
             WHERE status = 1 AND updated_at < strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || :timeout_s || ' seconds')
             ORDER BY updated_at LIMIT :batch)
RETURNING id, queue;

-- name: archive_zombies
-- One batch of phase 2: the :batch stalest expired processing rows (the sweep calls it until a batch
-- comes back short). Timeout: queue row, else the configured per-queue value (:overrides, {"queue": seconds}), else :global_s.
{{staging}};
DELETE FROM staged;
INSERT INTO staged (id, queue, key, reason, fingerprint, num, error)
SELECT h.id, h.queue, h.worker_id, 2, :fingerprint,
       (julianday(coalesce(h.heartbeat_at, h.updated_at)) - julianday(h.started_at)) * 86400000.0,
       'Zombie detected: heartbeat expired; last heartbeat '
           || coalesce(replace(h.heartbeat_at, ' ', 'T') || 'Z', 'never')
           || ' (' || round((julianday('now') - julianday(coalesce(h.heartbeat_at, h.updated_at))) * 86400.0, 1)
           || 's before detection), worker ' || coalesce(h.worker_id, 'unknown')
           || ', runtime ' || coalesce(round((julianday(coalesce(h.heartbeat_at, h.updated_at))
                                               - julianday(h.started_at)) * 86400.0, 1) || 's', 'unknown')
           || ', attempt ' || h.attempt_count
FROM jobs_hot h
LEFT JOIN queues q ON q.name = h.queue
WHERE h.status = 2
  -- The shortest timeout any row can have bounds the index scan, so live processing rows are not read.
  AND coalesce(h.heartbeat_at, h.updated_at) < strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || (
      SELECT min(s) FROM (SELECT :global_s AS s UNION ALL SELECT CAST(value AS REAL) FROM json_each(:overrides)
                          UNION ALL SELECT zombie_timeout_seconds FROM queues)) || ' seconds')
  AND coalesce(h.heartbeat_at, h.updated_at) < strftime('%Y-%m-%d %H:%M:%f', 'now',
      -- json_each, not a '$."name"' path: a path misses names with quotes, backslashes or non-ASCII characters.
      '-' || coalesce(q.zombie_timeout_seconds, (SELECT o.value FROM json_each(:overrides) o WHERE o.key = h.queue),
                      :global_s) || ' seconds')
  -- :not_after: the sweep's decision expires (a process paused after it decided runs this too late).
  AND (:not_after IS NULL OR {{now}} <= :not_after)
ORDER BY coalesce(h.heartbeat_at, h.updated_at) LIMIT :batch;
{{staged_displace_twins}};
{{staged_to_dlq}};
{{staged_counters_failed}};
{{staged_buckets_failed}};
DELETE FROM jobs_hot WHERE id IN (SELECT id FROM staged);
SELECT id, queue, key AS worker_id, ref AS twin FROM staged;

-- name: try_lease
INSERT INTO leases (name, holder, expires_at)
VALUES (:name, :holder, strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || :ttl_s || ' seconds'))
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
WHERE leases.expires_at <= {{now}} OR leases.holder = excluded.holder
RETURNING holder, expires_at;

-- name: release_lease
DELETE FROM leases WHERE name = :name AND holder = :holder;

-- name: add_event
INSERT INTO events (kind, message, data) VALUES (:kind, :message, :data) RETURNING id;

-- ---------------------------------------------------------------- operator mutations (audited)

-- name: edit_pending
INSERT INTO audit_log (actor, action, job_id, plan_id, details)
SELECT :actor, 'edit_pending', id, :plan_id,
       json_object('before', json_object('payload', payload, 'tags', tags, 'priority', priority),
                   'after', json_object('payload', coalesce(:payload, payload), 'tags', coalesce(:tags, tags),
                                        'priority', coalesce(:priority, priority)))
FROM jobs_hot WHERE id = :id AND status = 0;
INSERT INTO events (kind, message, data)
SELECT 'edit', 'Job ' || id || ' edited by ' || :actor,
       json_object('job_id', id, 'location', 'hot', 'actor', :actor, 'plan_id', :plan_id)
FROM jobs_hot WHERE id = :id AND status = 0;
UPDATE jobs_hot SET payload = coalesce(:payload, payload), tags = coalesce(:tags, tags),
                    priority = coalesce(:priority, priority), last_modified_by = :actor, updated_at = {{now}}
WHERE id = :id AND status = 0
RETURNING id;

-- name: edit_dlq
INSERT INTO audit_log (actor, action, job_id, plan_id, details)
SELECT :actor, 'edit_dlq', id, :plan_id,
       json_object('before', json_object('payload', payload, 'tags', tags),
                   'after', json_object('payload', coalesce(:payload, payload), 'tags', coalesce(:tags, tags)))
FROM jobs_dlq WHERE id = :id;
INSERT INTO events (kind, message, data)
SELECT 'edit', 'Job ' || id || ' edited by ' || :actor,
       json_object('job_id', id, 'location', 'dlq', 'actor', :actor, 'plan_id', :plan_id)
FROM jobs_dlq WHERE id = :id;
UPDATE jobs_dlq SET payload = coalesce(:payload, payload), tags = coalesce(:tags, tags), last_modified_by = :actor
WHERE id = :id
RETURNING id;

-- fragment: resurrect_rest
-- What every resurrect does with the DLQ rows in `staged` (payload/tags/priority: replacements or
-- null; status plain/edited): insert them into hot, count, audit per job, one event, delete. A row whose
-- id is already in hot (a job in two tables, see staged_displace_twins) is not inserted (staged.key =
-- 'hot'): the hot job is the live one, so the DLQ copy is the one displaced to the audit log, with an
-- event; it never fails the other rows.
UPDATE staged SET key = 'hot' WHERE EXISTS (SELECT 1 FROM jobs_hot h WHERE h.id = staged.id);
DELETE FROM displaced;
INSERT INTO displaced (id, queue, location, copy)
SELECT d.id, d.queue, 'dlq', {{dlq_copy}}
FROM jobs_dlq d WHERE d.id IN (SELECT id FROM staged WHERE key = 'hot');
{{displaced_report}};
-- trace_context: a resurrected job keeps its producer's trace, so its next run links to it.
INSERT INTO jobs_hot (id, queue, type, payload, tags, idempotency_key, priority, status, attempt_count,
                      due_at, created_at, updated_at, created_by, last_modified_by, trace_context, renewed_at)
SELECT d.id, d.queue, d.type, coalesce(s.payload, d.payload), coalesce(s.tags, d.tags), NULL,
       coalesce(s.priority, 10), 0, 0,
       -- :spread_s: due times jittered uniformly over that window (0: due now), so a bulk resurrect of
       -- still-failing jobs does not come back as one synchronized wave (docs/api.md "spread").
       strftime('%Y-%m-%d %H:%M:%f', julianday('now') + (abs(random()) % 1000000) / 1000000.0 * :spread_s / 86400.0),
       d.created_at, {{now}}, d.created_by, :actor, d.trace_context,
       -- :renew = 1: the retry budget is renewed, the lifetime clock (Retry.MaxJobAge) restarts now
       -- (attempts restart at 0 either way); 0 keeps the clock at created_at.
       CASE WHEN :renew = 1 THEN {{now}} END
FROM staged s JOIN jobs_dlq d ON d.id = s.id WHERE s.key IS NULL;
INSERT INTO queues (name) SELECT DISTINCT queue FROM staged WHERE true ON CONFLICT DO NOTHING;
{{staged_counters_failed_down}};
INSERT INTO audit_log (actor, action, job_id, plan_id, details)
SELECT :actor, 'resurrect', s.id, :plan_id,
       -- The failure it came back from (reason, fingerprint): the audit keeps the outage's identity.
       json_set(CASE WHEN s.status = 'plain' THEN coalesce(:details, '{}')
                       ELSE json_object('filter', json(:details),
                                        'before', json_object('payload', d.payload, 'tags', d.tags),
                                        'after', json_object('payload', coalesce(s.payload, d.payload),
                                                             'tags', coalesce(s.tags, d.tags),
                                                             'priority', coalesce(s.priority, 10))) END,
                '$.failure_reason', (SELECT r.name FROM failure_reasons r WHERE r.code = d.failure_reason),
                '$.fingerprint', d.fingerprint, '$.renewed', json(CASE WHEN :renew = 1 THEN 'true' ELSE 'false' END))
FROM staged s JOIN jobs_dlq d ON d.id = s.id WHERE s.key IS NULL ORDER BY s.ord;
INSERT INTO events (kind, message, data)
SELECT 'resurrect', 'Resurrected ' || count(*) || ' job(s) by ' || :actor,
       json_object('count', count(*), 'actor', :actor, 'plan_id', :plan_id)
FROM staged WHERE key IS NULL HAVING count(*) > 0;
DELETE FROM jobs_dlq WHERE id IN (SELECT id FROM staged)

-- name: resurrect
{{staging}};
DELETE FROM staged;
INSERT INTO staged (id, queue, ord, payload, tags, priority, status)
SELECT d.id, d.queue, j.key, json_extract(j.value, '$.payload'), json_extract(j.value, '$.tags'),
       json_extract(j.value, '$.priority'),
       CASE WHEN json_extract(j.value, '$.payload') IS NULL AND json_extract(j.value, '$.tags') IS NULL
                 AND json_extract(j.value, '$.priority') IS NULL THEN 'plain' ELSE 'edited' END
FROM json_each(:items) j JOIN jobs_dlq d ON d.id = json_extract(j.value, '$.id');
{{resurrect_rest}};
SELECT id, queue, key AS twin FROM staged ORDER BY ord;

-- name: resurrect_matching
-- resurrect for the next :limit jobs matching a filter (newest failures first), chosen in the same
-- transaction: one round trip per chunk instead of two. :before_at/:before_id, when set, continue after
-- the previous chunk's last row (failed_at DESC, id order).
{{staging}};
DELETE FROM staged;
INSERT INTO staged (id, queue, ref, ord, status)
SELECT id, queue, failed_at, row_number() OVER (), 'plain'
FROM (SELECT d.id, d.queue, d.failed_at FROM jobs_dlq d
      WHERE {{dlq_where}}
        AND (:before_at IS NULL
             OR (d.failed_at <= :before_at AND (d.failed_at < :before_at OR d.id > :before_id)))
      ORDER BY d.failed_at DESC, d.id LIMIT :limit);
{{resurrect_rest}};
SELECT (SELECT count(*) FROM staged WHERE key IS NULL) AS n, (SELECT count(*) FROM staged WHERE key = 'hot') AS twins,
       ref AS cursor_at, id AS cursor_id
FROM staged ORDER BY ref, id DESC LIMIT 1;

-- name: cancel
{{staging}};
DELETE FROM staged;
INSERT INTO staged (id, queue, ord, reason, error, fingerprint, payload)
SELECT h.id, h.queue, j.key, 1, 'Cancelled by admin: ' || :actor, :fingerprint, :actor
FROM json_each(:ids) j JOIN jobs_hot h ON h.id = j.value
WHERE h.status IN (0, 1);
{{staged_displace_twins}};
{{staged_to_dlq}};
{{staged_counters_failed}};
{{staged_buckets_failed}};
{{staged_audit}};
INSERT INTO events (kind, message, data)
SELECT 'cancel', 'Cancelled ' || count(*) || ' job(s) by ' || :actor,
       json_object('count', count(*), 'actor', :actor, 'plan_id', :plan_id)
FROM staged HAVING count(*) > 0;
DELETE FROM jobs_hot WHERE id IN (SELECT id FROM staged);
SELECT id, ref AS twin FROM staged ORDER BY ord;

-- fragment: purge_dlq_rest
-- What every DLQ purge does with the rows in `staged`: counters, audit per job, one event, delete.
{{staged_counters_failed_down}};
{{staged_audit}};
INSERT INTO events (kind, message, data)
SELECT 'purge', 'Purged ' || count(*) || ' dead job(s) by ' || :actor,
       json_object('count', count(*), 'actor', :actor, 'plan_id', :plan_id)
FROM staged HAVING count(*) > 0;
DELETE FROM jobs_dlq WHERE id IN (SELECT id FROM staged)

-- name: purge_dlq
{{staging}};
DELETE FROM staged;
INSERT INTO staged (id, queue, ord)
SELECT d.id, d.queue, row_number() OVER (ORDER BY d.failed_at, d.id)
FROM jobs_dlq d WHERE d.id IN (SELECT value FROM json_each(:ids))
ORDER BY d.failed_at, d.id LIMIT :batch;
{{purge_dlq_rest}};
SELECT id FROM staged ORDER BY ord;

-- name: purge_dlq_matching
-- purge_dlq for the next :limit jobs matching a filter (newest failures first), chosen in the same
-- transaction: one round trip per chunk instead of two. :before_at/:before_id: as for resurrect_matching.
{{staging}};
DELETE FROM staged;
INSERT INTO staged (id, queue, ref, ord)
SELECT id, queue, failed_at, row_number() OVER ()
FROM (SELECT d.id, d.queue, d.failed_at FROM jobs_dlq d
      WHERE {{dlq_where}}
        AND (:before_at IS NULL
             OR (d.failed_at <= :before_at AND (d.failed_at < :before_at OR d.id > :before_id)))
      ORDER BY d.failed_at DESC, d.id LIMIT :limit);
{{purge_dlq_rest}};
SELECT (SELECT count(*) FROM staged) AS n, ref AS cursor_at, id AS cursor_id
FROM staged ORDER BY ref, id DESC LIMIT 1;

-- name: purge_archive
-- :after_at/:after_id: the last (finished_at, id) of the previous batch, so each batch starts where the
-- last one stopped.
{{staging}};
DELETE FROM staged;
INSERT INTO staged (id, queue, ref)
SELECT id, queue, finished_at FROM jobs_archive
WHERE finished_at < :cutoff AND (finished_at, id) > (coalesce(:after_at, ''), coalesce(:after_id, ''))
ORDER BY finished_at, id LIMIT :batch;
UPDATE stats_summary
SET succeeded_total = max(0, succeeded_total - (SELECT count(*) FROM staged s WHERE s.queue = stats_summary.queue))
WHERE queue IN (SELECT queue FROM staged);
INSERT INTO audit_log (actor, action, count, details)
SELECT :actor, 'purge_archive', count(*), :details FROM staged HAVING count(*) > 0;
INSERT INTO events (kind, message, data)
SELECT 'purge', 'Purged ' || count(*) || ' archived job(s) by ' || :actor,
       json_object('count', count(*), 'actor', :actor, 'source', 'archive')
FROM staged HAVING count(*) > 0;
DELETE FROM jobs_archive WHERE id IN (SELECT id FROM staged);
SELECT count(*) AS purged, (SELECT ref FROM staged ORDER BY ref DESC, id DESC LIMIT 1) AS last_at,
       (SELECT id FROM staged ORDER BY ref DESC, id DESC LIMIT 1) AS last_id
FROM staged;

-- name: set_queue
INSERT INTO audit_log (actor, action, details)
VALUES (:actor, 'set_queue', json_object('queue', :name, 'before',
        (SELECT json_object('name', name, 'paused', json(CASE WHEN paused THEN 'true' ELSE 'false' END),
                            'active', json(CASE WHEN active THEN 'true' ELSE 'false' END),
                            'zombie_timeout_seconds', zombie_timeout_seconds, 'max_workers', max_workers)
         FROM queues WHERE name = :name)));
INSERT INTO queues (name, paused, active, zombie_timeout_seconds, max_workers, updated_at)
VALUES (:name, coalesce(:paused, 0), coalesce(:active, 1), :zombie_timeout_seconds, :max_workers, {{now}})
ON CONFLICT (name) DO UPDATE SET
    paused = CASE WHEN :paused_set = 1 THEN excluded.paused ELSE paused END,
    active = CASE WHEN :active_set = 1 THEN excluded.active ELSE active END,
    zombie_timeout_seconds = CASE WHEN :zombie_set = 1 THEN excluded.zombie_timeout_seconds ELSE zombie_timeout_seconds END,
    max_workers = CASE WHEN :max_workers_set = 1 THEN excluded.max_workers ELSE max_workers END,
    updated_at = excluded.updated_at;
UPDATE audit_log SET details = json_set(details, '$.after',
       (SELECT json_object('name', name, 'paused', json(CASE WHEN paused THEN 'true' ELSE 'false' END),
                           'active', json(CASE WHEN active THEN 'true' ELSE 'false' END),
                           'zombie_timeout_seconds', zombie_timeout_seconds, 'max_workers', max_workers)
        FROM queues WHERE name = :name))
WHERE id = (SELECT max(id) FROM audit_log WHERE action = 'set_queue');
INSERT INTO stats_summary (queue) VALUES (:name) ON CONFLICT DO NOTHING;
INSERT INTO events (kind, message, data)
SELECT 'queue', 'Queue ' || name || ' changed by ' || :actor,
       json_object('name', name, 'paused', paused, 'active', active, 'zombie_timeout_seconds', zombie_timeout_seconds,
                   'max_workers', max_workers)
FROM queues WHERE name = :name;
SELECT name, paused, active, zombie_timeout_seconds, max_workers, updated_at FROM queues WHERE name = :name;

-- ---------------------------------------------------------------- reads

-- name: read_snapshot
-- PostgreSQL raises a read transaction to REPEATABLE READ with this. A SQLite read transaction (BEGIN)
-- already reads one snapshot from its first statement to its end, so the store does not call it here.
SELECT 1 AS ok;

-- name: get_hot
SELECT h.*, 'hot' AS location FROM jobs_hot h WHERE h.id = :id;

-- name: get_archive
SELECT a.*, 'archive' AS location FROM jobs_archive a WHERE a.id = :id;

-- name: get_dlq
SELECT d.*, 'dlq' AS location FROM jobs_dlq d WHERE d.id = :id;

-- name: list_hot
-- order: created_at = h.created_at, h.id | priority = h.priority, h.due_at, h.id | due_at = h.due_at, h.id | id = h.id | queue = h.queue, h.created_at, h.id | type = h.type, h.created_at, h.id | status = h.status, h.created_at, h.id
SELECT h.*, 'hot' AS location FROM jobs_hot h WHERE {{hot_where}}
ORDER BY {{order}} LIMIT :limit OFFSET :offset;

-- name: count_hot
SELECT count(*) AS n FROM jobs_hot h WHERE {{hot_where}};

-- name: list_archive
-- order: finished_at = a.finished_at, a.id | created_at = a.created_at, a.id | duration_ms = a.duration_ms IS NULL, a.duration_ms, a.id | queue = a.queue, a.finished_at, a.id | type = a.type, a.finished_at, a.id | attempt_count = a.attempt_count, a.finished_at, a.id | id = a.id
SELECT a.*, 'archive' AS location FROM jobs_archive a
WHERE a.id IN (SELECT a.id FROM jobs_archive a WHERE {{archive_where}} ORDER BY {{order}} LIMIT :limit OFFSET :offset)
ORDER BY {{order}};

-- name: count_archive
SELECT count(*) AS n FROM jobs_archive a WHERE {{archive_where}};

-- name: list_dlq
-- order: failed_at = d.failed_at, d.id | created_at = d.created_at, d.id | queue = d.queue, d.failed_at, d.id | type = d.type, d.failed_at, d.id | reason = d.failure_reason, d.failed_at, d.id | attempt_count = d.attempt_count, d.failed_at, d.id | id = d.id
SELECT d.*, 'dlq' AS location FROM jobs_dlq d
WHERE d.id IN (SELECT d.id FROM jobs_dlq d WHERE {{dlq_where}} ORDER BY {{order}} LIMIT :limit OFFSET :offset)
ORDER BY {{order}};

-- name: count_dlq
SELECT count(*) AS n FROM jobs_dlq d WHERE {{dlq_where}};

-- name: dlq_count_fast
-- Exact number of dead jobs for a queue and/or reason filter (or none), from the trigger-kept counts.
SELECT coalesce(sum(c.n), 0) AS n FROM dlq_counts c
WHERE (:queue IS NULL OR c.queue = :queue)
  AND (:reason IS NULL OR c.failure_reason = :reason);

-- name: dlq_locate
-- The hour of failure holding position :offset of the failed_at-ordered list (ascending or descending)
-- and how many of that hour's rows come before it: a deep page reads from there, not from the top.
-- order: hour = hour
SELECT hour AS hour_at, :offset - (cum - n) AS skip FROM (
    SELECT hour, n, sum(n) OVER (ORDER BY {{order}}) AS cum FROM (
        SELECT c.hour, sum(c.n) AS n FROM dlq_counts c
        WHERE (:queue IS NULL OR c.queue = :queue)
          AND (:reason IS NULL OR c.failure_reason = :reason)
        GROUP BY c.hour
    ) h
) w
WHERE cum > :offset ORDER BY {{order}} LIMIT 1;

-- name: dlq_ids
SELECT d.id FROM jobs_dlq d WHERE {{dlq_where}} ORDER BY d.failed_at DESC, d.id LIMIT :limit;

-- name: dlq_breakdown
SELECT 'reason' AS dimension, CAST(d.failure_reason AS TEXT) AS value, count(*) AS n,
       min(d.failed_at) AS first_at, max(d.failed_at) AS last_at
FROM jobs_dlq d WHERE {{dlq_where}} GROUP BY d.failure_reason
UNION ALL
SELECT 'queue', d.queue, count(*), min(d.failed_at), max(d.failed_at) FROM jobs_dlq d WHERE {{dlq_where}} GROUP BY d.queue
UNION ALL
SELECT 'type', d.type, count(*), min(d.failed_at), max(d.failed_at) FROM jobs_dlq d WHERE {{dlq_where}} GROUP BY d.type;

-- name: dlq_breakdown_ids
SELECT 'reason' AS dimension, CAST(d.failure_reason AS TEXT) AS value, count(*) AS n
FROM jobs_dlq d WHERE d.id IN (SELECT value FROM json_each(:ids)) GROUP BY d.failure_reason
UNION ALL
SELECT 'queue', d.queue, count(*) FROM jobs_dlq d WHERE d.id IN (SELECT value FROM json_each(:ids)) GROUP BY d.queue
UNION ALL
SELECT 'type', d.type, count(*) FROM jobs_dlq d WHERE d.id IN (SELECT value FROM json_each(:ids)) GROUP BY d.type;

-- name: dlq_breakdown_capped
-- What a bulk operation capped at :limit jobs would touch (the newest failures first, as a plan freezes
-- them): counts by reason, queue and type of exactly those jobs.
WITH chosen AS (
    SELECT d.failure_reason, d.queue, d.type FROM jobs_dlq d WHERE {{dlq_where}}
    ORDER BY d.failed_at DESC, d.id LIMIT :limit
)
SELECT 'reason' AS dimension, CAST(failure_reason AS TEXT) AS value, count(*) AS n FROM chosen GROUP BY failure_reason
UNION ALL
SELECT 'queue', queue, count(*) FROM chosen GROUP BY queue
UNION ALL
SELECT 'type', type, count(*) FROM chosen GROUP BY type;

-- name: dlq_past_lifetime
-- Of the jobs a bulk resurrect would touch (a filter, ids being one; at most :limit, newest failures first),
-- how many were created more than :max_age_s ago: resurrected without renewing their retry budget, their
-- first failure would not be retried (RetryLifetimeExpired).
SELECT count(*) AS n FROM (
    SELECT d.created_at FROM jobs_dlq d
    WHERE {{dlq_where}}
    ORDER BY d.failed_at DESC, d.id LIMIT :limit
) c WHERE c.created_at < strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || :max_age_s || ' seconds');

-- name: dlq_existing_ids
SELECT d.id FROM jobs_dlq d WHERE d.id IN (SELECT value FROM json_each(:ids)) ORDER BY d.failed_at DESC, d.id;

-- name: top_fingerprints
SELECT t.fingerprint, t.failure_reason, count(*) AS n, min(t.failed_at) AS first_at, max(t.failed_at) AS last_at,
       (SELECT x.id FROM jobs_dlq x WHERE x.fingerprint IS t.fingerprint AND x.failure_reason = t.failure_reason
        ORDER BY x.failed_at DESC LIMIT 1) AS example_id,
       max(t.queue) AS example_queue, max(t.type) AS example_type
FROM (SELECT d.id, d.fingerprint, d.failure_reason, d.failed_at, d.queue, d.type FROM jobs_dlq d
      WHERE {{dlq_where}} ORDER BY d.failed_at DESC LIMIT :sample) t
GROUP BY t.fingerprint, t.failure_reason
ORDER BY count(*) DESC, max(t.failed_at) DESC
LIMIT :limit;

-- name: errors_of
SELECT id, error_details FROM jobs_dlq WHERE id IN (SELECT value FROM json_each(:ids));

-- name: list_workers
-- Workers as the hot table sees them: every worker id holding fetched or processing rows (both statuses
-- have partial indexes, so this reads only claimed rows however large the queue is), database clock.
SELECT h.worker_id, sum(CASE WHEN h.status = 1 THEN 1 ELSE 0 END) AS fetched,
       sum(CASE WHEN h.status = 2 THEN 1 ELSE 0 END) AS processing,
       group_concat(DISTINCT h.queue) AS queues, max(h.heartbeat_at) AS last_heartbeat_at,
       (julianday('now') - julianday(max(coalesce(h.heartbeat_at, h.updated_at)))) * 86400.0 AS silent_s,
       min(h.started_at) AS oldest_started_at
FROM jobs_hot h WHERE h.status IN (1, 2) AND h.worker_id IS NOT NULL
GROUP BY h.worker_id ORDER BY h.worker_id;

-- name: stats_totals
SELECT coalesce(sum(enqueued_total), 0) AS enqueued_total, coalesce(sum(succeeded_total), 0) AS succeeded_total,
       coalesce(sum(failed_total), 0) AS failed_total, coalesce(sum(retried_total), 0) AS retried_total,
       max(last_activity_at) AS last_activity_at
FROM stats_summary;

-- name: hot_status_counts
SELECT queue, status, count(*) AS n FROM jobs_hot GROUP BY queue, status;

-- name: table_counts
SELECT (SELECT count(*) FROM jobs_hot) AS hot, (SELECT count(*) FROM jobs_archive) AS archive,
       (SELECT count(*) FROM jobs_dlq) AS dlq;

-- name: audit_rows
-- `chokaq bench` refuses a database whose audit log holds rows (its reset would delete them).
SELECT count(*) AS n FROM audit_log;

-- name: queue_rows
SELECT q.name, q.paused, q.active, q.zombie_timeout_seconds, q.max_workers, q.updated_at,
       coalesce(s.enqueued_total, 0) AS enqueued_total, coalesce(s.succeeded_total, 0) AS succeeded_total,
       coalesce(s.failed_total, 0) AS failed_total, coalesce(s.retried_total, 0) AS retried_total,
       s.last_activity_at
FROM queues q LEFT JOIN stats_summary s ON s.queue = q.name
WHERE :name IS NULL OR q.name = :name
ORDER BY q.name;

-- name: queue_lag
-- Due jobs no live worker runs, per queue: pending ones, and those fetched by a worker whose registry row
-- is older than :gone_s (it died; the sweep returns them). Their count and how long the oldest has waited.
SELECT h.queue, sum(CASE WHEN h.status = 0 THEN 1 ELSE 0 END) AS due_pending,
       sum(CASE WHEN h.status = 1 THEN 1 ELSE 0 END) AS stranded,
       (julianday('now') - julianday(min(h.due_at))) * 86400.0 AS max_lag_s,
       (julianday('now') - avg(julianday(h.due_at))) * 86400.0 AS avg_lag_s
FROM jobs_hot h
WHERE h.due_at <= {{now}}
  AND (h.status = 0
       OR (h.status = 1 AND h.worker_id IN (
           SELECT id FROM workers
           WHERE last_seen_at < strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || :gone_s || ' seconds'))))
GROUP BY h.queue;

-- name: throughput
SELECT coalesce(sum(CASE WHEN bucket_start >= strftime('%Y-%m-%d %H:%M:%f', 'now', '-60 seconds') THEN completed_count END), 0)
           AS processed_1m,
       coalesce(sum(CASE WHEN bucket_start >= strftime('%Y-%m-%d %H:%M:%f', 'now', '-60 seconds') AND outcome = 1
                         THEN completed_count END), 0) AS failed_1m,
       coalesce(sum(completed_count), 0) AS processed_5m,
       coalesce(sum(CASE WHEN outcome = 1 THEN completed_count END), 0) AS failed_5m
FROM metric_buckets WHERE bucket_start >= strftime('%Y-%m-%d %H:%M:%f', 'now', '-300 seconds');

-- name: prune_buckets
-- One batch of retention: the :batch oldest buckets older than :older_than_s, found through the primary
-- key (bucket_start leads it); the store repeats it until a batch comes back short. SQLite removes index
-- entries with their rows, so every batch starts its scan at the first live entry: no :after_at cursor
-- is needed (last_at stays NULL).
DELETE FROM metric_buckets WHERE rowid IN (
    SELECT rowid FROM metric_buckets
    WHERE bucket_start < strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || :older_than_s || ' seconds')
    ORDER BY bucket_start LIMIT :batch);
SELECT changes() AS n, NULL AS last_at;

-- name: prune_events
-- One batch: the :batch oldest events older than :older_than_s, through ix_events_at.
DELETE FROM events WHERE id IN (
    SELECT id FROM events WHERE at < strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || :older_than_s || ' seconds')
    ORDER BY at LIMIT :batch);
SELECT changes() AS n, NULL AS last_at;

-- name: list_audit
SELECT id, at, actor, action, job_id, plan_id, count, details FROM audit_log
WHERE (:actor IS NULL OR actor = :actor) AND (:action IS NULL OR action = :action)
  AND (:job_id IS NULL OR job_id = :job_id) AND (:plan_id IS NULL OR plan_id = :plan_id)
  AND (:since IS NULL OR at >= :since)
ORDER BY id DESC LIMIT :limit OFFSET :offset;

-- name: count_audit
SELECT count(*) AS n FROM audit_log
WHERE (:actor IS NULL OR actor = :actor) AND (:action IS NULL OR action = :action)
  AND (:job_id IS NULL OR job_id = :job_id) AND (:plan_id IS NULL OR plan_id = :plan_id)
  AND (:since IS NULL OR at >= :since);

-- name: events_after
SELECT id, at, kind, message, data FROM events WHERE id > :after_id ORDER BY id LIMIT :limit;

-- name: last_event_id
SELECT coalesce(max(id), 0) AS id FROM events;

-- ---------------------------------------------------------------- tokens

-- name: create_token
INSERT INTO api_tokens (name, role, token_hash, created_by) VALUES (:name, :role, :token_hash, :actor)
RETURNING name, role, created_at;

-- name: token_by_hash
-- A read: checking a token on every request must not take the write lock.
SELECT name, role, token_hash, last_used_at FROM api_tokens WHERE token_hash = :token_hash AND revoked_at IS NULL;

-- name: touch_token
-- last_used_at is kept to the minute; writing it on every request would serialise readers.
UPDATE api_tokens SET last_used_at = {{now}}
WHERE token_hash = :token_hash
  AND (last_used_at IS NULL OR last_used_at < strftime('%Y-%m-%d %H:%M:%f', 'now', '-60 seconds'));

-- name: list_tokens
SELECT name, role, created_at, created_by, revoked_at, last_used_at FROM api_tokens ORDER BY name;

-- name: revoke_token
UPDATE api_tokens SET revoked_at = {{now}} WHERE name = :name AND revoked_at IS NULL RETURNING name;

-- name: audited_unseen
-- After an operator move that may have committed and lost its reply (resurrect, cancel, purge by ids):
-- which of :ids it did move, known by their latest audit row, which commits with the move: :action by
-- :actor for :plan_id, written within the last :window_s seconds.
SELECT a.job_id AS id FROM audit_log a
WHERE a.job_id IN (SELECT value FROM json_each(:ids))
  AND a.id = (SELECT max(b.id) FROM audit_log b WHERE b.job_id = a.job_id)
  AND a.action = :action AND a.actor = :actor AND a.plan_id IS :plan_id
  AND a.at >= strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || :window_s || ' seconds');

-- name: audited_count
-- After a bulk operation by filter one of whose chunks may have committed and lost its reply: how many
-- jobs it moved in all, counted from its audit rows (one per job, the same `filter` in :details; a
-- resurrect's rows also carry the failure it cleared) since it started.
SELECT count(*) AS n FROM audit_log
WHERE actor = :actor AND at >= :since AND action = :action AND plan_id IS :plan_id
  AND json_extract(details, '$.filter') = json_extract(:details, '$.filter');

-- name: queue_admission
-- Whether a job may go to :queue under the API's cap on distinct queues (Api.MaxQueues), and how many
-- queues exist (for the refusal's message).
SELECT {{queue_admitted}} AS ok, (SELECT count(*) FROM queues) AS n;

-- name: audit_one
INSERT INTO audit_log (actor, action, job_id, plan_id, count, details)
VALUES (:actor, :action, :job_id, :plan_id, :count, :details);

-- ---------------------------------------------------------------- analysis frames (chokaq_ops.analysis.frames)
-- One keyset page of rows for a DataFrame: the rows after (:after_at, :after_id) in (time, id) order. The
-- sqlite3 module builds rows in C, so plain rows are fast here (PostgreSQL sends CSV text instead). Every
-- *_light variant leaves out payload and error details, which are most of a row's bytes.

-- fragment: frame_common
p.id, p.queue, p.type, p.tags, p.priority, p.attempt_count, p.worker_id, p.idempotency_key, p.created_at,
p.started_at, p.created_by, p.last_modified_by

-- fragment: frame_dlq_light
{{frame_common}}, p.failure_reason, p.fingerprint, p.heartbeat_at, p.failed_at, p.duration_ms

-- fragment: dlq_page
FROM jobs_dlq p WHERE p.id IN (
    SELECT d.id FROM jobs_dlq d
    WHERE {{dlq_where}} AND (d.failed_at, d.id) > (coalesce(:after_at, ''), coalesce(:after_id, ''))
    ORDER BY d.failed_at, d.id LIMIT :limit)
ORDER BY p.failed_at, p.id

-- name: frame_dlq
SELECT {{frame_dlq_light}}, p.payload, p.error_details {{dlq_page}};

-- name: frame_dlq_light
SELECT {{frame_dlq_light}} {{dlq_page}};

-- fragment: archive_page
FROM jobs_archive p WHERE p.id IN (
    SELECT a.id FROM jobs_archive a
    WHERE {{archive_where}} AND (a.finished_at, a.id) > (coalesce(:after_at, ''), coalesce(:after_id, ''))
    ORDER BY a.finished_at, a.id LIMIT :limit)
ORDER BY p.finished_at, p.id

-- name: frame_archive
SELECT {{frame_common}}, p.finished_at, p.duration_ms, p.payload {{archive_page}};

-- name: frame_archive_light
SELECT {{frame_common}}, p.finished_at, p.duration_ms {{archive_page}};

-- fragment: hot_page
FROM jobs_hot p WHERE p.id IN (
    SELECT h.id FROM jobs_hot h
    WHERE {{hot_where}} AND (h.created_at, h.id) > (coalesce(:after_at, ''), coalesce(:after_id, ''))
    ORDER BY h.created_at, h.id LIMIT :limit)
ORDER BY p.created_at, p.id

-- name: frame_hot
-- Hot jobs carry the error of their last failed attempt (a retry waiting) as error_details.
SELECT {{frame_common}}, p.status, p.heartbeat_at, p.scheduled_at, p.payload, p.last_error AS error_details
{{hot_page}};

-- name: frame_hot_light
SELECT {{frame_common}}, p.status, p.heartbeat_at, p.scheduled_at {{hot_page}};

-- ---------------------------------------------------------------- plans (chokaq_ops.storage.plan_ops)

-- name: plan_create
-- A plan whose items are all frozen, with their totals (counted as the batches were written) and its
-- preview (JSON): the row appears complete, so nothing ever sees a half-frozen plan. It seals the
-- plan's freeze (plan_freezes): no row when the freeze was reclaimed meanwhile (its process was taken
-- for dead), so a plan is never made of items a reclaim is deleting.
INSERT INTO plans (id, action, actor, chunk_size, total, chunks, details, label, rate)
SELECT :id, :action, :actor, :chunk_size, :total, :chunks, :details, :label, :rate
WHERE EXISTS (SELECT 1 FROM plan_freezes WHERE plan_id = :id AND state = 'freezing')
RETURNING *;
DELETE FROM plan_freezes WHERE plan_id = :id AND EXISTS (SELECT 1 FROM plans WHERE id = :id);

-- name: plan_freeze_begin
-- A freeze starts: its row says the items written under this plan id belong to a plan in the making.
INSERT INTO plan_freezes (plan_id, actor) VALUES (:plan_id, :actor);

-- name: plan_freeze_beat
-- A freeze is alive (before each batch); no row when it was reclaimed: the freezer stops.
UPDATE plan_freezes SET beat_at = {{now}} WHERE plan_id = :plan_id AND state = 'freezing'
RETURNING plan_id;

-- name: plan_freezes
-- Freezes in progress or abandoned (beaten more than :grace_s ago), with the items they hold.
SELECT f.plan_id, f.actor, f.state, f.started_at, f.beat_at,
       (SELECT count(*) FROM plan_items i WHERE i.plan_id = f.plan_id) AS items,
       CASE WHEN f.state = 'reclaiming' OR f.beat_at < strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || :grace_s || ' seconds')
            THEN 1 ELSE 0 END AS abandoned
FROM plan_freezes f ORDER BY f.started_at, f.plan_id;

-- name: plan_freeze_reclaim
-- Takes an abandoned freeze for reclaiming (one reclaimer wins; its late freezer can no longer seal it).
-- At or past the grace (`<=`): with :grace_s 0 a failed freeze beaten this millisecond is taken too.
UPDATE plan_freezes SET state = 'reclaiming', beat_at = {{now}}
WHERE plan_id = :plan_id
  AND (state = 'reclaiming' OR beat_at <= strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || :grace_s || ' seconds'))
RETURNING plan_id, actor, started_at;

-- name: plan_freeze_end
-- The reclaimed freeze's items are gone: its row goes, with an audit row of what was reclaimed.
DELETE FROM plan_freezes WHERE plan_id = :plan_id AND state = 'reclaiming';
INSERT INTO audit_log (actor, action, job_id, plan_id, count, details)
VALUES (:actor, 'plan_reclaim', NULL, :plan_id, :count, :details);

-- name: plan_by_label
-- The newest unfinished plan of :action with :label: what a labelled re-run resumes.
SELECT * FROM plans WHERE label = :label AND action = :action AND state IN ('ready', 'running')
ORDER BY created_at DESC, id DESC LIMIT 1;

-- fragment: plan_items_json
-- A batch of plan items as JSON [{"ord", "id", "payload", "tags", "priority"}], ord being the place in the plan.
SELECT CAST(json_extract(j.value, '$.ord') AS INTEGER) AS ord, json_extract(j.value, '$.id') AS id,
       json_extract(j.value, '$.payload') AS payload, json_extract(j.value, '$.tags') AS tags,
       json_extract(j.value, '$.priority') AS priority
FROM json_each(:items) j

-- name: plan_scan_dlq_ids
-- A batch of a freeze (its own short transaction): the given ids that were dead jobs by :as_of (the
-- freeze's start), in the given order, with the per-job payload/tags/priority a resurrect plan replaces.
SELECT i.ord, i.id, i.payload, i.tags, i.priority
FROM ({{plan_items_json}}) i JOIN jobs_dlq d ON d.id = i.id WHERE d.failed_at <= :as_of ORDER BY i.ord;

-- name: plan_scan_hot_ids
-- A batch of a freeze (its own short transaction): the given ids that were hot jobs by :as_of (the
-- freeze's start; a cancel plan's running ones are skipped when it executes), in the given order.
SELECT i.ord, i.id, i.payload, i.tags, i.priority
FROM ({{plan_items_json}}) i JOIN jobs_hot h ON h.id = i.id WHERE h.created_at <= :as_of ORDER BY i.ord;

-- name: plan_scan_dlq_filter
-- A batch of a freeze (its own short transaction): the next :limit dead jobs matching a filter that
-- failed by :as_of (the freeze's start), newest failure first, after the
-- (failed_at, id) where the previous batch ended (:after_at/:after_id; NULL for the first batch). The
-- bound on failed_at stands alone so the index scan starts at the cursor: under an OR every batch
-- walked the index from the newest entry (1M jobs: 250 ms a batch and rising).
SELECT d.id, d.failed_at AS key_at FROM jobs_dlq d
WHERE {{dlq_where}}
  AND d.failed_at <= coalesce(:after_at, :as_of)
  AND (:after_at IS NULL OR d.failed_at < :after_at OR d.id > :after_id)
ORDER BY d.failed_at DESC, d.id LIMIT :limit;

-- name: plan_scan_hot_filter
-- A batch of a freeze (its own short transaction): the next :limit pending or fetched hot jobs matching a
-- filter that were created by :as_of (the freeze's start), oldest first,
-- after the (created_at, id) where the previous batch ended.
SELECT h.id, h.created_at AS key_at FROM jobs_hot h
WHERE {{hot_where}} AND h.status IN (0, 1) AND h.created_at <= :as_of
  AND h.created_at >= coalesce(:after_at, '')
  AND (:after_at IS NULL OR h.created_at > :after_at OR h.id > :after_id)
ORDER BY h.created_at, h.id LIMIT :limit;

-- name: plan_add_items
-- Writes one batch of frozen items; an item's chunk follows from its ord.
INSERT INTO plan_items (plan_id, job_id, chunk, ord, payload, tags, priority)
SELECT :plan_id, i.id, i.ord / :chunk_size, i.ord, i.payload, i.tags, i.priority
FROM ({{plan_items_json}}) i WHERE true ON CONFLICT DO NOTHING;
SELECT changes() AS n;

-- name: plan_drop_items
-- One batch of the items of a plan whose freezing failed before the plan was sealed.
DELETE FROM plan_items WHERE plan_id = :plan_id
  AND job_id IN (SELECT job_id FROM plan_items WHERE plan_id = :plan_id LIMIT :batch);
SELECT changes() AS n;

-- name: plan_breakdown_dlq
SELECT 'reason' AS dimension, CAST(d.failure_reason AS TEXT) AS value, count(*) AS n
FROM plan_items i JOIN jobs_dlq d ON d.id = i.job_id WHERE i.plan_id = :plan_id GROUP BY d.failure_reason
UNION ALL
SELECT 'queue', d.queue, count(*)
FROM plan_items i JOIN jobs_dlq d ON d.id = i.job_id WHERE i.plan_id = :plan_id GROUP BY d.queue
UNION ALL
SELECT 'type', d.type, count(*)
FROM plan_items i JOIN jobs_dlq d ON d.id = i.job_id WHERE i.plan_id = :plan_id GROUP BY d.type;

-- name: plan_breakdown_hot
SELECT 'status' AS dimension, CAST(h.status AS TEXT) AS value, count(*) AS n
FROM plan_items i JOIN jobs_hot h ON h.id = i.job_id WHERE i.plan_id = :plan_id GROUP BY h.status
UNION ALL
SELECT 'queue', h.queue, count(*)
FROM plan_items i JOIN jobs_hot h ON h.id = i.job_id WHERE i.plan_id = :plan_id GROUP BY h.queue
UNION ALL
SELECT 'type', h.type, count(*)
FROM plan_items i JOIN jobs_hot h ON h.id = i.job_id WHERE i.plan_id = :plan_id GROUP BY h.type;

-- name: plan_sample_dlq
SELECT d.id, d.queue, d.type, d.failure_reason, d.attempt_count, d.failed_at, d.fingerprint, d.error_details,
       i.payload AS new_payload, i.tags AS new_tags, i.priority AS new_priority
FROM plan_items i JOIN jobs_dlq d ON d.id = i.job_id
WHERE i.plan_id = :plan_id ORDER BY i.ord LIMIT :limit;

-- name: plan_sample_hot
SELECT h.id, h.queue, h.type, h.status, h.attempt_count, h.created_at, h.scheduled_at
FROM plan_items i JOIN jobs_hot h ON h.id = i.job_id
WHERE i.plan_id = :plan_id ORDER BY i.ord LIMIT :limit;

-- name: plan_get
SELECT * FROM plans WHERE id = :id;

-- name: plan_lock
-- BEGIN IMMEDIATE already serialises executors; this only reads the plan.
SELECT * FROM plans WHERE id = :id;

-- name: plan_list
SELECT * FROM plans
WHERE (:state IS NULL OR state = :state) AND (:action IS NULL OR action = :action)
  AND (:label IS NULL OR label = :label)
ORDER BY created_at DESC, id DESC LIMIT :limit OFFSET :offset;

-- name: plan_count
SELECT count(*) AS n FROM plans WHERE (:state IS NULL OR state = :state) AND (:action IS NULL OR action = :action)
  AND (:label IS NULL OR label = :label);

-- name: plan_clock
-- The plan's clocks on the database clock, inside a chunk's transaction: seconds until its pace lets
-- the next chunk start (<= 0: now) and until its lease ends (null: no lease).
SELECT (julianday(coalesce(not_before, {{now}})) - julianday({{now}})) * 86400.0 AS wait_s,
       CASE WHEN lease_until IS NULL THEN NULL
            ELSE (julianday(lease_until) - julianday({{now}})) * 86400.0 END AS lease_left_s
FROM plans WHERE id = :id;

-- name: plan_paced
-- After a chunk: the pace moves the next chunk's earliest start :seconds on (from now, or from the
-- previous mark when it is still ahead, so two processes working the plan share one pace), and the
-- working run's lease is renewed for :ttl_s.
UPDATE plans
SET not_before = CASE WHEN :seconds > 0
                      THEN strftime('%Y-%m-%d %H:%M:%f',
                                    julianday(max(coalesce(not_before, {{now}}), {{now}})) + :seconds / 86400.0)
                      ELSE not_before END,
    lease_until = CASE WHEN :holder IS NOT NULL AND lease_holder = :holder
                       THEN strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || :ttl_s || ' seconds')
                       ELSE lease_until END
WHERE id = :id;

-- name: plan_pace
-- Sets the plan's pace (jobs/s; null: none); every process working the plan follows it from its next chunk.
UPDATE plans SET rate = :rate, updated_at = {{now}} WHERE id = :id RETURNING *;

-- name: plan_lease
-- A run takes (or renews) the plan's lease for :ttl_s: free, its own, expired, or held by :take_from (a
-- holder its caller found dead). No row: another run holds it, or the plan is finished.
UPDATE plans SET lease_holder = :holder,
                 lease_until = strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || :ttl_s || ' seconds')
WHERE id = :id AND state IN ('ready', 'running')
  AND (lease_holder IS NULL OR lease_holder = :holder OR lease_until < {{now}}
       OR (:take_from IS NOT NULL AND lease_holder = :take_from))
RETURNING *;

-- name: plan_release
UPDATE plans SET lease_holder = NULL, lease_until = NULL WHERE id = :id AND lease_holder = :holder
RETURNING id;

-- name: plan_claim_chunk
-- Claims the lowest unfinished chunk: its items are stamped done (and marked `done`; plan_chunk_done marks
-- the skipped ones) in the transaction that then moves the jobs, so a crash rolls both back and a resumed
-- plan never touches a job twice. :from_chunk: the plan's chunks_done, below which every chunk is done
-- (see the PostgreSQL file).
UPDATE plan_items SET done_at = {{now}}, outcome = 'done'
WHERE plan_id = :plan_id AND done_at IS NULL
  AND chunk = (SELECT min(chunk) FROM plan_items WHERE plan_id = :plan_id AND done_at IS NULL AND chunk >= :from_chunk)
RETURNING job_id, chunk, ord, payload, tags, priority;

-- name: plan_chunk_done
-- Marks the claimed items the move skipped (not in :moved), found by their order numbers through
-- ix_plan_items_order, and advances the plan's counters and state (see the PostgreSQL file).
UPDATE plan_items SET outcome = 'skipped'
WHERE plan_id = :plan_id AND ord BETWEEN :ord_from AND :ord_to AND chunk = :chunk
  AND job_id NOT IN (SELECT value FROM json_each(:moved));
UPDATE plans
SET done = done + json_array_length(:moved),
    skipped = skipped + (SELECT count(*) FROM plan_items WHERE plan_id = :plan_id AND ord BETWEEN :ord_from AND :ord_to
                         AND chunk = :chunk AND outcome = 'skipped'),
    chunks_done = chunks_done + 1, updated_at = {{now}},
    state = CASE WHEN chunks_done + 1 >= chunks THEN 'done' ELSE 'running' END,
    finished_at = CASE WHEN chunks_done + 1 >= chunks THEN {{now}} END
WHERE id = :plan_id
RETURNING *;

-- name: plan_finish
-- A plan with nothing left to claim is done (an empty plan, or chunks finished by another executor).
UPDATE plans SET state = 'done', updated_at = {{now}}, finished_at = coalesce(finished_at, {{now}})
WHERE id = :plan_id AND state IN ('ready', 'running')
  AND NOT EXISTS (SELECT 1 FROM plan_items WHERE plan_id = :plan_id AND done_at IS NULL)
RETURNING *;

-- name: plan_approve
-- Four-eyes: a ready or running plan approved by someone other than its creator; the first approval
-- stands (no row when the plan is finished, already approved, or the approver created it).
UPDATE plans SET approved_by = :actor, approved_at = {{now}}, updated_at = {{now}}
WHERE id = :id AND state IN ('ready', 'running') AND approved_by IS NULL AND actor <> :actor
RETURNING *;

-- name: plan_discard
UPDATE plans SET state = 'discarded', updated_at = {{now}} WHERE id = :id AND state IN ('ready', 'running')
RETURNING *;

-- name: plan_items
-- The job's id is `id`, as in every other listing and frame.
SELECT job_id AS id, chunk, ord, done_at, outcome, payload, tags, priority FROM plan_items
WHERE plan_id = :plan_id ORDER BY ord LIMIT :limit OFFSET :offset;

-- name: plan_outcomes
-- Where the jobs a resurrect plan moved (its 'done' items of chunks :from_chunk..:to_chunk) are now, for
-- the canary and failure guard of a paced execution: still hot (waiting = pending and not tried since,
-- retrying = pending after a failed attempt, running = fetched or processing), archived (succeeded), back
-- in the DLQ (failed, by reason) or in no table (gone: purged since). The ord range uses the plan-order
-- index: item ord n is in chunk n / chunk_size.
SELECT CASE WHEN h.id IS NOT NULL THEN
                 CASE WHEN h.status <> 0 THEN 'running' WHEN h.attempt_count > 0 THEN 'retrying' ELSE 'waiting' END
            WHEN a.id IS NOT NULL THEN 'succeeded'
            WHEN d.id IS NOT NULL THEN 'failed'
            ELSE 'gone' END AS state,
       d.failure_reason AS reason, count(*) AS n
FROM plan_items i
LEFT JOIN jobs_hot h ON h.id = i.job_id
LEFT JOIN jobs_archive a ON a.id = i.job_id
LEFT JOIN jobs_dlq d ON d.id = i.job_id
WHERE i.plan_id = :plan_id AND i.outcome = 'done'
  AND i.ord BETWEEN :ord_from AND :ord_to
  AND i.chunk BETWEEN :from_chunk AND :to_chunk
GROUP BY 1, 2;

-- ---------------------------------------------------------------- circuits (docs/circuits.md)

-- fragment: circuit_columns
type, CASE state WHEN 0 THEN 'closed' WHEN 1 THEN 'open' ELSE 'half_open' END AS state,
CASE prev_state WHEN 0 THEN 'closed' WHEN 1 THEN 'open' ELSE 'half_open' END AS prev_state,
forced = 1 AS forced, failures, last_failure_at, opened_at, open_until, probes, successes, transitions,
failure_threshold, failure_window_s, break_duration_s, half_open_max_calls, updated_at,
CASE WHEN open_until IS NULL THEN NULL
     ELSE max(0.0, (julianday(open_until) - julianday('now')) * 86400.0) END AS open_for_s

-- fragment: circuit_items
SELECT json_extract(value, '$.type') FROM json_each(:items)

-- name: circuit_failures
-- Counted failures of each type in :items ({type, n, threshold, window_s, break_s, half_open}). Closed:
-- the count restarts when the previous failure is older than the window (the original's tumbling
-- window), and reaching the threshold opens the circuit; half-open: any failure opens it again; open or
-- forced open: only counted.
UPDATE circuits SET prev_state = state WHERE type IN ({{circuit_items}});
INSERT INTO circuits (type, failures, last_failure_at, failure_threshold, failure_window_s, break_duration_s,
                      half_open_max_calls, updated_at)
SELECT json_extract(value, '$.type'), json_extract(value, '$.n'), {{now}}, json_extract(value, '$.threshold'),
       json_extract(value, '$.window_s'), json_extract(value, '$.break_s'), json_extract(value, '$.half_open'), {{now}}
FROM json_each(:items) WHERE true
ON CONFLICT (type) DO UPDATE SET
    failures = CASE WHEN state = 0 AND last_failure_at
                         < strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || excluded.failure_window_s || ' seconds')
                    THEN excluded.failures ELSE failures + excluded.failures END,
    last_failure_at = excluded.last_failure_at, failure_threshold = excluded.failure_threshold,
    failure_window_s = excluded.failure_window_s, break_duration_s = excluded.break_duration_s,
    half_open_max_calls = excluded.half_open_max_calls, updated_at = excluded.updated_at;
UPDATE circuits SET state = 1, opened_at = {{now}},
                    open_until = strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || break_duration_s || ' seconds'),
                    probes = 0, successes = 0, transitions = transitions + 1
WHERE type IN ({{circuit_items}}) AND forced = 0 AND (state = 2 OR (state = 0 AND failures >= failure_threshold));
INSERT INTO events (kind, message, data)
SELECT 'circuit', 'Circuit of ' || type || ' opened after ' || failures || ' failures',
       json_object('type', type, 'state', 'open', 'from', CASE prev_state WHEN 0 THEN 'closed' ELSE 'half_open' END,
                   'failures', failures, 'open_until', open_until)
FROM circuits WHERE type IN ({{circuit_items}}) AND state <> prev_state;
SELECT {{circuit_columns}} FROM circuits WHERE type IN ({{circuit_items}});

-- name: circuit_successes
-- Successful probes of half-open circuits (:items {type, n}): as many successes as the type's
-- half_open_max_calls close the circuit and clear its failure count.
UPDATE circuits SET prev_state = state WHERE type IN ({{circuit_items}});
UPDATE circuits SET successes = successes + (SELECT json_extract(value, '$.n') FROM json_each(:items)
                                             WHERE json_extract(value, '$.type') = circuits.type),
                    probes = max(probes - (SELECT json_extract(value, '$.n') FROM json_each(:items)
                                           WHERE json_extract(value, '$.type') = circuits.type), 0),
                    updated_at = {{now}}
WHERE type IN ({{circuit_items}}) AND state = 2;
UPDATE circuits SET state = 0, failures = 0, successes = 0, probes = 0, probe_until = NULL, open_until = NULL,
                    transitions = transitions + 1
WHERE type IN ({{circuit_items}}) AND state = 2 AND successes >= half_open_max_calls;
INSERT INTO events (kind, message, data)
SELECT 'circuit', 'Circuit of ' || type || ' closed: the half-open probe succeeded',
       json_object('type', type, 'state', 'closed', 'from', 'half_open')
FROM circuits WHERE type IN ({{circuit_items}}) AND state <> prev_state;
SELECT {{circuit_columns}} FROM circuits WHERE type IN ({{circuit_items}});

-- name: circuit_probe
-- A probe permit for each type in :items ({type, probe_timeout_s}) whose circuit may let one through:
-- open past its break (it turns half-open), or half-open with fewer than half_open_max_calls probes in
-- flight (a probe unresolved after its timeout no longer counts). Returns the types granted one.
UPDATE circuits SET prev_state = state WHERE type IN ({{circuit_items}});
INSERT INTO events (kind, message, data)
SELECT 'circuit', 'Circuit of ' || type || ' half-open: one probe may run', json_object('type', type, 'state', 'half_open', 'from', 'open')
FROM circuits WHERE type IN ({{circuit_items}}) AND forced = 0 AND state = 1 AND open_until <= {{now}};
UPDATE circuits SET
    probes = CASE WHEN state = 1 OR probe_until < {{now}} THEN 1 ELSE probes + 1 END,
    successes = CASE WHEN state = 1 THEN 0 ELSE successes END,
    transitions = transitions + (state = 1),
    state = 2,
    probe_until = strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (SELECT json_extract(value, '$.probe_timeout_s')
                  FROM json_each(:items) WHERE json_extract(value, '$.type') = circuits.type) || ' seconds'),
    updated_at = {{now}}
WHERE type IN ({{circuit_items}}) AND forced = 0
  AND ((state = 1 AND open_until <= {{now}}) OR (state = 2 AND (probes < half_open_max_calls OR probe_until < {{now}})))
RETURNING {{circuit_columns}};

-- name: circuit_states
-- What a worker's gate needs: every circuit that is not closed.
SELECT {{circuit_columns}} FROM circuits WHERE state <> 0;

-- name: list_circuits
SELECT {{circuit_columns}} FROM circuits ORDER BY type;

-- name: set_circuit
-- An operator forces a circuit open (:state 1: stays open, no probes, until closed) or closed (:state
-- 0: counts cleared, the policy applies again). Audited with the row before and after.
INSERT INTO audit_log (actor, action, details)
VALUES (:actor, 'set_circuit', json_object('type', :type, 'before',
        (SELECT json_object('state', state, 'forced', forced, 'failures', failures) FROM circuits WHERE type = :type)));
INSERT INTO circuits (type, updated_at) VALUES (:type, {{now}}) ON CONFLICT (type) DO NOTHING;
UPDATE circuits SET prev_state = state,
                    transitions = transitions + (state <> :state),
                    state = :state, forced = :state,
                    failures = CASE WHEN :state = 0 THEN 0 ELSE failures END,
                    opened_at = CASE WHEN :state = 1 THEN {{now}} ELSE opened_at END,
                    open_until = NULL, probes = 0, probe_until = NULL, successes = 0, updated_at = {{now}}
WHERE type = :type;
UPDATE audit_log SET details = json_set(details, '$.after',
       (SELECT json_object('state', state, 'forced', forced, 'failures', failures) FROM circuits WHERE type = :type))
WHERE id = (SELECT max(id) FROM audit_log WHERE action = 'set_circuit');
INSERT INTO events (kind, message, data)
SELECT 'circuit', 'Circuit of ' || type || CASE WHEN :state = 1 THEN ' forced open by ' ELSE ' closed by ' END || :actor,
       json_object('type', type, 'state', CASE WHEN :state = 1 THEN 'open' ELSE 'closed' END, 'forced', forced, 'actor', :actor)
FROM circuits WHERE type = :type;
SELECT {{circuit_columns}} FROM circuits WHERE type = :type;

-- name: defer
-- Jobs an open circuit met at their start: back to pending after :delay_s without the attempt the start
-- counted (user code never ran). One event per type.
{{staging}};
DELETE FROM staged;
INSERT INTO staged (id, queue, key)
SELECT h.id, h.queue, h.type FROM jobs_hot h
WHERE h.id IN (SELECT value FROM json_each(:ids)) AND h.worker_id = :worker_id AND h.status = 2;
UPDATE jobs_hot SET status = 0, worker_id = NULL, heartbeat_at = NULL, attempt_count = max(attempt_count - 1, 0),
                    scheduled_at = strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || :delay_s || ' seconds'),
                    due_at = strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || :delay_s || ' seconds'),
                    updated_at = {{now}}
WHERE id IN (SELECT id FROM staged);
INSERT INTO events (kind, message, data)
SELECT 'circuit', count(*) || ' jobs of ' || key || ' deferred: its circuit is open',
       json_object('type', key, 'deferred', count(*), 'delay_s', :delay_s, 'worker_id', :worker_id)
FROM staged WHERE true GROUP BY key;
SELECT id FROM staged;

-- ---------------------------------------------------------------- worker registry (docs/worker.md "Registry")

-- fragment: registry_columns
id AS worker_id, host, pid, queues, concurrency, desired_concurrency, running, prefetched, started_at, last_seen_at,
(julianday('now') - julianday(last_seen_at)) * 86400.0 AS seen_s

-- name: worker_register
-- A worker's row, refreshed on every heartbeat; returns the operator's concurrency target.
INSERT INTO workers (id, host, pid, queues, concurrency, running, prefetched, started_at, last_seen_at)
VALUES (:id, :host, :pid, :queues, :concurrency, :running, :prefetched, {{now}}, {{now}})
ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,
    concurrency = excluded.concurrency, running = excluded.running, prefetched = excluded.prefetched,
    last_seen_at = excluded.last_seen_at,
    started_at = CASE WHEN workers.pid = excluded.pid AND workers.host = excluded.host THEN workers.started_at
                      ELSE excluded.started_at END
RETURNING desired_concurrency;

-- name: worker_unregister
-- No row back: SQLite has no row locks, so the row is always removed (PostgreSQL's returns one it left).
DELETE FROM workers WHERE id = :id;

-- name: list_registry
SELECT {{registry_columns}} FROM workers ORDER BY id;

-- name: set_worker_concurrency
-- An operator's concurrency target for a registered worker; audited with the value before and after.
INSERT INTO audit_log (actor, action, details)
SELECT :actor, 'set_worker', json_object('worker_id', id, 'before', json_object('concurrency', concurrency,
       'desired_concurrency', desired_concurrency), 'after', json_object('desired_concurrency', :concurrency))
FROM workers WHERE id = :id;
UPDATE workers SET desired_concurrency = :concurrency WHERE id = :id;
INSERT INTO events (kind, message, data)
SELECT 'worker', 'Worker ' || id || ' concurrency set to ' || :concurrency || ' by ' || :actor,
       json_object('worker_id', id, 'desired_concurrency', :concurrency, 'actor', :actor)
FROM workers WHERE id = :id;
SELECT {{registry_columns}} FROM workers WHERE id = :id;

-- name: prune_workers
-- Registry rows of workers not seen for :older_than_s (they crashed or were killed: a stopping worker
-- deletes its own row). A small table: one statement.
DELETE FROM workers WHERE last_seen_at < strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || :older_than_s || ' seconds');
SELECT changes() AS n;

-- name: recover_orphaned
-- Rescue phase 1b, one batch: fetched rows of workers whose registry row was not refreshed for :gone_s
-- (Health.WorkerHeartbeatTimeout: the worker died) go back to pending at once; user code never ran.
UPDATE jobs_hot SET status = 0, worker_id = NULL, updated_at = {{now}}
WHERE id IN (SELECT h.id FROM jobs_hot h
             WHERE h.status = 1 AND h.worker_id IN (
                 SELECT id FROM workers
                 WHERE last_seen_at < strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || :gone_s || ' seconds'))
             LIMIT :batch)
RETURNING id, queue;

-- name: gone_workers
-- Registered workers not seen for :gone_s: their jobs are shown as "worker gone".
SELECT id FROM workers WHERE last_seen_at < strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || :gone_s || ' seconds');

-- ---------------------------------------------------------------- failure history

-- name: failure_history
-- Failed attempts (see job_failures), oldest first, after the :after_seq of the previous page. List
-- filters are JSON arrays (or null): :ids, :queues/:not_queues, :types/:not_types, :reasons/:not_reasons
-- (codes), :fingerprints; times are half-open [:failed_from, :failed_to).
SELECT d.seq, d.job_id, d.queue, d.type, d.attempt, d.outcome,
       coalesce(r.name, 'reason ' || d.failure_reason) AS failure_reason, d.fingerprint, d.error_line,
       d.error_details, d.worker_id, d.failed_at
FROM job_failures d LEFT JOIN failure_reasons r ON r.code = d.failure_reason
WHERE d.seq > coalesce(:after_seq, 0)
  AND (:ids IS NULL OR d.job_id IN (SELECT value FROM json_each(:ids)))
  AND {{list_where}}
  AND (:outcome IS NULL OR d.outcome = :outcome)
  AND (:failed_from IS NULL OR d.failed_at >= :failed_from)
  AND (:failed_to IS NULL OR d.failed_at < :failed_to)
ORDER BY d.seq LIMIT :limit;

-- name: prune_failures
-- One batch: the :batch oldest failure-history rows older than :older_than_s, through ix_job_failures_failed.
DELETE FROM job_failures WHERE seq IN (
    SELECT seq FROM job_failures
    WHERE failed_at < strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || :older_than_s || ' seconds')
    ORDER BY failed_at LIMIT :batch);
SELECT changes() AS n, NULL AS last_at;

-- name: locate_jobs
-- Where each of :ids (a JSON array) is now: hot (with its status), archive or dlq, or in no table.
SELECT j.value AS id,
       CASE WHEN h.id IS NOT NULL THEN 'hot' WHEN a.id IS NOT NULL THEN 'archive'
            WHEN d.id IS NOT NULL THEN 'dlq' ELSE 'gone' END AS location,
       CASE WHEN h.id IS NOT NULL THEN h.status END AS hot_status,
       d.failure_reason AS failure_reason, coalesce(a.finished_at, d.failed_at) AS finished_at
FROM json_each(:ids) j
LEFT JOIN jobs_hot h ON h.id = j.value
LEFT JOIN jobs_archive a ON a.id = j.value
LEFT JOIN jobs_dlq d ON d.id = j.value
ORDER BY j.key;

-- name: register_job_types
-- A starting worker's declarations per job type (:types, JSON [{"type", "idempotent"}]); the last word wins.
INSERT INTO job_types (type, idempotent, updated_at)
SELECT json_extract(value, '$.type'), json_extract(value, '$.idempotent'), {{now}} FROM json_each(:types) WHERE true
ON CONFLICT (type) DO UPDATE SET idempotent = excluded.idempotent, updated_at = excluded.updated_at;

-- name: job_types
-- Every job type some worker declared when it started: whether it is idempotent, and when it was said.
SELECT type, idempotent, updated_at FROM job_types ORDER BY type;

-- name: idempotent_types
SELECT type FROM job_types WHERE idempotent = 1 ORDER BY type;
