-- Named queries for PostgreSQL. Format: see chokaq_ops/storage/queries.py.
-- Parameters are `:name`; each is cast where psqlODBC could not infer its type. Times come from now(),
-- the database clock. Moves between tables are one statement of data-modifying CTEs, so each is atomic
-- and needs no explicit transaction.

-- ---------------------------------------------------------------- fragments

-- fragment: claimed_columns
-- What a claim returns per row (fetch, fetch_head, recover_claims): the job, its status and start, and
-- renewed_at (the lifetime clock's restart by a renewing resurrect: the retry decision reads it).
-- claim_reply names each of them again (its packed reply lists columns one by one).
h.id, h.queue, h.type, h.payload, h.tags, h.priority, h.attempt_count, h.created_at, h.scheduled_at,
h.due_at, h.idempotency_key, h.created_by, h.status, h.started_at, h.trace_context, h.renewed_at

-- fragment: hot_columns
-- A hot job as the store returns it: every column but ready_xid (the claim's bookkeeping).
h.id, h.queue, h.type, h.payload, h.tags, h.idempotency_key, h.priority, h.status, h.attempt_count, h.worker_id,
h.heartbeat_at, h.scheduled_at, h.due_at, h.created_at, h.started_at, h.updated_at, h.created_by, h.last_modified_by,
h.last_error, h.trace_context, h.renewed_at

-- fragment: list_where
-- The filter grammar's lists and exclusions over rows aliased d (JSON arrays or null): DLQ and failure history.
(CAST(:queues AS jsonb) IS NULL OR d.queue IN (SELECT jsonb_array_elements_text(CAST(:queues AS jsonb))))
AND (CAST(:not_queues AS jsonb) IS NULL
     OR d.queue NOT IN (SELECT jsonb_array_elements_text(CAST(:not_queues AS jsonb))))
AND (CAST(:types AS jsonb) IS NULL OR d.type IN (SELECT jsonb_array_elements_text(CAST(:types AS jsonb))))
AND (CAST(:not_types AS jsonb) IS NULL
     OR d.type NOT IN (SELECT jsonb_array_elements_text(CAST(:not_types AS jsonb))))
AND (CAST(:reasons AS jsonb) IS NULL
     OR d.failure_reason IN (SELECT CAST(jsonb_array_elements_text(CAST(:reasons AS jsonb)) AS smallint)))
AND (CAST(:not_reasons AS jsonb) IS NULL
     OR d.failure_reason NOT IN (SELECT CAST(jsonb_array_elements_text(CAST(:not_reasons AS jsonb)) AS smallint)))
AND (CAST(:fingerprints AS jsonb) IS NULL
     OR d.fingerprint IN (SELECT jsonb_array_elements_text(CAST(:fingerprints AS jsonb))))

-- fragment: dlq_where
(CAST(:queue AS text) IS NULL OR d.queue = CAST(:queue AS text))
AND (CAST(:type AS text) IS NULL OR d.type = CAST(:type AS text))
AND (CAST(:reason AS integer) IS NULL OR d.failure_reason = CAST(:reason AS integer))
AND (CAST(:fingerprint AS text) IS NULL OR d.fingerprint = CAST(:fingerprint AS text))
-- Times are half-open [from, to). List filters (chokaq_ops/filters.py) are JSON arrays or null.
AND (CAST(:failed_from AS timestamptz) IS NULL OR d.failed_at >= CAST(:failed_from AS timestamptz))
AND (CAST(:failed_to AS timestamptz) IS NULL OR d.failed_at < CAST(:failed_to AS timestamptz))
AND (CAST(:created_from AS timestamptz) IS NULL OR d.created_at >= CAST(:created_from AS timestamptz))
AND (CAST(:created_to AS timestamptz) IS NULL OR d.created_at < CAST(:created_to AS timestamptz))
AND (CAST(:tag_like AS text) IS NULL OR (',' || replace(coalesce(d.tags, ''), ' ', '') || ',') LIKE CAST(:tag_like AS text))
-- lower(..) LIKE lower(..) is ILIKE in the form the DLQ's trigram indexes (migration 0004) answer.
AND (CAST(:search_like AS text) IS NULL OR lower(d.id) LIKE lower(CAST(:search_like AS text))
     OR lower(d.type) LIKE lower(CAST(:search_like AS text)) OR lower(d.tags) LIKE lower(CAST(:search_like AS text))
     OR lower(d.error_details) LIKE lower(CAST(:search_like AS text)))
AND (CAST(:ids AS jsonb) IS NULL OR d.id IN (SELECT jsonb_array_elements_text(CAST(:ids AS jsonb))))
AND {{list_where}}

-- fragment: dlq_after
-- A chunk of a bulk DLQ operation starts after :before_at/:before_id, the last row before it in
-- (failed_at DESC, id) order; none: at the top.
(CAST(:before_at AS timestamptz) IS NULL
 OR (d.failed_at <= CAST(:before_at AS timestamptz)
     AND (d.failed_at < CAST(:before_at AS timestamptz) OR d.id > CAST(:before_id AS text))))

-- fragment: dlq_through
-- ... and ends at :through_at/:through_id included (dlq_chunk_bounds), so chunks in flight together take
-- disjoint rows; none: wherever :limit ends it.
(CAST(:through_at AS timestamptz) IS NULL
 OR (d.failed_at >= CAST(:through_at AS timestamptz)
     AND (d.failed_at > CAST(:through_at AS timestamptz) OR d.id <= CAST(:through_id AS text))))

-- fragment: archive_where
(CAST(:queue AS text) IS NULL OR a.queue = CAST(:queue AS text))
AND (CAST(:type AS text) IS NULL OR a.type = CAST(:type AS text))
AND (CAST(:finished_from AS timestamptz) IS NULL OR a.finished_at >= CAST(:finished_from AS timestamptz))
AND (CAST(:finished_to AS timestamptz) IS NULL OR a.finished_at <= CAST(:finished_to AS timestamptz))
AND (CAST(:created_from AS timestamptz) IS NULL OR a.created_at >= CAST(:created_from AS timestamptz))
AND (CAST(:created_to AS timestamptz) IS NULL OR a.created_at <= CAST(:created_to AS timestamptz))
AND (CAST(:tag_like AS text) IS NULL OR (',' || replace(coalesce(a.tags, ''), ' ', '') || ',') LIKE CAST(:tag_like AS text))
AND (CAST(:search_like AS text) IS NULL OR a.id ILIKE CAST(:search_like AS text) OR a.type ILIKE CAST(:search_like AS text)
     OR a.tags ILIKE CAST(:search_like AS text))

-- fragment: hot_where
-- `created_at IS NOT NULL`: always true, and what lets the listing use ix_jobs_hot_created (partial on it,
-- so that the worker's lookups by id never do; migration 0015).
h.created_at IS NOT NULL
AND (CAST(:status AS integer) IS NULL OR h.status = CAST(:status AS integer))
AND (CAST(:queue AS text) IS NULL OR h.queue = CAST(:queue AS text))
AND (CAST(:type AS text) IS NULL OR h.type = CAST(:type AS text))
AND (CAST(:tag_like AS text) IS NULL OR (',' || replace(coalesce(h.tags, ''), ' ', '') || ',') LIKE CAST(:tag_like AS text))
AND (CAST(:search_like AS text) IS NULL OR h.id ILIKE CAST(:search_like AS text) OR h.type ILIKE CAST(:search_like AS text)
     OR h.tags ILIKE CAST(:search_like AS text))

-- fragment: displace_twins
-- Copies of the ids moving out of hot (`moved`) that are already in the archive or the DLQ: an older
-- life of the id, left by a race of enqueue with a move (before enqueue re-checked its ids) or put there
-- by hand. The row moving out of hot is the newer one and wins: each older copy is deleted, kept
-- verbatim in the audit log (actor `system`, action `displace`, details {location, copy}), announced as a
-- `conflict` event and taken off its table's counter (displaced_deltas). The insert into the target
-- reads `displaced` first (`WHERE (SELECT count(*) FROM displaced) >= 0`), so it runs after these
-- deletes and never meets a duplicate key: one such row never fails the move of the others.
archive_twins AS (
    DELETE FROM jobs_archive x WHERE x.id = ANY(ARRAY(SELECT id FROM moved))
    RETURNING x.id, x.queue, 'archive' AS location, row_to_json(x)::text AS copy
),
dlq_twins AS (
    DELETE FROM jobs_dlq x WHERE x.id = ANY(ARRAY(SELECT id FROM moved))
    RETURNING x.id, x.queue, 'dlq' AS location, row_to_json(x)::text AS copy
),
displaced AS (SELECT * FROM archive_twins UNION ALL SELECT * FROM dlq_twins),
{{displaced_report}}

-- fragment: displaced_report
-- The audit rows and events of `displaced` (id, queue, location, copy): see displace_twins.
displaced_audit AS (
    INSERT INTO audit_log (actor, action, job_id, details)
    SELECT 'system', 'displace', id, json_build_object('location', location, 'copy', CAST(copy AS json))::text
    FROM displaced
),
displaced_events AS (
    INSERT INTO events (kind, message, data)
    SELECT 'conflict', 'Job ' || id || ' was in two tables; its older copy in the ' || location
                       || ' was replaced (kept in the audit log)',
           json_build_object('job_id', id, 'queue', queue, 'location', location)::text
    FROM displaced
)

-- fragment: displaced_deltas
-- Per displaced copy, its `deltas` row (see count_deltas): taken off its table's counter, so the counters
-- keep equal to the rows.
SELECT queue, 0, -CAST(location = 'archive' AS integer), -CAST(location = 'dlq' AS integer), 0, 0, 0, 0 FROM displaced

-- fragment: moved_twin
-- The final column of a move out of hot: where an older copy of the id was displaced from, or null.
(SELECT string_agg(x.location, ',') FROM displaced x WHERE x.id = m.id) AS twin

-- fragment: count_deltas
-- Adds the rows of a CTE `deltas (queue, enqueued, succeeded, failed, retried, pending, fetched,
-- processing)` to the queues' counters, one upsert per queue: the totals, and the hot jobs per status
-- (counted instead of read from jobs_hot, whose ranges hold the dead versions of finished work).
-- Counters never go through one row per queue, which every statement of the queue would update: while a
-- snapshot is held each update walks every version kept since, and a busy queue's row reached hundreds
-- of thousands (docs/endurance.md). Each transaction writes a row of its own per queue, keyed by its id
-- (bucket xid >> 10, slot xid % 1024): no transaction ever waits for another's counter row, so a
-- producer's transaction left open for minutes holds up nobody (rows shared by several transactions did:
-- tests/crash/test_late_commits.py). fold_counters adds finished buckets into stats_summary.
{{count_deltas_alone}}
ON CONFLICT (queue, xb, slot) DO UPDATE SET enqueued = c.enqueued + excluded.enqueued,
    succeeded = c.succeeded + excluded.succeeded, failed = c.failed + excluded.failed,
    retried = c.retried + excluded.retried, pending = c.pending + excluded.pending,
    fetched = c.fetched + excluded.fetched, processing = c.processing + excluded.processing,
    at = greatest(c.at, excluded.at)

-- fragment: count_deltas_alone
-- count_deltas for a statement that is its whole transaction (run on its own, autocommit: the claims and
-- the lean enqueues): no other statement can have written this transaction's row of a queue, and the
-- GROUP BY makes one per queue, so a plain INSERT does, without ON CONFLICT's speculative insertion (25 us
-- of a one-job enqueue's 265, docs/benchmarks.md "enqueue_many"). Run inside a transaction that counted
-- the same queue before, it fails on the primary key: it cannot miscount.
INSERT INTO queue_counts AS c (queue, xb, slot, enqueued, succeeded, failed, retried, pending, fetched, processing, at)
SELECT d.queue, x.id >> 10, x.id % 1024, sum(d.enqueued), sum(d.succeeded), sum(d.failed), sum(d.retried),
       sum(d.pending), sum(d.fetched), sum(d.processing), now()
FROM deltas d CROSS JOIN {{xact_shard}}
GROUP BY d.queue, x.id ORDER BY d.queue

-- fragment: xact_shard
-- This transaction's id, which keys its counter shard rows (bucket id >> 10, slot id % 1024; see
-- count_deltas), as the one row of `x`.
(SELECT CAST(CAST(pg_current_xact_id() AS text) AS bigint) AS id) x

-- fragment: count_one_enqueued
-- count_deltas_alone for a statement that enqueued one job of :queue and is its whole transaction: its
-- shard row from the parameters, without the deltas' grouping (a tenth of a one-job enqueue's server
-- time, docs/benchmarks.md "enqueue_many as text"). Reads `signal`, so the wake-up runs.
INSERT INTO queue_counts AS c (queue, xb, slot, enqueued, succeeded, failed, retried, pending, fetched, processing, at)
SELECT CAST(:queue AS text), x.id >> 10, x.id % 1024, 1, 0, 0, 0, 1, 0, 0, now() FROM {{xact_shard}}
WHERE (SELECT count(*) FROM signal) >= 0

-- fragment: counters_deltas
-- The `counters` CTE of a move out of hot: adds `deltas` (one row per moved job and one per displaced
-- copy) to the counters.
counters AS ({{count_deltas}})

-- fragment: counters_failed
-- Moves into the DLQ: FailedTotal + 1 per moved job, and each displaced copy taken off its counter.
deltas (queue, enqueued, succeeded, failed, retried, pending, fetched, processing) AS (SELECT queue, 0, 0, 1, 0, {{left_hot}} FROM moved UNION ALL {{displaced_deltas}}),
{{counters_deltas}}

-- fragment: buckets_failed
INSERT INTO metric_buckets AS b (bucket_start, queue, outcome, failure_reason, completed_count, duration_count,
                                 total_duration_ms, max_duration_ms)
SELECT date_trunc('second', now()), queue, 1, failure_reason, count(*), count(run_ms), coalesce(sum(run_ms), 0), max(run_ms)
FROM moved GROUP BY queue, failure_reason ORDER BY queue, failure_reason
ON CONFLICT (bucket_start, queue, outcome, failure_reason) DO UPDATE SET
    completed_count = b.completed_count + excluded.completed_count,
    duration_count = b.duration_count + excluded.duration_count,
    total_duration_ms = b.total_duration_ms + excluded.total_duration_ms,
    max_duration_ms = greatest(b.max_duration_ms, excluded.max_duration_ms)

-- fragment: dlq_insert_moved
INSERT INTO jobs_dlq (id, queue, type, payload, tags, idempotency_key, priority, failure_reason, error_details,
                      fingerprint, attempt_count, worker_id, heartbeat_at, created_at, started_at, failed_at,
                      duration_ms, created_by, last_modified_by, trace_context)
SELECT id, queue, type, payload, tags, idempotency_key, priority, failure_reason, error_details, fingerprint,
       attempt_count, worker_id, heartbeat_at, created_at, started_at, now(), run_ms, created_by, last_modified_by,
       trace_context
FROM moved WHERE (SELECT count(*) FROM displaced) >= 0

-- fragment: failures_moved
-- The failure history row of every `moved` row going to the DLQ (see job_failures in schema.sql).
INSERT INTO job_failures (job_id, queue, type, attempt, outcome, failure_reason, fingerprint, error_line,
                          error_details, worker_id, failed_at)
SELECT id, queue, type, attempt_count, 'dead', failure_reason, fingerprint,
       left(split_part(error_details, E'\n', 1), 500), error_details, worker_id, now()
FROM moved

-- fragment: audit_moved
INSERT INTO audit_log (actor, action, job_id, plan_id, details)
SELECT CAST(:actor AS text), CAST(:action AS text), id, CAST(:plan_id AS text), CAST(:details AS text) FROM moved

-- fragment: counters_failed_down
-- Jobs that left the DLQ (`moved`): FailedTotal - 1 each.
deltas (queue, enqueued, succeeded, failed, retried, pending, fetched, processing) AS (SELECT queue, 0, 0, -1, 0, 0, 0, 0 FROM moved),
counters AS ({{count_deltas}})

-- fragment: left_hot
-- The status columns of a `deltas` row for a hot row (with `status`) that leaves its status.
-CAST(status = 0 AS integer), -CAST(status = 1 AS integer), -CAST(status = 2 AS integer)

-- fragment: queue_totals_from
-- The counters of each queue `q`: its folded totals (stats_summary s) and the deltas not folded yet (d),
-- read from the fold's last bucket on: the buckets before it were folded (deleted) and are not walked.
LEFT JOIN stats_summary s ON s.queue = q.name
LEFT JOIN LATERAL (
    SELECT sum(c.enqueued) AS enqueued, sum(c.succeeded) AS succeeded, sum(c.failed) AS failed,
           sum(c.retried) AS retried, sum(c.pending) AS pending, sum(c.fetched) AS fetched,
           sum(c.processing) AS processing, max(c.at) AS at
    FROM queue_counts c WHERE c.queue = q.name AND c.xb >= coalesce(s.folded_xb, 0)) d ON true

-- fragment: queue_totals
-- The counter columns of queue_totals_from's rows.
CAST(coalesce(s.enqueued_total, 0) + coalesce(d.enqueued, 0) AS bigint) AS enqueued_total,
CAST(greatest(0, coalesce(s.succeeded_total, 0) + coalesce(d.succeeded, 0)) AS bigint) AS succeeded_total,
CAST(greatest(0, coalesce(s.failed_total, 0) + coalesce(d.failed, 0)) AS bigint) AS failed_total,
CAST(coalesce(s.retried_total, 0) + coalesce(d.retried, 0) AS bigint) AS retried_total,
greatest(s.last_activity_at, d.at) AS last_activity_at

-- ---------------------------------------------------------------- schema ledger

-- fragment: insert_new_queues
-- The queue rows of the new jobs in `ins` whose queue was not seen before: a known queue's row is not
-- even probed for a conflict, and each queue is probed once, not once per job.
INSERT INTO queues (name)
SELECT d.queue FROM (SELECT DISTINCT queue FROM ins) d WHERE NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = d.queue)
ORDER BY d.queue ON CONFLICT DO NOTHING

-- fragment: queue_admitted
-- The API's cap on distinct queues (Api.MaxQueues; :max_queues NULL is no cap): a job may go to :queue
-- when that queue exists or fewer than :max_queues queues do. enqueue_one_audited applies it in its
-- statement; queue_admission tells a refusal from a lost reply, and guards the general path.
(CAST(:max_queues AS integer) IS NULL
 OR EXISTS (SELECT 1 FROM queues q WHERE q.name = CAST(:queue AS text))
 OR (SELECT count(*) FROM queues) < CAST(:max_queues AS integer))

-- fragment: enqueued_deltas
-- The `deltas` of the new jobs in `ins` (see count_deltas): enqueued and pending + 1 each.
deltas (queue, enqueued, succeeded, failed, retried, pending, fetched, processing) AS (SELECT queue, 1, 0, 0, 0, 1, 0, 0 FROM ins)

-- fragment: count_enqueued
-- Adds the new jobs of `ins` to their queues' enqueue counters (count_deltas: no row every producer of a
-- queue waits for).
{{enqueued_deltas}},
counters AS ({{count_deltas}})

-- fragment: one_job_columns
-- The columns of enqueue_one's job row, in the order one_job_row gives them.
jobs_hot (id, queue, type, payload, tags, idempotency_key, priority, status, attempt_count, scheduled_at, due_at,
          created_at, updated_at, created_by, trace_context)

-- fragment: one_job_row
-- A one-job statement's job as one row of one_job_columns.
SELECT v.id, v.queue, v.type, v.payload, v.tags, NULL, v.priority, 0, 0, v.sched, coalesce(v.sched, now()),
       now(), now(), v.created_by, v.trace_context
FROM (SELECT CAST(:id AS text) AS id, CAST(:queue AS text) AS queue, CAST(:type AS text) AS type,
             CAST(:payload AS text) AS payload, CAST(:tags AS text) AS tags,
             CAST(:priority AS integer) AS priority, CAST(:created_by AS text) AS created_by,
             CAST(:trace_context AS text) AS trace_context,
             coalesce(CAST(:scheduled_at AS timestamptz),
                      now() + make_interval(secs => CAST(:delay_s AS double precision))) AS sched) v

-- fragment: one_job_insert
-- enqueue_one's INSERT of the one job (CTE `ins`): its values as given, nothing returned. No ON CONFLICT
-- (see fresh_insert): it inserts the job or the statement fails, so what follows needs nothing from it.
ins AS (
    INSERT INTO {{one_job_columns}}
    {{one_job_row}}
)

-- fragment: one_job_rest
-- enqueue_one's counter shard, wake-up and reply, after `ins`.
{{count_enqueued}},
moved_rows AS (SELECT id FROM ins),
{{wake_workers}}
SELECT 0 AS ord, id, 'new' AS status FROM ins WHERE (SELECT count(*) FROM signal) >= 0

-- fragment: wake_workers
-- Wakes listening workers (engine/wakeup.py) once per statement that made jobs claimable, however many:
-- at most one pg_notify call, from the first row of `moved_rows` (a CTE the statement defines just
-- before), delivered when the transaction commits (never on rollback). Identical notifications of one
-- transaction are folded into one by PostgreSQL. Sent only while a worker is marked idle (a notifying
-- commit holds a database-wide lock until it is flushed: notifying producers commit one at a time), or
-- when :notify says so (an enqueue in the application's own transaction, which may have begun before
-- the worker marked itself).
signal AS (
    SELECT pg_notify('chokaq_jobs', '') FROM (SELECT 1 FROM moved_rows LIMIT 1) x
    WHERE CAST(:notify AS boolean)
       OR EXISTS (SELECT 1 FROM idle_workers w WHERE w.seen_at > now() - interval '1 minute')
)

-- name: migrations_lock
-- Serialises concurrent `chokaq migrate` runs for the rest of the transaction. An index build over a large
-- table may outlast Storage.CommandTimeout: the migration's own transaction has no statement timeout.
SET LOCAL statement_timeout = 0;
SELECT pg_advisory_xact_lock(7305528210001);

-- name: migrations_ensure_ledger
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     integer      NOT NULL,
    name        varchar(200) NOT NULL,
    applied_at  timestamptz  NOT NULL DEFAULT now(),
    CONSTRAINT pk_schema_migrations PRIMARY KEY (version)
);

-- name: migrations_applied
SELECT version, name, applied_at FROM schema_migrations ORDER BY version;

-- name: migrations_record
INSERT INTO schema_migrations (version, name) VALUES (CAST(:version AS integer), CAST(:name AS text));

-- name: schema_has_jobs
SELECT count(*) AS n FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'jobs_hot';

-- name: schema_ledger_exists
SELECT count(*) AS n FROM information_schema.tables
WHERE table_schema = current_schema() AND table_name = 'schema_migrations';

-- name: mark_idle
-- This worker waits for work: enqueues NOTIFY while it is marked (see the enqueue's moved_rows).
INSERT INTO idle_workers (worker_id, seen_at) VALUES (CAST(:worker_id AS text), now())
ON CONFLICT (worker_id) DO UPDATE SET seen_at = excluded.seen_at;

-- name: unmark_idle
DELETE FROM idle_workers WHERE worker_id = CAST(:worker_id AS text);

-- name: next_due
-- Seconds from now (the database clock) until the earliest pending job that is not due yet is due, of
-- the named queues (:queues, null for every queue); no row when none waits. The idle worker's timer.
SELECT EXTRACT(EPOCH FROM (h.due_at - now())) AS wait_s FROM jobs_hot h
WHERE h.status = 0 AND h.scheduled_at IS NOT NULL AND h.due_at > now()
  AND (CAST(:queues AS jsonb) IS NULL OR h.queue IN (SELECT jsonb_array_elements_text(CAST(:queues AS jsonb))))
ORDER BY h.due_at LIMIT 1;

-- name: db_now
SELECT now() AS now_at;

-- ---------------------------------------------------------------- producer

-- name: enqueue
-- Inserts new jobs; an idempotency key already held by a hot job, or an id already used anywhere,
-- inserts nothing for that item. Returns one row per item in input order: status new | duplicate | conflict.
WITH items AS (
    SELECT i.*, coalesce(i.scheduled_at, now() + make_interval(secs => i.delay_s)) AS sched,
           -- 1 for the first item of each idempotency key in the batch: only that one may insert.
           row_number() OVER (PARTITION BY i.idempotency_key ORDER BY i.ord) AS key_rank
    FROM jsonb_to_recordset(CAST(:items AS jsonb)) AS i(ord integer, id text, queue text, type text, payload text,
        tags text, idempotency_key text, priority integer, delay_s double precision, scheduled_at timestamptz,
        created_by text, trace_context text)
),
ins AS (
    INSERT INTO jobs_hot (id, queue, type, payload, tags, idempotency_key, priority, status, attempt_count,
                          scheduled_at, due_at, created_at, updated_at, created_by, trace_context)
    SELECT i.id, i.queue, i.type, i.payload, i.tags, i.idempotency_key, i.priority, 0, 0, i.sched,
           coalesce(i.sched, now()), now(), now(), i.created_by, i.trace_context
    FROM items i
    WHERE NOT EXISTS (SELECT 1 FROM jobs_archive a WHERE a.id = i.id)
      AND NOT EXISTS (SELECT 1 FROM jobs_dlq d WHERE d.id = i.id)
      -- A key repeated in the batch: its first item inserts, the others are duplicates of it.
      AND (i.idempotency_key IS NULL OR i.key_rank = 1)
    -- Rows in id order: concurrent enqueues of overlapping explicit ids then wait for each other's
    -- uncommitted rows in one direction only (in item order they deadlocked, and retried, constantly).
    ORDER BY i.id
    ON CONFLICT DO NOTHING
    RETURNING id, queue
),
new_queues AS ({{insert_new_queues}}),
{{count_enqueued}},
moved_rows AS (SELECT id FROM ins),
{{wake_workers}}
SELECT i.ord, coalesce(ins.id, h.id) AS id,
       CASE WHEN ins.id IS NOT NULL THEN 'new'
            WHEN i.idempotency_key IS NOT NULL AND (h.id IS NOT NULL OR NOT EXISTS (
                 SELECT 1 FROM jobs_hot x WHERE x.id = i.id UNION ALL SELECT 1 FROM jobs_archive a WHERE a.id = i.id
                 UNION ALL SELECT 1 FROM jobs_dlq d WHERE d.id = i.id)) THEN 'duplicate'
            ELSE 'conflict' END AS status
FROM items i
LEFT JOIN ins ON ins.id = i.id
LEFT JOIN jobs_hot h ON ins.id IS NULL AND h.idempotency_key = i.idempotency_key
-- A SELECT-only CTE runs only when read: this reads it once.
WHERE (SELECT count(*) FROM signal) >= 0
ORDER BY i.ord;

-- fragment: one_job_quiet_rest
-- enqueue_one's wake-up and counter shard after `ins`, from the parameters (the job went in, or the
-- statement failed: a unique violation, never for a generated id). The shard's insert is the statement's
-- own, so nothing comes back (the reply's row told the store nothing: 30 us of the statement,
-- docs/benchmarks.md "enqueue_many").
moved_rows AS (SELECT CAST(:queue AS text) AS queue),
{{wake_workers}}
{{count_one_enqueued}}

-- name: enqueue_one
-- enqueue's lean form for the commonest call: one job, an id the store generated (so it cannot be in the
-- archive or the DLQ) and no idempotency key. One INSERT of given values, which PostgreSQL plans and
-- runs in a fraction of the general statement's time (docs/benchmarks.md); the queue row, the counter
-- shard and the wake-up as in enqueue; no row back. Never sent twice: one whose reply was lost goes again
-- by `enqueue` (Producer._enqueue_unsure). Prepared on the producer's connections
-- (PostgresDialect.prepare_on_use).
WITH {{one_job_insert}},
new_queues AS (
    INSERT INTO queues (name)
    SELECT CAST(:queue AS text) WHERE NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = CAST(:queue AS text))
    ON CONFLICT DO NOTHING
),
{{one_job_quiet_rest}};

-- name: enqueue_one_known
-- enqueue_one for a queue whose row the producer saw committed a moment ago (Producer, KNOWN_QUEUE_S):
-- no look at the queues table.
WITH {{one_job_insert}},
{{one_job_quiet_rest}};

-- name: enqueue_one_audited
-- enqueue_one on an operator's behalf (the API's POST /jobs of a job with a generated id and no
-- idempotency key): its audit row commits in the same statement, where the general path took a
-- transaction of four statements, each planned per call (docs/producers.md). With :max_queues, a job for
-- a queue that does not exist yet goes in only while fewer than that many queues exist; no row back then,
-- and the store reads queue_admission to tell that refusal from a lost reply. Unlike enqueue_one it runs
-- on the store's ordinary connections, planned per call: prepared, it needed producer connections beside
-- the ones every other request of the API's threads uses, and a pool of 16 under 16 busy request threads
-- closed and reopened connections of the two kinds in turn (56 requests/s instead of 220).
WITH admit AS (SELECT {{queue_admitted}} AS ok),
ins AS (
    INSERT INTO {{one_job_columns}}
    SELECT r.* FROM ({{one_job_row}}) r WHERE (SELECT ok FROM admit)
    ON CONFLICT DO NOTHING
    RETURNING id, queue
),
new_queues AS ({{insert_new_queues}}),
audited AS (
    INSERT INTO audit_log (actor, action, job_id, count) SELECT CAST(:actor AS text), 'enqueue', id, 1 FROM ins
),
{{one_job_rest}};

-- fragment: fresh_insert
-- enqueue_fresh's INSERT of its items (CTE `ins`). No ORDER BY: the ids were generated by the store, so no
-- other statement inserts any of them and no two groups can wait for each other's rows (the sort was a
-- tenth of a 1000-job statement). No ON CONFLICT either: nothing else holds a generated id, and this
-- statement is never sent twice (one whose reply was lost goes again by `enqueue`, which looks in the
-- archive and the DLQ: Producer._enqueue_unsure). Its speculative insertion cost 1.4 us a row, a seventh
-- of the statement (docs/benchmarks.md "enqueue_many"). So the statement inserts every item or fails, and
-- nothing comes back from the INSERT: the counters and the wake-up read the items' count per queue from
-- :counts (`fresh_counts`), which the producer sends with them. Returning the rows to count them was a
-- tenth of the statement (docs/benchmarks.md "enqueue_many as text").
ins AS (
    INSERT INTO jobs_hot (id, queue, type, payload, tags, idempotency_key, priority, status, attempt_count,
                          scheduled_at, due_at, created_at, updated_at, created_by, trace_context)
    SELECT i.id, i.queue, i.type, i.payload, i.tags, NULL, i.priority, 0, 0, i.sched, coalesce(i.sched, now()),
           now(), now(), i.created_by, i.trace_context
    FROM (SELECT j.*, coalesce(j.scheduled_at, now() + make_interval(secs => j.delay_s)) AS sched
          FROM jsonb_to_recordset(CAST(:items AS jsonb)) AS j(id text, queue text, type text, payload text,
              tags text, priority integer, delay_s double precision, scheduled_at timestamptz,
              created_by text, trace_context text)) i
)

-- fragment: fresh_counts
-- The items' count per queue (:counts, JSON [{queue, n}]), as the producer counted them (CTE `counts`).
counts AS (SELECT c.queue, c.n FROM jsonb_to_recordset(CAST(:counts AS jsonb)) AS c(queue text, n integer))

-- fragment: fresh_rest
-- enqueue_fresh's counters and wake-up after `counts`; one row back, how many jobs it inserted: all of
-- them, or the statement failed. A statement of its own (count_deltas_alone).
deltas (queue, enqueued, succeeded, failed, retried, pending, fetched, processing) AS (
    SELECT queue, n, 0, 0, 0, n, 0, 0 FROM counts
),
counters AS ({{count_deltas_alone}}),
moved_rows AS (SELECT queue FROM counts),
{{wake_workers}}
SELECT sum(n) AS n FROM counts WHERE (SELECT count(*) FROM signal) >= 0

-- name: enqueue_fresh
-- enqueue_one for several jobs: enqueue_many of jobs with generated ids and no idempotency keys, and
-- single-job enqueues of concurrent threads that the producer sends together (storage/combining.py). Like
-- enqueue_one, no archive, DLQ or key look-up; prepared on the producer's connections (the general
-- enqueue statement is planned per call: 2-3 ms for a few jobs against 0.7 ms for this one). The queue
-- rows of queues not seen before, from `counts` (insert_new_queues reads them from `ins`).
WITH {{fresh_insert}},
{{fresh_counts}},
new_queues AS (
    INSERT INTO queues (name)
    SELECT c.queue FROM counts c WHERE NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = c.queue)
    ORDER BY c.queue ON CONFLICT DO NOTHING
),
{{fresh_rest}};

-- name: enqueue_fresh_known
-- enqueue_fresh when every item's queue row was seen committed a moment ago (KNOWN_QUEUE_S): no look at
-- the queues table.
WITH {{fresh_insert}},
{{fresh_counts}},
{{fresh_rest}};

-- name: find_idempotency_keys
SELECT idempotency_key, id FROM jobs_hot
WHERE idempotency_key IN (SELECT jsonb_array_elements_text(CAST(:keys AS jsonb)));

-- name: enqueue_undo_raced
-- The second statement of an enqueue of explicit ids, in its transaction: takes back the jobs it has
-- just inserted (:ids, not yet committed, so no one else has seen them) whose id is in the archive or
-- the DLQ. The enqueue statement's NOT EXISTS checks read the snapshot taken when it started; a move of
-- the same id out of hot that committed while the insert waited for that hot row is invisible to them
-- but visible here (READ COMMITTED: a new snapshot per statement). Those items answer `conflict`.
WITH raced AS (
    SELECT a.id FROM jobs_archive a WHERE a.id = ANY(ARRAY(SELECT jsonb_array_elements_text(CAST(:ids AS jsonb))))
    UNION
    SELECT d.id FROM jobs_dlq d WHERE d.id = ANY(ARRAY(SELECT jsonb_array_elements_text(CAST(:ids AS jsonb))))
),
undone AS (
    DELETE FROM jobs_hot h WHERE h.id = ANY(ARRAY(SELECT id FROM raced)) RETURNING h.id, h.queue
),
deltas (queue, enqueued, succeeded, failed, retried, pending, fetched, processing) AS (SELECT queue, -1, 0, 0, 0, -1, 0, 0 FROM undone),
counters AS ({{count_deltas}})
SELECT id FROM undone;

-- name: enqueued_unseen
-- After an enqueue that may have committed and lost its reply: which of :items (the enqueue's own
-- items) exist, in any table, with the content that enqueue sent, so the retry that answered
-- `conflict` or `duplicate` for them reports them as created.
WITH items AS (
    SELECT * FROM jsonb_to_recordset(CAST(:items AS jsonb)) AS i(id text, queue text, type text, payload text,
        tags text, idempotency_key text, priority integer, created_by text)
),
found AS (
    SELECT h.id, h.queue, h.type, h.payload, h.tags, h.idempotency_key, h.priority, h.created_by
    FROM jobs_hot h WHERE h.id = ANY(ARRAY(SELECT id FROM items))
    UNION ALL
    SELECT a.id, a.queue, a.type, a.payload, a.tags, a.idempotency_key, a.priority, a.created_by
    FROM jobs_archive a WHERE a.id = ANY(ARRAY(SELECT id FROM items))
    UNION ALL
    SELECT d.id, d.queue, d.type, d.payload, d.tags, d.idempotency_key, d.priority, d.created_by
    FROM jobs_dlq d WHERE d.id = ANY(ARRAY(SELECT id FROM items))
)
SELECT f.id FROM found f JOIN items i ON i.id = f.id
WHERE f.queue = i.queue AND f.type = i.type AND f.payload IS NOT DISTINCT FROM i.payload
  AND f.tags IS NOT DISTINCT FROM i.tags AND f.idempotency_key IS NOT DISTINCT FROM i.idempotency_key
  AND f.priority = i.priority AND f.created_by IS NOT DISTINCT FROM i.created_by;

-- ---------------------------------------------------------------- worker (every write is fenced by worker_id)

-- name: lock_capped_queues
-- Serialises fetches that may claim from queues with max_workers, so the cap is exact: the fetch that
-- follows in the same transaction takes a fresh snapshot after this lock.
SELECT name FROM queues WHERE max_workers IS NOT NULL AND NOT paused AND active
  AND (CAST(:queues AS jsonb) IS NULL OR name IN (SELECT jsonb_array_elements_text(CAST(:queues AS jsonb))))
ORDER BY name FOR UPDATE;

-- fragment: claim_read
-- The first part of a claim (fetch, fetch_open): the worker's lanes read from their positions, and the
-- rows made pending by transactions its previous claim could not see.
cur AS (
    SELECT c.q, c.p, c.d, c.i, c.x FROM jsonb_to_recordset(CAST(:lanes AS jsonb))
        AS c(q text, p integer, d timestamptz, i text, x boolean)
),
named AS (SELECT jsonb_array_elements_text(CAST(:queues AS jsonb)) AS name),
closed AS (SELECT q.name FROM queues q WHERE q.paused OR NOT q.active),
lanes AS (
    SELECT c.q, c.p, c.d, c.i, c.x FROM cur c
    WHERE NOT EXISTS (SELECT 1 FROM closed x WHERE x.name = c.q)
      AND (CAST(:queues AS jsonb) IS NULL OR c.q IN (SELECT name FROM named))
),
win AS (
    SELECT w.t, w.id, w.queue, w.priority, w.due_at, w.due_at <= now() AS due
    FROM lanes l CROSS JOIN LATERAL (
        SELECT h.ctid AS t, h.id, h.queue, h.priority, h.due_at FROM jobs_hot h
        WHERE h.queue = l.q AND h.priority = l.p AND h.status = 0 AND (h.due_at, h.id) >= (l.d, l.i)
          AND NOT (l.x AND h.due_at = l.d AND h.id = l.i)
        ORDER BY h.due_at, h.id
        LIMIT CAST(:window AS integer)) w
),
snap AS (SELECT pg_current_snapshot() AS s),
-- Transactions unfinished at the previous claim that have ended since (the rest stay unfinished: their
-- rows are not visible yet, and the worker asks again next time).
settled AS (
    SELECT CAST(x AS xid8) AS xid FROM jsonb_array_elements_text(CAST(:xip AS jsonb)) x
    WHERE NOT (CAST(x AS xid8) = ANY (ARRAY(SELECT pg_snapshot_xip(s) FROM snap)))
),
-- Each read below has one index that answers it in order (ORDER BY, `status + 0`), so no plan, generic
-- or made from the statistics of an empty table, can walk a whole index instead.
news AS (
    (SELECT h.ctid AS t, h.id, h.queue, h.priority, h.due_at FROM jobs_hot h
     WHERE h.status = 0 AND h.ready_xid >= CAST(:xmax AS xid8) ORDER BY h.ready_xid)
    UNION ALL
    (SELECT h.ctid AS t, h.id, h.queue, h.priority, h.due_at FROM jobs_hot h
     WHERE h.status = 0 AND h.ready_xid = ANY (ARRAY(SELECT xid FROM settled)) ORDER BY h.ready_xid)
)

-- fragment: claim_take
-- The claim's update of the rows `picked` chose, and its counter deltas.
started AS (SELECT ARRAY(SELECT t FROM picked WHERE go) AS ts),
-- The locked rows by the ctids the locks returned (the newest versions: nobody else may change them
-- now), a TID scan; the ones to start by the same list.
claimed AS (
    UPDATE jobs_hot h SET status = CASE WHEN h.ctid = ANY (s.ts) THEN 2 ELSE 1 END,
                          worker_id = CAST(:worker_id AS text),
                          attempt_count = h.attempt_count + CASE WHEN h.ctid = ANY (s.ts) THEN 1 ELSE 0 END,
                          started_at = CASE WHEN h.ctid = ANY (s.ts) THEN now() ELSE h.started_at END,
                          heartbeat_at = CASE WHEN h.ctid = ANY (s.ts) THEN now() ELSE h.heartbeat_at END,
                          updated_at = now()
    FROM started s
    WHERE h.ctid = ANY (ARRAY(SELECT t FROM picked))
    RETURNING {{claimed_columns}}
),
deltas (queue, enqueued, succeeded, failed, retried, pending, fetched, processing) AS (
    SELECT queue, 0, 0, 0, 0, -1, CAST(status = 1 AS integer), CAST(status = 2 AS integer) FROM claimed
),
-- A claim is its transaction's only counting statement (alone, or after lock_capped_queues).
counters AS ({{count_deltas_alone}})

-- fragment: claim_meta_queues_snap
-- The last rows of a claim's `meta`: the closed and the capped queues, and the statement's snapshot.
SELECT 'closed', NULL, c.name, NULL, NULL, NULL, NULL, NULL FROM closed c
UNION ALL
SELECT 'capped', NULL, c.name, NULL, NULL, NULL, NULL, NULL FROM capped c
UNION ALL
SELECT 'snap', NULL, NULL, NULL, NULL, CAST(pg_snapshot_xmax(s) AS text),
       (SELECT CAST(coalesce(json_agg(CAST(x AS text)), '[]') AS text) FROM pg_snapshot_xip(s) x), NULL
FROM snap

-- fragment: claim_reply
-- A claim's reply: the jobs, then `meta`, packed into one JSON text (`packed_rows`: the column names,
-- then the rows as arrays; Dialect.rows unpacks it). The driver converts one value instead of twenty per
-- row: the claim's costliest client-side part (docs/benchmarks.md "Packed replies"). Arrays, not
-- json_agg of the rows: the server builds them in half the time objects take.
reply AS (
    SELECT 'job' AS kind, k.id, k.queue, k.type, k.payload, k.tags, k.priority, k.attempt_count, k.created_at,
           k.scheduled_at, k.due_at, k.idempotency_key, k.created_by, k.status, k.started_at, k.trace_context,
           k.renewed_at, CAST(NULL AS text) AS snap_xmax, CAST(NULL AS text) AS snap_xip, CAST(NULL AS text) AS tid
    FROM claimed k
    UNION ALL
    SELECT m.kind, m.id, m.queue, NULL, NULL, NULL, m.priority, NULL, NULL, NULL, m.due_at, NULL, NULL, NULL, NULL,
           NULL, NULL, m.snap_xmax, m.snap_xip, m.tid
    FROM meta m
)
SELECT CAST(json_build_array(
    json_build_array('kind', 'id', 'queue', 'type', 'payload', 'tags', 'priority', 'attempt_count', 'created_at',
                     'scheduled_at', 'due_at', 'idempotency_key', 'created_by', 'status', 'started_at',
                     'trace_context', 'renewed_at', 'snap_xmax', 'snap_xip', 'tid'),
    json_agg(json_build_array(r.kind, r.id, r.queue, r.type, r.payload, r.tags, r.priority, r.attempt_count,
                              r.created_at, r.scheduled_at, r.due_at, r.idempotency_key, r.created_by, r.status,
                              r.started_at, r.trace_context, r.renewed_at, r.snap_xmax, r.snap_xip, r.tid))
) AS text) AS packed_rows
FROM reply r

-- name: fetch
-- Claims up to :limit due pending jobs, priority first then due time then id, skipping rows other
-- sessions hold; queues with max_workers get at most (max_workers - fetched - processing) of them.
-- Claim-and-start: the first :start rows in claim order go straight to processing (attempt + 1,
-- started_at and heartbeat_at now), for execution slots the worker holds free for them; the rest are
-- fetched. Each claimed row comes back with kind 'job' and its status.
--
-- Where pending jobs are found (docs/endurance.md): the worker passes its lanes (:lanes, JSON
-- [{q, p, d, i, x}]: queue, priority, and the position (due_at, id) where the jobs it has not claimed
-- begin, x when that row itself is passed) and the snapshot of its previous claim (:xmax, :xip). Each
-- lane is read from its position on, :window rows at most: the index entries behind it (jobs claimed
-- since, dead but kept while any session holds an old snapshot) are never walked. Rows made pending by a
-- transaction that previous snapshot could not see (ready_xid at or past its xmax, or among its
-- in-progress xids and finished now) are read through ix_jobs_hot_ready_xid wherever they sit: a late
-- commit, a release, a retry, a resurrect, an edit, a new lane. :stuck names rows the worker passed
-- because another session held them for long (JSON [{id, t}]: the id and the ctid it was read at); they
-- are looked up by ctid each time until they go. One updated since has a new ctid and leaves the list:
-- every update that leaves a job pending sets ready_xid, and the claim reads it there.
--
-- Plans (docs/endurance.md "Plans"): this statement runs with one generic plan, made again after every
-- VACUUM or ANALYZE of jobs_hot from whatever the statistics say then. Behind a held snapshot they say
-- few live rows in many pages, and a walk of a whole index looks like one page: so no read of jobs_hot
-- here may have any way to it but its own index bounds or ctids. No join touches jobs_hot (a join's
-- sort order made whole-index walks candidates), the rows chosen are locked and updated by ctid, and no
-- condition on id sits beside the ctid lookups.
--
-- Besides the jobs (kind 'job'): one row of kind 'lane' per lane with a candidate this claim did not
-- take (stuck ones apart), the first in claim order, in the jobs' columns (id, queue, priority, due_at) and
-- its ctid (tid): the position the lane's next read starts from. A lane with none moves on after the last
-- job it gave, which the worker works out from the jobs (storage/lanes.py); a job claimed after the
-- lane's first candidate left means another session holds that one (the worker marks it stuck when that
-- lasts). Rows of kind 'stuck' (still pending, not claimed), 'closed' (paused or inactive queues: the
-- worker forgets their lanes) and one of kind 'snap': this statement's snapshot.
WITH {{claim_read}},
capped AS (
    SELECT q.name, greatest(q.max_workers - (SELECT count(*) FROM jobs_hot a
                                             WHERE a.queue = q.name AND a.status IN (1, 2)), 0) AS slots
    FROM queues q
    WHERE q.max_workers IS NOT NULL AND NOT q.paused AND q.active
      AND (CAST(:queues AS jsonb) IS NULL OR q.name IN (SELECT name FROM named))
),
stuck_ids AS (
    SELECT s.id, CAST(s.t AS tid) AS t FROM jsonb_to_recordset(CAST(:stuck AS jsonb)) AS s(id text, t text)
),
stuck AS (
    SELECT x.* FROM (
        SELECT h.ctid AS t, h.id, h.queue, h.priority, h.due_at FROM jobs_hot h
        WHERE h.ctid = ANY (ARRAY(SELECT t FROM stuck_ids)) AND h.status + 0 = 0
        OFFSET 0) x  -- the id check stays out here, away from the TID scan
    WHERE EXISTS (SELECT 1 FROM stuck_ids s WHERE s.t = x.t AND s.id = x.id)
),
cand AS (
    SELECT t, id, queue, priority, due_at, due FROM win
    UNION ALL
    SELECT n.t, n.id, n.queue, n.priority, n.due_at, n.due_at <= now()
    FROM (SELECT * FROM news UNION ALL SELECT * FROM stuck) n
    WHERE NOT EXISTS (SELECT 1 FROM closed x WHERE x.name = n.queue)
      AND (CAST(:queues AS jsonb) IS NULL OR n.queue IN (SELECT name FROM named))
),
free AS (
    SELECT h.ctid AS t, h.id, h.priority, h.due_at FROM jobs_hot h
    -- The candidates by ctid, a TID scan: same statement, same snapshot, so each is the very row version
    -- read above. One the lock finds updated since (another claim, an edit) is re-read at its newest
    -- version and must pass the filters again (`status + 0`: never a plan through a partial index).
    -- Capped queues by a list, not a join (see "Plans" above).
    WHERE h.ctid = ANY (ARRAY(SELECT t FROM cand WHERE due)) AND h.status + 0 = 0 AND h.due_at <= now()
      AND h.queue <> ALL (ARRAY(SELECT name FROM capped))
    ORDER BY h.priority DESC, h.due_at, h.id
    LIMIT CAST(:limit AS integer)
    FOR UPDATE OF h SKIP LOCKED
),
limited AS (
    SELECT p.t, p.id, p.priority, p.due_at FROM capped c CROSS JOIN LATERAL (
        SELECT h.ctid AS t, h.id, h.priority, h.due_at FROM jobs_hot h
        WHERE h.ctid = ANY (ARRAY(SELECT t FROM cand WHERE due AND cand.queue = c.name))
          AND h.status + 0 = 0 AND h.due_at <= now()
        ORDER BY h.priority DESC, h.due_at, h.id
        LIMIT least(c.slots, CAST(:limit AS integer))
        FOR UPDATE OF h SKIP LOCKED) p
),
picked AS (
    SELECT t, id, row_number() OVER (ORDER BY priority DESC, due_at, id) <= CAST(:start AS integer) AS go
    FROM (SELECT * FROM free UNION ALL SELECT * FROM limited) u
    ORDER BY priority DESC, due_at, id LIMIT CAST(:limit AS integer)
),
{{claim_take}},
-- Per lane, the first candidate this claim did not take, stuck ones apart: the lane's next position.
first_left AS (
    SELECT DISTINCT ON (c.queue, c.priority) c.queue, c.priority, c.due_at, c.id, c.t FROM cand c
    WHERE NOT EXISTS (SELECT 1 FROM claimed k WHERE k.id = c.id)
      AND NOT EXISTS (SELECT 1 FROM stuck_ids s WHERE s.id = c.id)
    ORDER BY c.queue, c.priority, c.due_at, c.id
),
-- What the worker keeps besides the jobs (see above), in the jobs' columns where they fit.
meta (kind, id, queue, priority, due_at, snap_xmax, snap_xip, tid) AS (
    SELECT 'lane', f.id, f.queue, f.priority, f.due_at, CAST(NULL AS text), CAST(NULL AS text), CAST(f.t AS text)
    FROM first_left f
    UNION ALL
    SELECT 'stuck', s.id, NULL, NULL, NULL, NULL, NULL, CAST(s.t AS text) FROM stuck s
    WHERE NOT EXISTS (SELECT 1 FROM claimed k WHERE k.id = s.id)
      AND NOT EXISTS (SELECT 1 FROM closed x WHERE x.name = s.queue)
    UNION ALL
    {{claim_meta_queues_snap}}
),
{{claim_reply}};

-- name: fetch_open
-- `fetch` for a worker that passed no job as stuck, while no queue it claims from has a cap (the last
-- claim named none): the same claim without the parts that handle those (storage/lanes.py chooses).
-- Each part runs, or is at least set up, on every execution; this one costs the database a seventh less
-- per claim. Rows, order and reply as `fetch`'s; rows of kind 'capped' name open queues with a cap: then
-- this claim takes nothing, and the worker claims with `fetch` at once.
WITH {{claim_read}},
-- Open queues with a cap: while there is one, this claim takes nothing and names them, and the worker
-- claims with `fetch`, which keeps caps (and claim order across them).
capped AS (
    SELECT q.name FROM queues q
    WHERE q.max_workers IS NOT NULL AND NOT q.paused AND q.active
      AND (CAST(:queues AS jsonb) IS NULL OR q.name IN (SELECT name FROM named))
),
cand AS (
    SELECT t, id, queue, priority, due_at, due FROM win
    UNION ALL
    SELECT n.t, n.id, n.queue, n.priority, n.due_at, n.due_at <= now()
    FROM news n
    WHERE NOT EXISTS (SELECT 1 FROM closed x WHERE x.name = n.queue)
      AND (CAST(:queues AS jsonb) IS NULL OR n.queue IN (SELECT name FROM named))
),
free AS (
    SELECT h.ctid AS t, h.id, h.priority, h.due_at FROM jobs_hot h
    -- The candidates by ctid, a TID scan: same statement, same snapshot, so each is the very row version
    -- read above. One the lock finds updated since (another claim, an edit) is re-read at its newest
    -- version and must pass the filters again (`status + 0`: never a plan through a partial index).
    WHERE h.ctid = ANY (ARRAY(SELECT t FROM cand WHERE due)) AND h.status + 0 = 0 AND h.due_at <= now()
      AND NOT EXISTS (SELECT 1 FROM capped)
    ORDER BY h.priority DESC, h.due_at, h.id
    LIMIT CAST(:limit AS integer)
    FOR UPDATE OF h SKIP LOCKED
),
picked AS (
    SELECT t, id, row_number() OVER (ORDER BY priority DESC, due_at, id) <= CAST(:start AS integer) AS go
    FROM free
),
{{claim_take}},
-- Per lane, the first candidate this claim did not take: the lane's next position.
first_left AS (
    SELECT DISTINCT ON (c.queue, c.priority) c.queue, c.priority, c.due_at, c.id, c.t FROM cand c
    WHERE NOT EXISTS (SELECT 1 FROM claimed k WHERE k.id = c.id)
    ORDER BY c.queue, c.priority, c.due_at, c.id
),
-- What the worker keeps besides the jobs (see `fetch`), in the jobs' columns where they fit.
meta (kind, id, queue, priority, due_at, snap_xmax, snap_xip, tid) AS (
    SELECT 'lane', f.id, f.queue, f.priority, f.due_at, CAST(NULL AS text), CAST(NULL AS text), CAST(f.t AS text)
    FROM first_left f
    UNION ALL
    {{claim_meta_queues_snap}}
),
{{claim_reply}};

-- name: discover_lanes
-- The lanes (queue, priority) holding pending jobs, of the named queues (:queues, JSON) or of all: a
-- worker's first claim, and a queue that opened again (resumed, reactivated), start from these. A loose
-- scan of ix_jobs_hot_lane, one probe per queue and per priority; it steps over the entries of jobs
-- claimed while an old snapshot was held, once. Ends with the statement's snapshot (kind 'snap'), which
-- the worker's next claim takes as its previous one.
WITH RECURSIVE scanned (name) AS (
    SELECT (SELECT min(h.queue) FROM jobs_hot h WHERE h.status = 0) WHERE CAST(:queues AS jsonb) IS NULL
    UNION ALL
    SELECT (SELECT min(h.queue) FROM jobs_hot h WHERE h.status = 0 AND h.queue > q.name)
    FROM scanned q WHERE q.name IS NOT NULL
),
qs AS (
    SELECT name FROM scanned WHERE name IS NOT NULL
    UNION ALL
    SELECT DISTINCT jsonb_array_elements_text(CAST(:queues AS jsonb))
),
ps (queue, priority) AS (
    SELECT q.name, (SELECT max(h.priority) FROM jobs_hot h WHERE h.status = 0 AND h.queue = q.name) FROM qs q
    UNION ALL
    SELECT p.queue, (SELECT max(h.priority) FROM jobs_hot h
                     WHERE h.status = 0 AND h.queue = p.queue AND h.priority < p.priority)
    FROM ps p WHERE p.priority IS NOT NULL
)
SELECT 'lane' AS kind, queue, priority, CAST(NULL AS text) AS snap_xmax, CAST(NULL AS text) AS snap_xip
FROM ps WHERE priority IS NOT NULL
UNION ALL
SELECT 'snap', NULL, NULL, CAST(pg_snapshot_xmax(pg_current_snapshot()) AS text),
       (SELECT CAST(coalesce(json_agg(CAST(x AS text)), '[]') AS text) FROM pg_snapshot_xip(pg_current_snapshot()) x);


-- name: mark_processing
-- The lease gate before user code runs: only the owning worker, only from fetched.
-- Worker statements on known ids go through the primary key whatever the statistics say:
-- `id = ANY(ARRAY(...))` (as `id IN (SELECT ...)` the planner chose sequential scans right after a bulk
-- enqueue), and `status + 0 = n` so the tiny-looking partial status indexes are not chosen instead (under
-- heavy churn they hold thousands of dead entries until vacuum: 1-3 ms per call instead of 0.1 ms).
WITH moved AS (
    UPDATE jobs_hot SET status = 2, attempt_count = attempt_count + 1, started_at = now(), heartbeat_at = now(),
                        updated_at = now()
    WHERE id = ANY(ARRAY(SELECT jsonb_array_elements_text(CAST(:ids AS jsonb))))
      AND worker_id = CAST(:worker_id AS text) AND status + 0 = 1
    RETURNING id, queue, attempt_count, started_at
),
deltas (queue, enqueued, succeeded, failed, retried, pending, fetched, processing) AS (SELECT queue, 0, 0, 0, 0, 0, -1, 1 FROM moved),
counters AS ({{count_deltas}})
SELECT id, attempt_count, started_at FROM moved;

-- name: owned_processing
-- Which of :ids this worker already runs: after a mark_processing whose reply was lost (the connection
-- died after the commit) a retry finds its rows processing under this worker, and only this worker's own
-- start can have put them there.
SELECT id, attempt_count, started_at FROM jobs_hot
WHERE id = ANY(ARRAY(SELECT jsonb_array_elements_text(CAST(:ids AS jsonb))))
  AND worker_id = CAST(:worker_id AS text) AND status + 0 = 2;

-- name: heartbeat
-- One statement for every running job of a worker; returns the ids the worker still owns, `beat` false
-- for a row another session holds locked (an operator's open transaction, a report's SELECT ... FOR
-- UPDATE): such a row is skipped, not waited for, so one locked row never delays the other jobs'
-- heartbeats. The locking read checks ownership again on the row's latest version.
WITH mine AS (
  SELECT id FROM jobs_hot
  WHERE id = ANY(ARRAY(SELECT jsonb_array_elements_text(CAST(:ids AS jsonb))))
    AND worker_id = CAST(:worker_id AS text) AND status + 0 = 2
), free AS (
  SELECT h.id FROM jobs_hot h
  WHERE h.id = ANY(ARRAY(SELECT id FROM mine))
    AND h.worker_id = CAST(:worker_id AS text) AND h.status + 0 = 2
  FOR UPDATE SKIP LOCKED
), beat AS (
  UPDATE jobs_hot h SET heartbeat_at = now(), updated_at = now()
  WHERE h.id = ANY(ARRAY(SELECT id FROM free))
  RETURNING h.id
)
SELECT m.id, (b.id IS NOT NULL) AS beat FROM mine m LEFT JOIN beat b ON b.id = m.id;

-- name: release
-- Returns prefetched (never started) jobs to pending; attempts unchanged.
WITH moved_rows AS (
    UPDATE jobs_hot SET status = 0, worker_id = NULL, updated_at = now(), ready_xid = pg_current_xact_id()
    WHERE id = ANY(ARRAY(SELECT jsonb_array_elements_text(CAST(:ids AS jsonb))))
      AND worker_id = CAST(:worker_id AS text) AND status + 0 = 1
    RETURNING id, queue
),
deltas (queue, enqueued, succeeded, failed, retried, pending, fetched, processing) AS (SELECT queue, 0, 0, 0, 0, 1, -1, 0 FROM moved_rows),
counters AS ({{count_deltas}}),
{{wake_workers}}
SELECT id FROM moved_rows WHERE (SELECT count(*) FROM signal) >= 0;

-- name: release_unstarted
-- Jobs a start marked processing although its reply was lost and the worker never ran them: back to
-- pending, the attempt that start counted taken back.
WITH moved_rows AS (
    UPDATE jobs_hot SET status = 0, worker_id = NULL, attempt_count = greatest(attempt_count - 1, 0),
                        heartbeat_at = NULL, updated_at = now(), ready_xid = pg_current_xact_id()
    WHERE id = ANY(ARRAY(SELECT jsonb_array_elements_text(CAST(:ids AS jsonb))))
      AND worker_id = CAST(:worker_id AS text) AND status + 0 = 2
    RETURNING id, queue
),
deltas (queue, enqueued, succeeded, failed, retried, pending, fetched, processing) AS (SELECT queue, 0, 0, 0, 0, 1, 0, -1 FROM moved_rows),
counters AS ({{count_deltas}}),
{{wake_workers}}
SELECT id FROM moved_rows WHERE (SELECT count(*) FROM signal) >= 0;

-- name: recover_claims
-- Rows a claim of this worker committed although its reply was lost: held by :worker_id (fetched or
-- processing) and not among :ids, everything the worker knows it holds. A started one never reached
-- user code: back to fetched, the attempt its start counted taken back. The two partial indexes find
-- the worker's rows without reading the pending backlog.
WITH mine AS (
    SELECT x.id, x.status AS was FROM jobs_hot x WHERE x.status = 1 AND x.worker_id = CAST(:worker_id AS text)
    UNION ALL
    SELECT x.id, x.status FROM jobs_hot x WHERE x.status = 2 AND x.worker_id = CAST(:worker_id AS text)
),
moved AS (
    UPDATE jobs_hot h SET status = 1, updated_at = now(),
                          attempt_count = CASE WHEN h.status = 2 THEN greatest(h.attempt_count - 1, 0) ELSE h.attempt_count END,
                          heartbeat_at = CASE WHEN h.status = 2 THEN NULL ELSE h.heartbeat_at END
    FROM mine m
    WHERE h.id = m.id AND h.worker_id = CAST(:worker_id AS text) AND h.status IN (1, 2)
      AND NOT (h.id = ANY(ARRAY(SELECT jsonb_array_elements_text(CAST(:ids AS jsonb)))))
    RETURNING {{claimed_columns}}, m.was
),
deltas (queue, enqueued, succeeded, failed, retried, pending, fetched, processing) AS (SELECT queue, 0, 0, 0, 0, 0, CAST(was = 2 AS integer), -CAST(was = 2 AS integer) FROM moved),
counters AS ({{count_deltas}})
SELECT id, queue, type, payload, tags, priority, attempt_count, created_at, scheduled_at, due_at, idempotency_key,
       created_by, status, started_at, trace_context, renewed_at
FROM moved;

-- name: finished_unseen
-- After a finishing write that failed transiently (it may have committed and lost its reply): which of
-- :items (id, kind: ok | dead | retry, reason) this worker's write did apply. Archive and DLQ rows keep
-- the worker id; a DLQ row is ours only with the reason we sent (the sweep's Zombie and an operator's
-- Cancelled keep it too); a retried job is back in hot, no longer processing under this worker, with
-- the error we wrote.
WITH items AS (
    SELECT * FROM jsonb_to_recordset(CAST(:items AS jsonb)) AS i(id text, kind text, reason integer, error text)
)
SELECT a.id FROM jobs_archive a JOIN items i ON i.id = a.id
WHERE a.id = ANY(ARRAY(SELECT id FROM items WHERE kind = 'ok')) AND i.kind = 'ok'
  AND a.worker_id = CAST(:worker_id AS text)
UNION ALL
SELECT d.id FROM jobs_dlq d JOIN items i ON i.id = d.id
WHERE d.id = ANY(ARRAY(SELECT id FROM items WHERE kind = 'dead')) AND i.kind = 'dead'
  AND d.worker_id = CAST(:worker_id AS text) AND d.failure_reason = i.reason
UNION ALL
SELECT h.id FROM jobs_hot h JOIN items i ON i.id = h.id
WHERE h.id = ANY(ARRAY(SELECT id FROM items WHERE kind = 'retry')) AND i.kind = 'retry'
  AND NOT (h.status = 2 AND h.worker_id IS NOT DISTINCT FROM CAST(:worker_id AS text))
  AND h.last_error IS NOT DISTINCT FROM i.error;

-- fragment: finish_fence
-- The rows a worker's finishing move takes: its own processing rows among :items, through the primary
-- key alone. Each row finds its item's values in `item_of` (below), not by a join: hot connections plan
-- by rule (no hash joins), and a join of the rows to the items compared every row with every item.
h.id = ANY(ARRAY(SELECT id FROM items)) AND h.worker_id = CAST(:worker_id AS text) AND h.status + 0 = 2

-- fragment: item_of
-- The :items as one JSON object by id, built once (jsonb keeps object keys sorted: a lookup is a binary
-- search); `(SELECT o FROM item_of) -> h.id` is a row's item.
item_of AS (SELECT jsonb_object_agg(i.id, to_jsonb(i)) AS o FROM items i)

-- fragment: no_twins
-- The empty `displaced` of a worker's finishing move. Those statements are the hottest there are, and
-- displacing in every call made them several times slower (two more deletes, the DLQ's statement
-- trigger), so they leave copies alone: a copy in the target table fails them on the duplicate key, and
-- the store runs the `_displacing` variant (displace_twins) for that batch instead.
displaced (id, queue, location, copy) AS (
    SELECT CAST(NULL AS text), CAST(NULL AS text), CAST(NULL AS text), CAST(NULL AS text) WHERE false
)

-- fragment: archive_moved
-- archive_succeeded up to `moved`: the worker's processing rows among :items, deleted from hot. Each row
-- finds its duration in a JSON object built once (see finish_fence): joined to `items`, every row was
-- compared with every item, 30 us of server CPU per job in sets of 40 and 39 us in sets of 128; now 24
-- and 17.
WITH items AS (
    SELECT * FROM jsonb_to_recordset(CAST(:items AS jsonb)) AS i(id text, duration_ms double precision)
),
moved AS (
    DELETE FROM jobs_hot h WHERE {{finish_fence}}
    RETURNING h.*, CAST((SELECT jsonb_object_agg(id, duration_ms) FROM items) ->> h.id AS double precision) AS run_ms
)

-- fragment: archive_rest
-- archive_succeeded after `moved` and `displaced`.
archived AS (
    INSERT INTO jobs_archive (id, queue, type, payload, tags, idempotency_key, priority, attempt_count, worker_id,
                              created_at, started_at, finished_at, duration_ms, created_by, last_modified_by,
                              failure_count, trace_context)
    SELECT id, queue, type, payload, tags, idempotency_key, priority, attempt_count, worker_id, created_at,
           started_at, now(), run_ms, created_by, last_modified_by,
           (SELECT count(*) FROM job_failures f WHERE f.job_id = moved.id), trace_context FROM moved
    WHERE (SELECT count(*) FROM displaced) >= 0
),
deltas (queue, enqueued, succeeded, failed, retried, pending, fetched, processing) AS (SELECT queue, 0, 1, 0, 0, {{left_hot}} FROM moved UNION ALL {{displaced_deltas}}),
{{counters_deltas}},
buckets AS (
    INSERT INTO metric_buckets AS b (bucket_start, queue, outcome, failure_reason, completed_count, duration_count,
                                     total_duration_ms, max_duration_ms)
    SELECT date_trunc('second', now()), queue, 0, -1, count(*), count(run_ms), coalesce(sum(run_ms), 0), max(run_ms)
    FROM moved GROUP BY queue ORDER BY queue
    ON CONFLICT (bucket_start, queue, outcome, failure_reason) DO UPDATE SET
        completed_count = b.completed_count + excluded.completed_count,
        duration_count = b.duration_count + excluded.duration_count,
        total_duration_ms = b.total_duration_ms + excluded.total_duration_ms,
        max_duration_ms = greatest(b.max_duration_ms, excluded.max_duration_ms)
)
SELECT m.id, m.queue, {{moved_twin}} FROM moved m

-- name: archive_succeeded
-- Moves the worker's processing rows to the archive with their handler durations.
{{archive_moved}},
{{no_twins}},
{{archive_rest}};

-- name: archive_succeeded_displacing
-- archive_succeeded for rows whose id has a copy in the archive or the DLQ: see displace_twins.
{{archive_moved}},
{{displace_twins}},
{{archive_rest}};

-- fragment: dead_moved
-- move_to_dlq up to `moved`: the worker's processing rows among :items, deleted from hot.
WITH items AS (
    SELECT * FROM jsonb_to_recordset(CAST(:items AS jsonb)) AS i(id text, reason integer, error text,
                                                                  fingerprint text, duration_ms double precision)
),
{{item_of}},
moved AS (
    DELETE FROM jobs_hot h WHERE {{finish_fence}}
    RETURNING h.*, CAST((SELECT o FROM item_of) -> h.id ->> 'reason' AS integer) AS failure_reason,
              (SELECT o FROM item_of) -> h.id ->> 'error' AS error_details,
              (SELECT o FROM item_of) -> h.id ->> 'fingerprint' AS fingerprint,
              CAST((SELECT o FROM item_of) -> h.id ->> 'duration_ms' AS double precision) AS run_ms
)

-- fragment: dead_rest
-- move_to_dlq after `moved` and `displaced`.
dead AS ({{dlq_insert_moved}}),
failures AS ({{failures_moved}}),
{{counters_failed}},
buckets AS ({{buckets_failed}}),
events AS (
    INSERT INTO events (kind, message, data)
    SELECT 'dlq', 'Job ' || id || ' (' || type || ') dead: '
                  || coalesce((SELECT r.name FROM failure_reasons r WHERE r.code = failure_reason), 'reason ' || failure_reason),
           json_build_object('job_id', id, 'queue', queue, 'type', type, 'reason', failure_reason)::text
    FROM moved
)
SELECT m.id, m.queue, m.failure_reason, {{moved_twin}} FROM moved m

-- name: move_to_dlq
-- Moves the worker's processing rows to the dead-letter queue, each with its own reason and error.
{{dead_moved}},
{{no_twins}},
{{dead_rest}};

-- name: move_to_dlq_displacing
-- move_to_dlq for rows whose id has a copy in the archive or the DLQ: see displace_twins.
{{dead_moved}},
{{displace_twins}},
{{dead_rest}};

-- name: reschedule
-- Retry: back to pending after delay_s seconds on the database clock; attempts keep their count.
WITH items AS (
    SELECT * FROM jsonb_to_recordset(CAST(:items AS jsonb)) AS i(id text, delay_s double precision, error text,
                                                                  fingerprint text)
),
{{item_of}},
moved AS (
    UPDATE jobs_hot h SET status = 0, worker_id = NULL, heartbeat_at = NULL, ready_xid = pg_current_xact_id(),
                          scheduled_at = now() + make_interval(secs => CAST((SELECT o FROM item_of) -> h.id ->> 'delay_s' AS double precision)),
                          due_at = now() + make_interval(secs => CAST((SELECT o FROM item_of) -> h.id ->> 'delay_s' AS double precision)),
                          last_error = (SELECT o FROM item_of) -> h.id ->> 'error', updated_at = now()
    WHERE {{finish_fence}}
    RETURNING h.id, h.queue, h.type, h.attempt_count, h.scheduled_at, h.last_error AS error,
              (SELECT o FROM item_of) -> h.id ->> 'fingerprint' AS fingerprint
),
-- A retried attempt is a failure too (reason Transient): the history keeps it after the job succeeds.
failures AS (
    INSERT INTO job_failures (job_id, queue, type, attempt, outcome, failure_reason, fingerprint, error_line,
                              error_details, worker_id, failed_at)
    SELECT id, queue, type, attempt_count, 'retry', 8, fingerprint, left(split_part(error, E'\n', 1), 500), error,
           CAST(:worker_id AS text), now()
    FROM moved
),
deltas (queue, enqueued, succeeded, failed, retried, pending, fetched, processing) AS (SELECT queue, 0, 0, 0, 1, 1, 0, -1 FROM moved),
counters AS ({{count_deltas}}),
moved_rows AS (SELECT id FROM moved),
{{wake_workers}}
SELECT id, queue, scheduled_at FROM moved WHERE (SELECT count(*) FROM signal) >= 0;

-- ---------------------------------------------------------------- rescue

-- name: recover_abandoned
-- One batch of phase 1: the :batch oldest fetched rows untouched for :timeout_s go back to pending; user
-- code never ran. A row its worker holds locked right now is skipped: that worker is alive. :after_at
-- (the last_at of the previous batch) starts the index scan where that batch ended: the entries of the
-- rows it moved stay in ix_jobs_hot_fetched until vacuum, and stepping over them made the 51st batch of
-- 1000 take 27 ms in the index instead of 0.2.
WITH victims AS (
    SELECT id, updated_at FROM jobs_hot
    WHERE status = 1 AND updated_at < now() - make_interval(secs => CAST(:timeout_s AS double precision))
      AND updated_at >= coalesce(CAST(:after_at AS timestamptz), '-infinity')
    ORDER BY updated_at LIMIT CAST(:batch AS integer) FOR UPDATE SKIP LOCKED
),
moved AS (
    UPDATE jobs_hot SET status = 0, worker_id = NULL, updated_at = now(), ready_xid = pg_current_xact_id()
    WHERE id = ANY (ARRAY(SELECT id FROM victims)) AND status = 1
    RETURNING id, queue
),
deltas (queue, enqueued, succeeded, failed, retried, pending, fetched, processing) AS (SELECT queue, 0, 0, 0, 0, 1, -1, 0 FROM moved),
counters AS ({{count_deltas}}),
moved_rows AS (SELECT id FROM moved),
{{wake_workers}}
SELECT id, queue, (SELECT max(updated_at) FROM victims) AS last_at FROM moved
WHERE (SELECT count(*) FROM signal) >= 0;

-- name: archive_zombies
-- Phase 2, one batch: the :batch stalest processing rows whose heartbeat (or last update) is older than
-- the queue's timeout move to the DLQ as Zombie with their last heartbeat, worker and runtime (the
-- sweep calls it until a batch comes back short). Timeout: queue row, else the
-- configured per-queue value (:overrides, {"queue": seconds}), else :global_s.
WITH overrides AS (
    SELECT key AS queue, CAST(value AS double precision) AS secs FROM jsonb_each_text(CAST(:overrides AS jsonb))
),
-- The shortest timeout any row can have bounds the index scan, so live processing rows are not read
-- (50,000 of them made a sweep take 85 ms before the join, and the row estimate that came with them
-- turned the delete into a hash join over all hot rows: 640 ms). The delete goes through the primary
-- key whatever the estimate.
shortest AS (
    SELECT least(CAST(:global_s AS double precision), (SELECT min(secs) FROM overrides),
                 (SELECT min(zombie_timeout_seconds) FROM queues)) AS secs
),
victims AS (
    -- The timeouts come from subqueries, not joins: a join let the planner hash it and sort every expired
    -- row to take the first :batch (100,000 zombies: 110-150 ms a batch); now the index scan feeds the
    -- LIMIT in order and stops there.
    SELECT h.id FROM jobs_hot h
    WHERE h.status = 2
      AND coalesce(h.heartbeat_at, h.updated_at) < now() - make_interval(secs => (SELECT secs FROM shortest))
      -- Where the previous batch ended (see recover_abandoned).
      AND coalesce(h.heartbeat_at, h.updated_at) >= coalesce(CAST(:after_at AS timestamptz), '-infinity')
      AND coalesce(h.heartbeat_at, h.updated_at) < now() - make_interval(secs => coalesce(
          (SELECT q.zombie_timeout_seconds FROM queues q WHERE q.name = h.queue),
          (SELECT o.secs FROM overrides o WHERE o.queue = h.queue),
          CAST(:global_s AS double precision)))
      -- :not_after: the sweep's decision expires (a server paused after it decided runs this too late).
      AND (CAST(:not_after AS timestamptz) IS NULL OR now() <= CAST(:not_after AS timestamptz))
    ORDER BY coalesce(h.heartbeat_at, h.updated_at) LIMIT CAST(:batch AS integer)
    FOR UPDATE OF h SKIP LOCKED
),
moved AS (
    DELETE FROM jobs_hot h WHERE h.id = ANY (ARRAY(SELECT id FROM victims))
    RETURNING h.*, 2 AS failure_reason, CAST(:fingerprint AS text) AS fingerprint,
        extract(epoch FROM coalesce(h.heartbeat_at, h.updated_at) - h.started_at) * 1000 AS run_ms,
        'Zombie detected: heartbeat expired; last heartbeat '
            || coalesce(to_char(h.heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'never')
            || ' (' || round(CAST(extract(epoch FROM now() - coalesce(h.heartbeat_at, h.updated_at)) AS numeric), 1)
            || 's before detection), worker ' || coalesce(h.worker_id, 'unknown')
            || ', runtime ' || coalesce(round(CAST(extract(epoch FROM coalesce(h.heartbeat_at, h.updated_at)
                                                  - h.started_at) AS numeric), 1) || 's', 'unknown')
            || ', attempt ' || h.attempt_count AS error_details
),
{{displace_twins}},
dead AS ({{dlq_insert_moved}}),
failures AS ({{failures_moved}}),
{{counters_failed}},
buckets AS ({{buckets_failed}})
SELECT m.id, m.queue, m.worker_id, {{moved_twin}}, coalesce(m.heartbeat_at, m.updated_at) AS last_at FROM moved m;

-- name: sweep_mark
-- Where phase :phase of the rescue sweep starts its index scan (mark_abandoned, mark_zombies); no row at
-- first, and the scan starts at the beginning once.
SELECT at AS mark_at FROM sweep_marks WHERE phase = CAST(:phase AS text);

-- name: mark_abandoned
-- After phase 1, where the next sweep starts: every fetched row older than the timeout was moved unless
-- another session held it, so the next scan starts at the oldest such row left in the range this sweep
-- read ([:from_at, threshold)), else at this sweep's threshold. The entries before it (rows that left
-- long ago, dead but kept while a snapshot is held) are never walked again (docs/endurance.md).
INSERT INTO sweep_marks AS m (phase, at)
SELECT 'abandoned', least(now() - make_interval(secs => CAST(:timeout_s AS double precision)), (
    SELECT min(h.updated_at) FROM jobs_hot h
    WHERE h.status = 1 AND h.updated_at >= coalesce(CAST(:from_at AS timestamptz), '-infinity')
      AND h.updated_at < now() - make_interval(secs => CAST(:timeout_s AS double precision))))
ON CONFLICT (phase) DO UPDATE SET at = excluded.at;

-- name: mark_zombies
-- After phase 2, where the next sweep starts (see mark_abandoned): the oldest processing row left in
-- the range this sweep read (held by another session, or of a queue with a longer timeout), else this
-- sweep's time minus the longest timeout any queue has.
WITH overrides AS (
    SELECT CAST(value AS double precision) AS secs FROM jsonb_each_text(CAST(:overrides AS jsonb))
),
bounds AS (
    SELECT least(CAST(:global_s AS double precision), (SELECT min(secs) FROM overrides),
                 (SELECT min(zombie_timeout_seconds) FROM queues)) AS shortest,
           greatest(CAST(:global_s AS double precision), (SELECT max(secs) FROM overrides),
                    (SELECT max(zombie_timeout_seconds) FROM queues)) AS longest
)
INSERT INTO sweep_marks AS m (phase, at)
SELECT 'zombies', least(now() - make_interval(secs => (SELECT longest FROM bounds)), (
    SELECT min(coalesce(h.heartbeat_at, h.updated_at)) FROM jobs_hot h
    WHERE h.status = 2
      AND coalesce(h.heartbeat_at, h.updated_at) >= coalesce(CAST(:from_at AS timestamptz), '-infinity')
      AND coalesce(h.heartbeat_at, h.updated_at) < now() - make_interval(secs => (SELECT shortest FROM bounds))))
ON CONFLICT (phase) DO UPDATE SET at = excluded.at;

-- name: try_lease
-- Takes or renews a named lease; returns a row only to the holder.
INSERT INTO leases AS l (name, holder, expires_at)
VALUES (CAST(:name AS text), CAST(:holder AS text), now() + make_interval(secs => CAST(:ttl_s AS double precision)))
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
WHERE l.expires_at <= now() OR l.holder = excluded.holder
RETURNING holder, expires_at;

-- name: release_lease
DELETE FROM leases WHERE name = CAST(:name AS text) AND holder = CAST(:holder AS text);

-- name: add_event
INSERT INTO events (kind, message, data) VALUES (CAST(:kind AS text), CAST(:message AS text), CAST(:data AS text))
RETURNING id;

-- ---------------------------------------------------------------- operator mutations (audited)

-- name: edit_pending
-- Edits a hot job only while it is pending; null keeps a field. The audit row keeps before and after.
WITH before AS (
    SELECT id, payload, tags, priority FROM jobs_hot WHERE id = CAST(:id AS text) AND status = 0 FOR UPDATE
),
moved AS (
    UPDATE jobs_hot h SET payload = coalesce(CAST(:payload AS text), h.payload), ready_xid = pg_current_xact_id(),
                          tags = coalesce(CAST(:tags AS text), h.tags),
                          priority = coalesce(CAST(:priority AS integer), h.priority),
                          last_modified_by = CAST(:actor AS text), updated_at = now()
    FROM before b WHERE h.id = b.id AND h.status = 0
    RETURNING h.id, h.payload, h.tags, h.priority
),
audit AS (
    INSERT INTO audit_log (actor, action, job_id, plan_id, details)
    SELECT CAST(:actor AS text), 'edit_pending', m.id, CAST(:plan_id AS text),
           json_build_object('before', json_build_object('payload', b.payload, 'tags', b.tags, 'priority', b.priority),
                             'after', json_build_object('payload', m.payload, 'tags', m.tags, 'priority', m.priority))::text
    FROM moved m JOIN before b ON b.id = m.id
),
events AS (
    INSERT INTO events (kind, message, data)
    SELECT 'edit', 'Job ' || m.id || ' edited by ' || CAST(:actor AS text),
           json_build_object('job_id', m.id, 'location', 'hot', 'actor', CAST(:actor AS text),
                             'plan_id', CAST(:plan_id AS text))::text
    FROM moved m
)
SELECT id FROM moved;

-- name: edit_dlq
WITH before AS (
    SELECT id, payload, tags FROM jobs_dlq WHERE id = CAST(:id AS text) FOR UPDATE
),
moved AS (
    UPDATE jobs_dlq d SET payload = coalesce(CAST(:payload AS text), d.payload),
                          tags = coalesce(CAST(:tags AS text), d.tags),
                          last_modified_by = CAST(:actor AS text)
    FROM before b WHERE d.id = b.id
    RETURNING d.id, d.payload, d.tags
),
audit AS (
    INSERT INTO audit_log (actor, action, job_id, plan_id, details)
    SELECT CAST(:actor AS text), 'edit_dlq', m.id, CAST(:plan_id AS text),
           json_build_object('before', json_build_object('payload', b.payload, 'tags', b.tags),
                             'after', json_build_object('payload', m.payload, 'tags', m.tags))::text
    FROM moved m JOIN before b ON b.id = m.id
),
events AS (
    INSERT INTO events (kind, message, data)
    SELECT 'edit', 'Job ' || m.id || ' edited by ' || CAST(:actor AS text),
           json_build_object('job_id', m.id, 'location', 'dlq', 'actor', CAST(:actor AS text),
                             'plan_id', CAST(:plan_id AS text))::text
    FROM moved m
)
SELECT id FROM moved;

-- fragment: resurrect_rest
-- What every resurrect does with the rows it took from the DLQ (`moved`, with new_payload/new_tags/
-- new_priority, null when unchanged): insert them into hot, count, audit per job, one event. A row whose
-- id is already in hot (a job in two tables, see displace_twins) is not inserted: the hot job is the
-- live one (it may be running), so the DLQ copy is the one displaced to the audit log, with an event;
-- it never fails the chunk's other rows. `revived` returns the rows that did go back to hot.
revived AS (
    -- ON CONFLICT finds the ids already in hot through the primary key the insert probes anyway: a
    -- separate lookup first cost a second probe per row (issue 28's resurrect, docs/benchmarks.md).
    -- trace_context: a resurrected job keeps its producer's trace, so its next run links to it.
    INSERT INTO jobs_hot (id, queue, type, payload, tags, idempotency_key, priority, status, attempt_count,
                          due_at, created_at, updated_at, created_by, last_modified_by, trace_context, renewed_at)
    SELECT id, queue, type, coalesce(new_payload, payload), coalesce(new_tags, tags), NULL,
           coalesce(new_priority, 10), 0, 0,
           -- :spread_s: due times jittered uniformly over that window (0: due now), so a bulk resurrect
           -- of still-failing jobs does not come back as one synchronized wave (docs/api.md "spread").
           now() + make_interval(secs => random() * CAST(:spread_s AS double precision)),
           created_at, now(), created_by, CAST(:actor AS text), trace_context,
           -- :renew = 1: the retry budget is renewed, the lifetime clock (Retry.MaxJobAge) restarts now
           -- (attempts restart at 0 either way); 0 keeps the clock at created_at.
           CASE WHEN CAST(:renew AS integer) = 1 THEN now() END
    FROM moved
    ON CONFLICT (id) DO NOTHING
    RETURNING id, queue
),
hot_twins AS (
    SELECT m.* FROM moved m WHERE NOT EXISTS (SELECT 1 FROM revived r WHERE r.id = m.id)
),
displaced AS (
    SELECT id, queue, 'dlq' AS location,
           (to_jsonb(t) - 'new_payload' - 'new_tags' - 'new_priority')::text AS copy
    FROM hot_twins t
),
{{displaced_report}},
new_queues AS (
    INSERT INTO queues (name) SELECT DISTINCT queue FROM moved ORDER BY queue ON CONFLICT DO NOTHING
),
moved_rows AS (SELECT id FROM revived),
{{wake_workers}},
deltas (queue, enqueued, succeeded, failed, retried, pending, fetched, processing) AS (
    SELECT queue, 0, 0, -1, 0, 0, 0, 0 FROM moved UNION ALL SELECT queue, 0, 0, 0, 0, 1, 0, 0 FROM revived
),
counters AS ({{count_deltas}}),
-- The parameters and the reasons' names once per statement, not once per row.
audit_base AS (
    SELECT coalesce(CAST(:details AS jsonb), '{}'::jsonb) AS plain, CAST(:details AS jsonb) AS filter,
           jsonb_build_object('renewed', CAST(:renew AS integer) = 1) AS renewed
),
audit AS (
    INSERT INTO audit_log (actor, action, job_id, plan_id, details)
    SELECT CAST(:actor AS text), 'resurrect', m.id, CAST(:plan_id AS text),
           -- The failure it came back from (reason, fingerprint): the audit keeps the outage's identity.
           (CASE WHEN m.new_payload IS NULL AND m.new_tags IS NULL AND m.new_priority IS NULL THEN b.plain
                 ELSE jsonb_build_object('filter', b.filter,
                                         'before', jsonb_build_object('payload', m.payload, 'tags', m.tags),
                                         'after', jsonb_build_object('payload', coalesce(m.new_payload, m.payload),
                                                                     'tags', coalesce(m.new_tags, m.tags),
                                                                     'priority', coalesce(m.new_priority, 10))) END
            || jsonb_build_object('failure_reason', fr.name, 'fingerprint', m.fingerprint) || b.renewed)::text
    FROM moved m JOIN revived r ON r.id = m.id CROSS JOIN audit_base b
         LEFT JOIN failure_reasons fr ON fr.code = m.failure_reason
),
events AS (
    INSERT INTO events (kind, message, data)
    SELECT 'resurrect', 'Resurrected ' || count(*) || ' job(s) by ' || CAST(:actor AS text),
           json_build_object('count', count(*), 'actor', CAST(:actor AS text), 'plan_id', CAST(:plan_id AS text))::text
    FROM revived HAVING count(*) > 0
)

-- fragment: resurrect_items
-- The DLQ rows of the jobs in `items` (id, payload, tags, priority: a CTE defined before) as `moved`,
-- with the items' edits beside them (new_payload, new_tags, new_priority). Deleted through the primary
-- key (= ANY): as a join the planner scanned the whole DLQ for each chunk.
gone AS (
    DELETE FROM jobs_dlq d WHERE d.id = ANY(ARRAY(SELECT id FROM items)) RETURNING d.*
),
moved AS (
    SELECT g.*, i.payload AS new_payload, i.tags AS new_tags, i.priority AS new_priority
    FROM gone g JOIN items i ON i.id = g.id
)

-- name: resurrect
-- DLQ -> hot for each item: pending, attempts 0, idempotency key cleared, payload/tags/priority replaced
-- when given (priority otherwise 10), FailedTotal -1 per job; one audit row and one event per job.
WITH items AS (
    SELECT * FROM jsonb_to_recordset(CAST(:items AS jsonb)) AS i(id text, payload text, tags text, priority integer)
),
{{resurrect_items}},
{{resurrect_rest}}
SELECT id, queue, CAST(NULL AS text) AS twin FROM revived WHERE (SELECT count(*) FROM signal) >= 0
UNION ALL
SELECT id, queue, 'hot' FROM hot_twins;

-- name: dlq_chunk_bounds
-- Where the next chunks of a bulk resurrect or purge by filter end (storage/bulk_streams.py): of the next
-- :limit matching rows after :before_at/:before_id, in (failed_at DESC, id) order, the last row of every
-- :chunk and the last one read; `taken` is how many were read (fewer than :limit: the match ends here).
-- Reads index entries, not the rows' payloads.
SELECT failed_at AS through_at, id AS through_id, taken FROM (
    SELECT m.failed_at, m.id, row_number() OVER (ORDER BY m.failed_at DESC, m.id) AS k, count(*) OVER () AS taken
    FROM (SELECT d.failed_at, d.id FROM jobs_dlq d WHERE {{dlq_where}} AND {{dlq_after}}
          ORDER BY d.failed_at DESC, d.id LIMIT CAST(:limit AS integer)) m
) b
WHERE k % CAST(:chunk AS integer) = 0 OR k = taken
ORDER BY k;

-- name: resurrect_matching
-- resurrect for the next :limit jobs matching a filter (newest failures first), chosen in the same
-- statement: one round trip per chunk instead of two. Like resurrect, it takes no row locks first: a
-- row another operation is moving is waited for, then found gone (never moved twice).
-- :before_at/:before_id, when set, continue after the previous chunk's last row (failed_at DESC, id
-- order): deleted rows stay in the index until vacuum, and every chunk stepping over all the ones
-- before it made a 100k-row resurrect slow down chunk by chunk. :through_at/:through_id, when set, end
-- the chunk there (dlq_chunk_bounds: chunks in flight together). The caller ends with one pass from the
-- top for rows that were passed over.
WITH victims AS (
    SELECT d.id FROM jobs_dlq d WHERE {{dlq_where}}
      AND {{dlq_after}} AND {{dlq_through}}
    ORDER BY d.failed_at DESC, d.id LIMIT CAST(:limit AS integer)
),
moved AS (
    -- Through the primary key (= ANY): as a join of the victims the planner scanned the whole DLQ per chunk.
    DELETE FROM jobs_dlq d WHERE d.id = ANY(ARRAY(SELECT id FROM victims))
    RETURNING d.*, CAST(NULL AS text) AS new_payload, CAST(NULL AS text) AS new_tags,
              CAST(NULL AS integer) AS new_priority
),
{{resurrect_rest}}
SELECT (SELECT count(*) FROM revived) AS n, (SELECT count(*) FROM hot_twins) AS twins,
       (SELECT count(*) FROM signal) AS signalled,
       c.failed_at AS cursor_at, c.id AS cursor_id
FROM (SELECT failed_at, id FROM moved ORDER BY failed_at, id DESC LIMIT 1) c;

-- name: cancel
-- Pending or fetched jobs -> DLQ as Cancelled; processing jobs are left alone (reported as skipped).
WITH moved AS (
    DELETE FROM jobs_hot h
    WHERE h.id IN (SELECT jsonb_array_elements_text(CAST(:ids AS jsonb))) AND h.status IN (0, 1)
    RETURNING h.*, 1 AS failure_reason, 'Cancelled by admin: ' || CAST(:actor AS text) AS error_details,
              CAST(:fingerprint AS text) AS fingerprint, CAST(NULL AS double precision) AS run_ms
),
{{displace_twins}},
dead AS (
    INSERT INTO jobs_dlq (id, queue, type, payload, tags, idempotency_key, priority, failure_reason, error_details,
                          fingerprint, attempt_count, worker_id, heartbeat_at, created_at, started_at, failed_at,
                          duration_ms, created_by, last_modified_by, trace_context)
    SELECT id, queue, type, payload, tags, idempotency_key, priority, failure_reason, error_details, fingerprint,
           attempt_count, worker_id, heartbeat_at, created_at, started_at, now(), run_ms, created_by,
           CAST(:actor AS text), trace_context
    FROM moved WHERE (SELECT count(*) FROM displaced) >= 0
),
failures AS ({{failures_moved}}),
{{counters_failed}},
buckets AS ({{buckets_failed}}),
audit AS ({{audit_moved}}),
events AS (
    INSERT INTO events (kind, message, data)
    SELECT 'cancel', 'Cancelled ' || count(*) || ' job(s) by ' || CAST(:actor AS text),
           json_build_object('count', count(*), 'actor', CAST(:actor AS text), 'plan_id', CAST(:plan_id AS text))::text
    FROM moved HAVING count(*) > 0
)
SELECT m.id, {{moved_twin}} FROM moved m;

-- fragment: purge_dlq_rest
-- What every DLQ purge does with the rows it deleted (`moved`): counters, audit per job, one event.
{{counters_failed_down}},
audit AS ({{audit_moved}}),
events AS (
    INSERT INTO events (kind, message, data)
    SELECT 'purge', 'Purged ' || count(*) || ' dead job(s) by ' || CAST(:actor AS text),
           json_build_object('count', count(*), 'actor', CAST(:actor AS text), 'plan_id', CAST(:plan_id AS text))::text
    FROM moved HAVING count(*) > 0
)

-- name: purge_dlq
-- Deletes up to :batch of the given DLQ ids (oldest failures first), skipping rows locked by others.
WITH victims AS (
    SELECT id FROM jobs_dlq WHERE id IN (SELECT jsonb_array_elements_text(CAST(:ids AS jsonb)))
    ORDER BY failed_at, id LIMIT CAST(:batch AS integer) FOR UPDATE SKIP LOCKED
),
moved AS (
    -- Through the primary key (= ANY), never a scan of the whole DLQ per chunk (see resurrect_matching).
    DELETE FROM jobs_dlq d WHERE d.id = ANY(ARRAY(SELECT id FROM victims)) RETURNING d.id, d.queue
),
{{purge_dlq_rest}}
SELECT id FROM moved;

-- name: purge_dlq_matching
-- purge_dlq for the next :limit jobs matching a filter (newest failures first), chosen in the same
-- statement: one round trip per chunk instead of two, and rows held by another operation are skipped.
-- :before_at/:before_id and :through_at/:through_id: as for resurrect_matching.
WITH victims AS (
    SELECT d.id FROM jobs_dlq d WHERE {{dlq_where}}
      AND {{dlq_after}} AND {{dlq_through}}
    ORDER BY d.failed_at DESC, d.id LIMIT CAST(:limit AS integer) FOR UPDATE SKIP LOCKED
),
moved AS (
    -- Through the primary key (= ANY), never a scan of the whole DLQ per chunk (see resurrect_matching).
    DELETE FROM jobs_dlq d WHERE d.id = ANY(ARRAY(SELECT id FROM victims)) RETURNING d.id, d.queue, d.failed_at
),
{{purge_dlq_rest}}
SELECT (SELECT count(*) FROM moved) AS n, c.failed_at AS cursor_at, c.id AS cursor_id
FROM (SELECT failed_at, id FROM moved ORDER BY failed_at, id DESC LIMIT 1) c;

-- name: purge_archive
-- Deletes the oldest :batch archive rows finished before :cutoff; one audit row per batch. A purge
-- passes the last (finished_at, id) of its previous batch as :after_at/:after_id, so each batch starts
-- its index scan where the last one stopped instead of stepping over every entry deleted before it
-- (dead until vacuum: without the cursor a 1M-row purge slows from 5 to 11 ms per batch).
WITH victims AS (
    SELECT ctid FROM jobs_archive
    WHERE finished_at < CAST(:cutoff AS timestamptz)
      AND (finished_at, id) > (coalesce(CAST(:after_at AS timestamptz), '-infinity'),
                               coalesce(CAST(:after_id AS text), ''))
    ORDER BY finished_at, id LIMIT CAST(:batch AS integer) FOR UPDATE SKIP LOCKED
),
moved AS (
    -- One TID scan over the sorted array: cheaper than hashing the ctids and probing them one by one.
    DELETE FROM jobs_archive a WHERE a.ctid = ANY (ARRAY(SELECT ctid FROM victims))
    RETURNING a.queue, a.finished_at, a.id
),
deltas (queue, enqueued, succeeded, failed, retried, pending, fetched, processing) AS (SELECT queue, 0, -1, 0, 0, 0, 0, 0 FROM moved),
-- Each batch is a statement of its own (AdminOps.purge_archive), its transaction's only counting one.
counters AS ({{count_deltas_alone}}),
total AS (SELECT count(*) AS n FROM moved),
audit AS (
    INSERT INTO audit_log (actor, action, count, details)
    SELECT CAST(:actor AS text), 'purge_archive', n, CAST(:details AS text) FROM total WHERE n > 0
),
events AS (
    INSERT INTO events (kind, message, data)
    SELECT 'purge', 'Purged ' || n || ' archived job(s) by ' || CAST(:actor AS text),
           json_build_object('count', n, 'actor', CAST(:actor AS text), 'source', 'archive')::text
    FROM total WHERE n > 0
)
SELECT t.n AS purged, l.finished_at AS last_at, l.id AS last_id
FROM total t LEFT JOIN (SELECT finished_at, id FROM moved ORDER BY finished_at DESC, id DESC LIMIT 1) l ON true;

-- name: set_queue
-- Upserts the control row; a *_set flag of 1 writes the value (which may be null to clear an override).
WITH before AS (SELECT * FROM queues WHERE name = CAST(:name AS text)),
upserted AS (
    INSERT INTO queues AS q (name, paused, active, zombie_timeout_seconds, max_workers, updated_at)
    VALUES (CAST(:name AS text), coalesce(CAST(:paused AS boolean), false), coalesce(CAST(:active AS boolean), true),
            CAST(:zombie_timeout_seconds AS integer), CAST(:max_workers AS integer), now())
    ON CONFLICT (name) DO UPDATE SET
        paused = CASE WHEN CAST(:paused_set AS integer) = 1 THEN excluded.paused ELSE q.paused END,
        active = CASE WHEN CAST(:active_set AS integer) = 1 THEN excluded.active ELSE q.active END,
        zombie_timeout_seconds = CASE WHEN CAST(:zombie_set AS integer) = 1 THEN excluded.zombie_timeout_seconds
                                      ELSE q.zombie_timeout_seconds END,
        max_workers = CASE WHEN CAST(:max_workers_set AS integer) = 1 THEN excluded.max_workers ELSE q.max_workers END,
        updated_at = now()
    RETURNING q.*
),
counters AS (INSERT INTO stats_summary (queue) VALUES (CAST(:name AS text)) ON CONFLICT DO NOTHING),
audit AS (
    INSERT INTO audit_log (actor, action, details)
    SELECT CAST(:actor AS text), 'set_queue',
           json_build_object('queue', u.name, 'before', (SELECT row_to_json(b) FROM before b),
                             'after', row_to_json(u))::text
    FROM upserted u
),
events AS (
    INSERT INTO events (kind, message, data)
    SELECT 'queue', 'Queue ' || u.name || ' changed by ' || CAST(:actor AS text), row_to_json(u)::text FROM upserted u
)
SELECT name, paused, active, zombie_timeout_seconds, max_workers, updated_at FROM upserted;

-- ---------------------------------------------------------------- reads

-- name: read_snapshot
-- The first statement of a read transaction whose statements must all see one snapshot (get_job reads
-- hot, DLQ and archive: under READ COMMITTED a job moving between them could be missed by all three).
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;

-- name: get_hot
SELECT {{hot_columns}}, 'hot' AS location FROM jobs_hot h WHERE h.id = CAST(:id AS text);

-- name: get_archive
SELECT a.*, 'archive' AS location FROM jobs_archive a WHERE a.id = CAST(:id AS text);

-- name: get_dlq
SELECT d.*, 'dlq' AS location FROM jobs_dlq d WHERE d.id = CAST(:id AS text);

-- name: list_hot
-- order: created_at = h.created_at, h.id | priority = h.priority, h.due_at, h.id | due_at = h.due_at, h.id | id = h.id | queue = h.queue, h.created_at, h.id | type = h.type, h.created_at, h.id | status = h.status, h.created_at, h.id
SELECT {{hot_columns}}, 'hot' AS location FROM jobs_hot h WHERE {{hot_where}}
ORDER BY {{order}} LIMIT CAST(:limit AS integer) OFFSET CAST(:offset AS integer);

-- name: count_hot
SELECT count(*) AS n FROM jobs_hot h WHERE {{hot_where}};

-- name: list_archive
-- Ids are paged from an index first, then only the page's rows are read.
-- order: finished_at = a.finished_at, a.id | created_at = a.created_at, a.id | duration_ms = a.duration_ms IS NULL, a.duration_ms, a.id | queue = a.queue, a.finished_at, a.id | type = a.type, a.finished_at, a.id | attempt_count = a.attempt_count, a.finished_at, a.id | id = a.id
SELECT a.*, 'archive' AS location FROM jobs_archive a
JOIN (SELECT a.id FROM jobs_archive a WHERE {{archive_where}} ORDER BY {{order}}
      LIMIT CAST(:limit AS integer) OFFSET CAST(:offset AS integer)) k ON k.id = a.id
ORDER BY {{order}};

-- name: count_archive
SELECT count(*) AS n FROM jobs_archive a WHERE {{archive_where}};

-- name: list_dlq
-- Ids are paged from an index first, then only the page's rows are read.
-- order: failed_at = d.failed_at, d.id | created_at = d.created_at, d.id | queue = d.queue, d.failed_at, d.id | type = d.type, d.failed_at, d.id | reason = d.failure_reason, d.failed_at, d.id | attempt_count = d.attempt_count, d.failed_at, d.id | id = d.id
SELECT d.*, 'dlq' AS location FROM jobs_dlq d
JOIN (SELECT d.id FROM jobs_dlq d WHERE {{dlq_where}} ORDER BY {{order}}
      LIMIT CAST(:limit AS integer) OFFSET CAST(:offset AS integer)) k ON k.id = d.id
ORDER BY {{order}};

-- name: count_dlq
SELECT count(*) AS n FROM jobs_dlq d WHERE {{dlq_where}};

-- name: dlq_count_fast
-- Exact number of dead jobs for a queue and/or reason filter (or none), from the trigger-kept counts.
SELECT coalesce(sum(c.n), 0) AS n FROM dlq_counts c
WHERE (CAST(:queue AS text) IS NULL OR c.queue = CAST(:queue AS text))
  AND (CAST(:reason AS integer) IS NULL OR c.failure_reason = CAST(:reason AS integer));

-- name: dlq_locate
-- The hour of failure holding position :offset of the failed_at-ordered list (ascending or descending)
-- and how many of that hour's rows come before it: a deep page reads from there, not from the top.
-- order: hour = hour
SELECT hour AS hour_at, CAST(:offset AS bigint) - (cum - n) AS skip FROM (
    SELECT hour, n, sum(n) OVER (ORDER BY {{order}}) AS cum FROM (
        SELECT c.hour, sum(c.n) AS n FROM dlq_counts c
        WHERE (CAST(:queue AS text) IS NULL OR c.queue = CAST(:queue AS text))
          AND (CAST(:reason AS integer) IS NULL OR c.failure_reason = CAST(:reason AS integer))
        GROUP BY c.hour
    ) h
) w
WHERE cum > CAST(:offset AS bigint) ORDER BY {{order}} LIMIT 1;

-- name: dlq_ids
-- Ids matching a filter, newest failures first (bulk operations take them in chunks).
SELECT d.id FROM jobs_dlq d WHERE {{dlq_where}}
ORDER BY d.failed_at DESC, d.id LIMIT CAST(:limit AS integer);

-- name: dlq_breakdown
-- Counts by reason, queue and type for a filter (preview and summary).
SELECT 'reason' AS dimension, CAST(d.failure_reason AS text) AS value, count(*) AS n,
       min(d.failed_at) AS first_at, max(d.failed_at) AS last_at
FROM jobs_dlq d WHERE {{dlq_where}} GROUP BY d.failure_reason
UNION ALL
SELECT 'queue', d.queue, count(*), min(d.failed_at), max(d.failed_at) FROM jobs_dlq d WHERE {{dlq_where}} GROUP BY d.queue
UNION ALL
SELECT 'type', d.type, count(*), min(d.failed_at), max(d.failed_at) FROM jobs_dlq d WHERE {{dlq_where}} GROUP BY d.type;

-- name: dlq_breakdown_ids
SELECT 'reason' AS dimension, CAST(d.failure_reason AS text) AS value, count(*) AS n
FROM jobs_dlq d WHERE d.id IN (SELECT jsonb_array_elements_text(CAST(:ids AS jsonb))) GROUP BY d.failure_reason
UNION ALL
SELECT 'queue', d.queue, count(*) FROM jobs_dlq d
WHERE d.id IN (SELECT jsonb_array_elements_text(CAST(:ids AS jsonb))) GROUP BY d.queue
UNION ALL
SELECT 'type', d.type, count(*) FROM jobs_dlq d
WHERE d.id IN (SELECT jsonb_array_elements_text(CAST(:ids AS jsonb))) GROUP BY d.type;

-- name: dlq_breakdown_capped
-- What a bulk operation capped at :limit jobs would touch (the newest failures first, as a plan freezes
-- them): counts by reason, queue and type of exactly those jobs.
WITH chosen AS (
    SELECT d.failure_reason, d.queue, d.type FROM jobs_dlq d WHERE {{dlq_where}}
    ORDER BY d.failed_at DESC, d.id LIMIT CAST(:limit AS integer)
)
SELECT 'reason' AS dimension, CAST(failure_reason AS text) AS value, count(*) AS n FROM chosen GROUP BY failure_reason
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
    ORDER BY d.failed_at DESC, d.id LIMIT CAST(:limit AS integer)
) c WHERE c.created_at < now() - make_interval(secs => CAST(:max_age_s AS double precision));

-- name: dlq_existing_ids
SELECT d.id FROM jobs_dlq d WHERE d.id IN (SELECT jsonb_array_elements_text(CAST(:ids AS jsonb)))
ORDER BY d.failed_at DESC, d.id;

-- name: top_fingerprints
-- Error groups over the newest :sample rows: count, first/last seen, one example.
SELECT t.fingerprint, t.failure_reason, count(*) AS n, min(t.failed_at) AS first_at, max(t.failed_at) AS last_at,
       (array_agg(t.id ORDER BY t.failed_at DESC))[1] AS example_id,
       (array_agg(t.queue ORDER BY t.failed_at DESC))[1] AS example_queue,
       (array_agg(t.type ORDER BY t.failed_at DESC))[1] AS example_type
FROM (SELECT d.id, d.fingerprint, d.failure_reason, d.failed_at, d.queue, d.type FROM jobs_dlq d
      WHERE {{dlq_where}} ORDER BY d.failed_at DESC LIMIT CAST(:sample AS integer)) t
GROUP BY t.fingerprint, t.failure_reason
ORDER BY count(*) DESC, max(t.failed_at) DESC
LIMIT CAST(:limit AS integer);

-- name: errors_of
SELECT id, error_details FROM jobs_dlq WHERE id IN (SELECT jsonb_array_elements_text(CAST(:ids AS jsonb)));

-- name: list_workers
-- Workers as the hot table sees them: every worker id holding fetched or processing rows, database clock.
-- Read by time ranges of the two partial indexes, not whole: while a snapshot is held they keep the
-- entries of every job processed since (docs/endurance.md). A live worker's processing rows beat every
-- few seconds (the last :recent_s), its fetched rows were claimed within Recovery.FetchedJobTimeout
-- (:fetched_s); older processing rows belong to a worker that stopped beating them, and are read from the
-- zombie sweep's mark on only while the registry has a worker gone for :gone_s.
WITH gone AS (
    SELECT id FROM workers WHERE last_seen_at < now() - make_interval(secs => CAST(:gone_s AS double precision))
),
held AS (
    SELECT h.worker_id, h.status, h.queue, h.heartbeat_at, h.updated_at, h.started_at FROM jobs_hot h
    WHERE h.status = 2
      AND coalesce(h.heartbeat_at, h.updated_at) >= now() - make_interval(secs => CAST(:recent_s AS double precision))
    UNION ALL
    SELECT h.worker_id, h.status, h.queue, h.heartbeat_at, h.updated_at, h.started_at FROM jobs_hot h
    WHERE h.status = 1
      AND h.updated_at >= now() - make_interval(secs => CAST(:fetched_s AS double precision))
    UNION ALL
    SELECT h.worker_id, h.status, h.queue, h.heartbeat_at, h.updated_at, h.started_at FROM jobs_hot h
    WHERE EXISTS (SELECT 1 FROM gone) AND h.status = 2
      AND coalesce(h.heartbeat_at, h.updated_at) < now() - make_interval(secs => CAST(:recent_s AS double precision))
      AND coalesce(h.heartbeat_at, h.updated_at)
          >= coalesce((SELECT m.at FROM sweep_marks m WHERE m.phase = 'zombies'), '-infinity')
      AND h.worker_id IN (SELECT id FROM gone)
)
SELECT h.worker_id, count(*) FILTER (WHERE h.status = 1) AS fetched,
       count(*) FILTER (WHERE h.status = 2) AS processing,
       string_agg(DISTINCT h.queue, ',') AS queues, max(h.heartbeat_at) AS last_heartbeat_at,
       extract(epoch FROM now() - max(coalesce(h.heartbeat_at, h.updated_at))) AS silent_s,
       min(h.started_at) AS oldest_started_at
FROM held h WHERE h.worker_id IS NOT NULL
GROUP BY h.worker_id ORDER BY h.worker_id;

-- name: stats_totals
SELECT CAST(coalesce(sum(t.enqueued_total), 0) AS bigint) AS enqueued_total,
       CAST(coalesce(sum(t.succeeded_total), 0) AS bigint) AS succeeded_total,
       CAST(coalesce(sum(t.failed_total), 0) AS bigint) AS failed_total,
       CAST(coalesce(sum(t.retried_total), 0) AS bigint) AS retried_total, max(t.last_activity_at) AS last_activity_at
FROM (SELECT {{queue_totals}} FROM queues q {{queue_totals_from}}) t;

-- fragment: hot_counts
-- Hot jobs per queue and status, from the counters (count_deltas): counting jobs_hot would walk the dead
-- versions of every job finished since the oldest snapshot some session holds.
SELECT q.name AS queue, v.status, v.n FROM queues q {{queue_totals_from}}
CROSS JOIN LATERAL (VALUES (0, coalesce(s.pending, 0) + coalesce(d.pending, 0)),
                           (1, coalesce(s.fetched, 0) + coalesce(d.fetched, 0)),
                           (2, coalesce(s.processing, 0) + coalesce(d.processing, 0))) v (status, n)
WHERE v.n <> 0

-- name: hot_status_counts
{{hot_counts}};

-- name: table_counts
-- Jobs per table: hot from the counters (see hot_status_counts), the DLQ from its trigger-kept counts, the
-- archive (insert-only but for purges) counted.
SELECT (SELECT CAST(coalesce(sum(n), 0) AS bigint) FROM ({{hot_counts}}) h) AS hot,
       (SELECT count(*) FROM jobs_archive) AS archive,
       (SELECT CAST(coalesce(sum(n), 0) AS bigint) FROM dlq_counts) AS dlq;

-- name: audit_rows
-- `chokaq bench` refuses a database whose audit log holds rows (its reset would delete them).
SELECT count(*) AS n FROM audit_log;

-- name: queue_rows
SELECT q.name, q.paused, q.active, q.zombie_timeout_seconds, q.max_workers, q.updated_at, {{queue_totals}}
FROM queues q {{queue_totals_from}}
WHERE CAST(:name AS text) IS NULL OR q.name = CAST(:name AS text)
ORDER BY q.name;

-- name: queue_lag
-- Jobs fetched by a worker whose registry row is older than :gone_s (it died; the sweep returns them),
-- per queue: `stranded`, and how long the oldest has been due. Read only while a worker is gone (the
-- fetched rows' index holds the dead entries of every fetch). The pending side of the lag is peek_lanes'.
WITH gone AS (
    SELECT id FROM workers WHERE last_seen_at < now() - make_interval(secs => CAST(:gone_s AS double precision))
)
SELECT h.queue, 0 AS due_pending, count(*) AS stranded, extract(epoch FROM now() - min(h.due_at)) AS max_lag_s,
       avg(extract(epoch FROM now() - h.due_at)) AS avg_lag_s
FROM jobs_hot h
WHERE EXISTS (SELECT 1 FROM gone) AND h.status = 1 AND h.due_at <= now() AND h.worker_id IN (SELECT id FROM gone)
GROUP BY h.queue;

-- name: peek_lanes
-- The due pending jobs per lane for a reader (queue lag in GET /queues, the metrics, readiness), read
-- like a claim reads them (docs/endurance.md): from the reader's remembered position per lane (:lanes,
-- as `fetch` takes them), plus the rows made pending by transactions its previous read could not see
-- (:xmax, :xip). Never claims. Per lane (kind 'lane'): the first pending row (the next position), and the
-- count, oldest due time and summed lag of the due ones; then the snapshot (kind 'snap'). Costs the due
-- backlog and the jobs claimed since the previous read, not the dead versions of older work.
WITH cur AS (
    SELECT c.q, c.p, c.d, c.i FROM jsonb_to_recordset(CAST(:lanes AS jsonb))
        AS c(q text, p integer, d timestamptz, i text, x boolean)
),
snap AS (SELECT pg_current_snapshot() AS s),
settled AS (
    SELECT CAST(x AS xid8) AS xid FROM jsonb_array_elements_text(CAST(:xip AS jsonb)) x
    WHERE NOT (CAST(x AS xid8) = ANY (ARRAY(SELECT pg_snapshot_xip(s) FROM snap)))
),
news AS (
    (SELECT h.id, h.queue, h.priority, h.due_at FROM jobs_hot h
     WHERE h.status = 0 AND h.ready_xid >= CAST(:xmax AS xid8) ORDER BY h.ready_xid)
    UNION ALL
    (SELECT h.id, h.queue, h.priority, h.due_at FROM jobs_hot h
     WHERE h.status = 0 AND h.ready_xid = ANY (ARRAY(SELECT xid FROM settled)) ORDER BY h.ready_xid)
),
lanes AS (
    SELECT c.q, c.p, c.d, c.i FROM cur c
    UNION ALL
    SELECT DISTINCT n.queue, n.priority, CAST('-infinity' AS timestamptz), '' FROM news n
    WHERE NOT EXISTS (SELECT 1 FROM cur c WHERE c.q = n.queue AND c.p = n.priority)
),
-- Rows made pending behind a position (a late commit, a release, a retry...).
behind AS (
    SELECT n.* FROM news n JOIN lanes l ON l.q = n.queue AND l.p = n.priority
    WHERE (n.due_at, n.id) < (l.d, l.i)
),
per_lane AS (
    SELECT l.q, l.p, f.due_at AS f_due, f.id AS f_id, a.n, a.oldest, a.lag_sum
    FROM lanes l
    LEFT JOIN LATERAL (
        SELECT h.due_at, h.id FROM jobs_hot h
        WHERE h.queue = l.q AND h.priority = l.p AND h.status = 0 AND (h.due_at, h.id) >= (l.d, l.i)
        ORDER BY h.due_at, h.id LIMIT 1) f ON true
    LEFT JOIN LATERAL (
        SELECT count(*) AS n, min(x.due_at) AS oldest, sum(EXTRACT(EPOCH FROM now() - x.due_at)) AS lag_sum
        FROM (SELECT h.due_at FROM jobs_hot h
              WHERE h.queue = l.q AND h.priority = l.p AND h.status = 0 AND (h.due_at, h.id) >= (l.d, l.i)
                AND h.due_at <= now()
              ORDER BY h.due_at, h.id) x) a ON true
)
SELECT 'lane' AS kind, p.q AS queue, p.p AS priority,
       CAST(coalesce(b.due_at, p.f_due) AS text) AS cursor_due, coalesce(b.id, p.f_id) AS id,
       coalesce(p.n, 0) + coalesce(b.due_n, 0) AS due_n,
       EXTRACT(EPOCH FROM now() - least(p.oldest, b.oldest)) AS max_lag_s,
       coalesce(p.lag_sum, 0) + coalesce(b.lag_sum, 0) AS lag_sum, CAST(NULL AS text) AS snap_xmax,
       CAST(NULL AS text) AS snap_xip
FROM per_lane p
LEFT JOIN LATERAL (
    SELECT min(y.due_at) FILTER (WHERE y.due_at <= now()) AS oldest,
           count(*) FILTER (WHERE y.due_at <= now()) AS due_n,
           sum(EXTRACT(EPOCH FROM now() - y.due_at)) FILTER (WHERE y.due_at <= now()) AS lag_sum,
           (array_agg(y.due_at ORDER BY y.due_at, y.id))[1] AS due_at, (array_agg(y.id ORDER BY y.due_at, y.id))[1] AS id
    FROM behind y WHERE y.queue = p.q AND y.priority = p.p HAVING count(*) > 0) b ON true
WHERE p.f_id IS NOT NULL OR b.id IS NOT NULL
UNION ALL
SELECT 'snap', NULL, NULL, NULL, NULL, NULL, NULL, NULL, CAST(pg_snapshot_xmax(s) AS text),
       (SELECT CAST(coalesce(json_agg(CAST(x AS text)), '[]') AS text) FROM pg_snapshot_xip(s) x)
FROM snap;

-- name: throughput
-- Outcomes over the last 1 and 5 minutes from the metric buckets.
SELECT coalesce(sum(completed_count) FILTER (WHERE bucket_start >= now() - interval '60 seconds'), 0) AS processed_1m,
       coalesce(sum(completed_count) FILTER (WHERE bucket_start >= now() - interval '60 seconds' AND outcome = 1), 0)
           AS failed_1m,
       coalesce(sum(completed_count), 0) AS processed_5m,
       coalesce(sum(completed_count) FILTER (WHERE outcome = 1), 0) AS failed_5m
FROM metric_buckets WHERE bucket_start >= now() - interval '300 seconds';

-- name: fold_counters
-- Adds the counter deltas of finished transactions (count_deltas: buckets wholly below the oldest
-- transaction id still running, so no delta can join them any more) into stats_summary, and deletes
-- them. One statement: a reader sees the deltas or the totals that hold them, never both or neither.
-- Run every few seconds by each serving process (engine/hosting.py); two at once are harmless (the
-- second finds the rows gone).
WITH safe AS (SELECT CAST(CAST(pg_snapshot_xmin(pg_current_snapshot()) AS text) AS bigint) >> 10 AS xb),
gone AS (
    DELETE FROM queue_counts c WHERE c.xb < (SELECT xb FROM safe)
    RETURNING c.queue, c.enqueued, c.succeeded, c.failed, c.retried, c.pending, c.fetched, c.processing, c.at
),
sums AS (
    SELECT queue, sum(enqueued) AS e, sum(succeeded) AS s, sum(failed) AS f, sum(retried) AS r,
           sum(pending) AS p, sum(fetched) AS fe, sum(processing) AS pr, max(at) AS at
    FROM gone GROUP BY queue
)
INSERT INTO stats_summary AS t (queue, enqueued_total, succeeded_total, failed_total, retried_total, pending,
                                fetched, processing, last_activity_at, folded_xb)
SELECT queue, e, greatest(0, s), greatest(0, f), r, p, fe, pr, at, (SELECT xb FROM safe) FROM sums ORDER BY queue
ON CONFLICT (queue) DO UPDATE SET enqueued_total = t.enqueued_total + excluded.enqueued_total,
    pending = t.pending + excluded.pending, fetched = t.fetched + excluded.fetched,
    processing = t.processing + excluded.processing,
    succeeded_total = greatest(0, t.succeeded_total + excluded.succeeded_total),
    failed_total = greatest(0, t.failed_total + excluded.failed_total),
    retried_total = t.retried_total + excluded.retried_total,
    last_activity_at = greatest(t.last_activity_at, excluded.last_activity_at),
    folded_xb = greatest(t.folded_xb, excluded.folded_xb)
RETURNING t.queue;

-- name: prune_buckets
-- One batch of retention: the :batch oldest buckets older than :older_than_s, found through the primary
-- key (bucket_start leads it) and deleted by tuple id; the store repeats it until a batch comes back short.
-- :after_at, the last bucket_start of the previous batch, starts the index scan where that batch ended:
-- from the start of the index each batch would step over every entry deleted before it (dead until
-- vacuum): pruning 1M buckets and 1M events took 15-22 ms a batch instead of 2.5 (`chokaq bench prune`).
WITH victims AS (
    SELECT ctid FROM metric_buckets
    WHERE bucket_start < now() - make_interval(secs => CAST(:older_than_s AS double precision))
      AND bucket_start >= coalesce(CAST(:after_at AS timestamptz), '-infinity')
    ORDER BY bucket_start LIMIT CAST(:batch AS integer) FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM metric_buckets m WHERE m.ctid = ANY (ARRAY(SELECT ctid FROM victims)) RETURNING m.bucket_start
)
SELECT count(*) AS n, max(bucket_start) AS last_at FROM gone;

-- name: prune_events
-- One batch: the :batch oldest events older than :older_than_s, through ix_events_at from :after_at on.
WITH victims AS (
    SELECT ctid FROM events
    WHERE at < now() - make_interval(secs => CAST(:older_than_s AS double precision))
      AND at >= coalesce(CAST(:after_at AS timestamptz), '-infinity')
    ORDER BY at LIMIT CAST(:batch AS integer) FOR UPDATE SKIP LOCKED
),
gone AS (DELETE FROM events e WHERE e.ctid = ANY (ARRAY(SELECT ctid FROM victims)) RETURNING e.at)
SELECT count(*) AS n, max(at) AS last_at FROM gone;

-- name: list_audit
SELECT id, at, actor, action, job_id, plan_id, count, details FROM audit_log
WHERE (CAST(:actor AS text) IS NULL OR actor = CAST(:actor AS text))
  AND (CAST(:action AS text) IS NULL OR action = CAST(:action AS text))
  AND (CAST(:job_id AS text) IS NULL OR job_id = CAST(:job_id AS text))
  AND (CAST(:plan_id AS text) IS NULL OR plan_id = CAST(:plan_id AS text))
  AND (CAST(:since AS timestamptz) IS NULL OR at >= CAST(:since AS timestamptz))
ORDER BY id DESC LIMIT CAST(:limit AS integer) OFFSET CAST(:offset AS integer);

-- name: count_audit
SELECT count(*) AS n FROM audit_log
WHERE (CAST(:actor AS text) IS NULL OR actor = CAST(:actor AS text))
  AND (CAST(:action AS text) IS NULL OR action = CAST(:action AS text))
  AND (CAST(:job_id AS text) IS NULL OR job_id = CAST(:job_id AS text))
  AND (CAST(:plan_id AS text) IS NULL OR plan_id = CAST(:plan_id AS text))
  AND (CAST(:since AS timestamptz) IS NULL OR at >= CAST(:since AS timestamptz));

-- name: events_after
-- Events after :after_id whose writers have all finished: an id taken by a transaction still in flight
-- holds back the ones after it, so a reader never skips past it. Only transactions of this database can
-- write its events: the oldest of them (pg_stat_activity's 32-bit backend_xid, widened to xid8 with the
-- current epoch) is the bound, not the snapshot's cluster-wide xmin, which any long transaction in any
-- other database (a bulk load, a report) would hold back for all that time. An event older than 5 s goes
-- out anyway (chokaq's own event writers are short, done long before).
WITH ref AS (
    SELECT CAST(CAST(pg_snapshot_xmax(pg_current_snapshot()) AS text) AS bigint) AS xmax
),
busy AS (
    SELECT min(w.x8) AS x8 FROM (
        SELECT CASE WHEN (r.xmax / 4294967296) * 4294967296 + x.x32 > r.xmax
                    THEN (r.xmax / 4294967296 - 1) * 4294967296 + x.x32
                    ELSE (r.xmax / 4294967296) * 4294967296 + x.x32 END AS x8
        FROM ref r,
             (SELECT CAST(CAST(backend_xid AS text) AS bigint) AS x32 FROM pg_stat_activity
              WHERE datname = current_database() AND backend_xid IS NOT NULL) x
    ) w
)
SELECT id, at, kind, message, data FROM events
WHERE id > CAST(:after_id AS bigint)
  AND (CAST(CAST(xid AS text) AS bigint) < coalesce((SELECT x8 FROM busy), (SELECT xmax FROM ref))
       OR at < now() - interval '5 seconds')
ORDER BY id LIMIT CAST(:limit AS integer);

-- name: last_event_id
SELECT coalesce(max(id), 0) AS id FROM events;

-- ---------------------------------------------------------------- tokens

-- name: create_token
INSERT INTO api_tokens (name, role, token_hash, created_by)
VALUES (CAST(:name AS text), CAST(:role AS text), CAST(:token_hash AS text), CAST(:actor AS text))
RETURNING name, role, created_at;

-- name: token_by_hash
-- A read: checking a token on every request must not take a write lock.
SELECT name, role, token_hash, last_used_at FROM api_tokens
WHERE token_hash = CAST(:token_hash AS text) AND revoked_at IS NULL;

-- name: touch_token
-- last_used_at is kept to the minute; writing it on every request would serialise readers on SQLite.
UPDATE api_tokens SET last_used_at = now()
WHERE token_hash = CAST(:token_hash AS text) AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds');

-- name: list_tokens
SELECT name, role, created_at, created_by, revoked_at, last_used_at FROM api_tokens ORDER BY name;

-- name: revoke_token
UPDATE api_tokens SET revoked_at = now() WHERE name = CAST(:name AS text) AND revoked_at IS NULL RETURNING name;

-- name: audited_unseen
-- After an operator move that may have committed and lost its reply (resurrect, cancel, purge by ids):
-- which of :ids it did move, known by their latest audit row, which commits with the move: :action by
-- :actor for :plan_id, written within the last :window_s seconds.
SELECT a.job_id AS id FROM audit_log a
WHERE a.job_id = ANY(ARRAY(SELECT jsonb_array_elements_text(CAST(:ids AS jsonb))))
  AND a.id = (SELECT max(b.id) FROM audit_log b WHERE b.job_id = a.job_id)
  AND a.action = CAST(:action AS text) AND a.actor = CAST(:actor AS text)
  AND a.plan_id IS NOT DISTINCT FROM CAST(:plan_id AS text)
  AND a.at >= now() - make_interval(secs => CAST(:window_s AS double precision));

-- name: audited_count
-- After a bulk operation by filter one of whose chunks may have committed and lost its reply: how many
-- jobs it moved in all, counted from its audit rows (one per job, the same `filter` in :details; a
-- resurrect's rows also carry the failure it cleared) since it started.
SELECT count(*) AS n FROM audit_log
WHERE actor = CAST(:actor AS text) AND at >= CAST(:since AS timestamptz) AND action = CAST(:action AS text)
  AND plan_id IS NOT DISTINCT FROM CAST(:plan_id AS text)
  AND CAST(details AS jsonb) -> 'filter' = CAST(:details AS jsonb) -> 'filter';

-- name: queue_admission
-- Whether a job may go to :queue under the API's cap on distinct queues (Api.MaxQueues), and how many
-- queues exist (for the refusal's message).
SELECT {{queue_admitted}} AS ok, (SELECT count(*) FROM queues) AS n;

-- name: audit_one
INSERT INTO audit_log (actor, action, job_id, plan_id, count, details)
VALUES (CAST(:actor AS text), CAST(:action AS text), CAST(:job_id AS text), CAST(:plan_id AS text),
        CAST(:count AS integer), CAST(:details AS text));

-- ---------------------------------------------------------------- analysis frames (chokaq_ops.analysis.frames)
-- One keyset page of rows for a DataFrame: the rows after (:after_at, :after_id) in (time, id) order, as CSV
-- text with a header line. pandas' C parser reads CSV several times faster than pyodbc builds row tuples
-- (1M dead jobs: about 7 s instead of 13 s before any DataFrame exists). Times are microseconds since the
-- epoch, NULL is an empty field, text is quoted. `after_at`/`after_id` are the key of the page's last row.
-- Every *_light variant leaves out payload and error details, which are most of a row's bytes.

-- fragment: csv_common
coalesce('"' || replace(p.id, '"', '""') || '"', ''), coalesce('"' || replace(p.queue, '"', '""') || '"', ''),
coalesce('"' || replace(p.type, '"', '""') || '"', ''), coalesce('"' || replace(p.tags, '"', '""') || '"', ''),
p.priority::text, p.attempt_count::text, coalesce('"' || replace(p.worker_id, '"', '""') || '"', ''),
coalesce('"' || replace(p.idempotency_key, '"', '""') || '"', ''),
(extract(epoch FROM p.created_at) * 1000000)::bigint::text,
coalesce((extract(epoch FROM p.started_at) * 1000000)::bigint::text, ''),
coalesce('"' || replace(p.created_by, '"', '""') || '"', ''),
coalesce('"' || replace(p.last_modified_by, '"', '""') || '"', '')

-- fragment: csv_common_header
'id,queue,type,tags,priority,attempt_count,worker_id,idempotency_key,created_at,started_at,created_by,last_modified_by'

-- fragment: csv_dlq_light
{{csv_common}}, p.failure_reason::text, coalesce('"' || replace(p.fingerprint, '"', '""') || '"', ''),
coalesce((extract(epoch FROM p.heartbeat_at) * 1000000)::bigint::text, ''),
(extract(epoch FROM p.failed_at) * 1000000)::bigint::text, coalesce(p.duration_ms::text, '')

-- fragment: csv_dlq_light_header
{{csv_common_header}} || ',failure_reason,fingerprint,heartbeat_at,failed_at,duration_ms'

-- fragment: dlq_page
page AS (
    SELECT d.* FROM jobs_dlq d
    WHERE {{dlq_where}}
      AND (d.failed_at, d.id) > (coalesce(CAST(:after_at AS timestamptz), '-infinity'), coalesce(CAST(:after_id AS text), ''))
    ORDER BY d.failed_at, d.id LIMIT CAST(:limit AS integer)
),
last AS (SELECT failed_at::text AS after_at, id AS after_id FROM page ORDER BY failed_at DESC, id DESC LIMIT 1)

-- name: frame_dlq
WITH {{dlq_page}}
SELECT {{csv_dlq_light_header}} || ',payload,error_details' || E'\n'
       || string_agg(concat_ws(',', {{csv_dlq_light}}, coalesce('"' || replace(p.payload, '"', '""') || '"', ''),
                               coalesce('"' || replace(p.error_details, '"', '""') || '"', '')),
                     E'\n' ORDER BY p.failed_at, p.id) AS csv,
       count(*) AS n, (SELECT after_at FROM last) AS after_at, (SELECT after_id FROM last) AS after_id
FROM page p;

-- name: frame_dlq_light
WITH {{dlq_page}}
SELECT {{csv_dlq_light_header}} || E'\n'
       || string_agg(concat_ws(',', {{csv_dlq_light}}), E'\n' ORDER BY p.failed_at, p.id) AS csv,
       count(*) AS n, (SELECT after_at FROM last) AS after_at, (SELECT after_id FROM last) AS after_id
FROM page p;

-- fragment: csv_archive_light
{{csv_common}}, (extract(epoch FROM p.finished_at) * 1000000)::bigint::text, coalesce(p.duration_ms::text, '')

-- fragment: archive_page
page AS (
    SELECT a.* FROM jobs_archive a
    WHERE {{archive_where}}
      AND (a.finished_at, a.id) > (coalesce(CAST(:after_at AS timestamptz), '-infinity'), coalesce(CAST(:after_id AS text), ''))
    ORDER BY a.finished_at, a.id LIMIT CAST(:limit AS integer)
),
last AS (SELECT finished_at::text AS after_at, id AS after_id FROM page ORDER BY finished_at DESC, id DESC LIMIT 1)

-- name: frame_archive
WITH {{archive_page}}
SELECT {{csv_common_header}} || ',finished_at,duration_ms,payload' || E'\n'
       || string_agg(concat_ws(',', {{csv_archive_light}}, coalesce('"' || replace(p.payload, '"', '""') || '"', '')),
                     E'\n' ORDER BY p.finished_at, p.id) AS csv,
       count(*) AS n, (SELECT after_at FROM last) AS after_at, (SELECT after_id FROM last) AS after_id
FROM page p;

-- name: frame_archive_light
WITH {{archive_page}}
SELECT {{csv_common_header}} || ',finished_at,duration_ms' || E'\n'
       || string_agg(concat_ws(',', {{csv_archive_light}}), E'\n' ORDER BY p.finished_at, p.id) AS csv,
       count(*) AS n, (SELECT after_at FROM last) AS after_at, (SELECT after_id FROM last) AS after_id
FROM page p;

-- fragment: csv_hot_light
{{csv_common}}, p.status::text, coalesce((extract(epoch FROM p.heartbeat_at) * 1000000)::bigint::text, ''),
coalesce((extract(epoch FROM p.scheduled_at) * 1000000)::bigint::text, '')

-- fragment: hot_page
page AS (
    SELECT h.* FROM jobs_hot h
    WHERE {{hot_where}}
      AND (h.created_at, h.id) > (coalesce(CAST(:after_at AS timestamptz), '-infinity'), coalesce(CAST(:after_id AS text), ''))
    ORDER BY h.created_at, h.id LIMIT CAST(:limit AS integer)
),
last AS (SELECT created_at::text AS after_at, id AS after_id FROM page ORDER BY created_at DESC, id DESC LIMIT 1)

-- name: frame_hot
-- Hot jobs carry the error of their last failed attempt (a retry waiting) as error_details.
WITH {{hot_page}}
SELECT {{csv_common_header}} || ',status,heartbeat_at,scheduled_at,payload,error_details' || E'\n'
       || string_agg(concat_ws(',', {{csv_hot_light}}, coalesce('"' || replace(p.payload, '"', '""') || '"', ''),
                               coalesce('"' || replace(p.last_error, '"', '""') || '"', '')),
                     E'\n' ORDER BY p.created_at, p.id) AS csv,
       count(*) AS n, (SELECT after_at FROM last) AS after_at, (SELECT after_id FROM last) AS after_id
FROM page p;

-- name: frame_hot_light
WITH {{hot_page}}
SELECT {{csv_common_header}} || ',status,heartbeat_at,scheduled_at' || E'\n'
       || string_agg(concat_ws(',', {{csv_hot_light}}), E'\n' ORDER BY p.created_at, p.id) AS csv,
       count(*) AS n, (SELECT after_at FROM last) AS after_at, (SELECT after_id FROM last) AS after_id
FROM page p;

-- ---------------------------------------------------------------- plans (chokaq_ops.storage.plan_ops)

-- name: plan_create
-- A plan whose items are all frozen, with their totals (counted as the batches were written) and its
-- preview (JSON): the row appears complete, so nothing ever sees a half-frozen plan. It seals the
-- plan's freeze (plan_freezes): no row when the freeze was reclaimed meanwhile (its process was taken
-- for dead), so a plan is never made of items a reclaim is deleting.
WITH sealed AS (
    DELETE FROM plan_freezes WHERE plan_id = CAST(:id AS text) AND state = 'freezing' RETURNING plan_id
)
INSERT INTO plans (id, action, actor, chunk_size, total, chunks, details, label, rate)
SELECT CAST(:id AS text), CAST(:action AS text), CAST(:actor AS text), CAST(:chunk_size AS integer),
       CAST(:total AS integer), CAST(:chunks AS integer), CAST(:details AS text), CAST(:label AS text),
       CAST(:rate AS double precision)
FROM sealed
RETURNING *;

-- name: plan_freeze_begin
-- A freeze starts: its row says the items written under this plan id belong to a plan in the making.
INSERT INTO plan_freezes (plan_id, actor) VALUES (CAST(:plan_id AS text), CAST(:actor AS text));

-- name: plan_freeze_beat
-- A freeze is alive (before each batch); no row when it was reclaimed: the freezer stops.
UPDATE plan_freezes SET beat_at = now() WHERE plan_id = CAST(:plan_id AS text) AND state = 'freezing'
RETURNING plan_id;

-- name: plan_freezes
-- Freezes in progress or abandoned (beaten more than :grace_s ago), with the items they hold.
SELECT f.plan_id, f.actor, f.state, f.started_at, f.beat_at,
       (SELECT count(*) FROM plan_items i WHERE i.plan_id = f.plan_id) AS items,
       CASE WHEN f.state = 'reclaiming'
                 OR f.beat_at < now() - make_interval(secs => CAST(:grace_s AS double precision))
            THEN 1 ELSE 0 END AS abandoned
FROM plan_freezes f ORDER BY f.started_at, f.plan_id;

-- name: plan_freeze_reclaim
-- Takes an abandoned freeze for reclaiming (one reclaimer wins; its late freezer can no longer seal it).
UPDATE plan_freezes SET state = 'reclaiming', beat_at = now()
WHERE plan_id = CAST(:plan_id AS text)
  AND (state = 'reclaiming' OR beat_at <= now() - make_interval(secs => CAST(:grace_s AS double precision)))
RETURNING plan_id, actor, started_at;

-- name: plan_freeze_end
-- The reclaimed freeze's items are gone: its row goes, with an audit row of what was reclaimed.
DELETE FROM plan_freezes WHERE plan_id = CAST(:plan_id AS text) AND state = 'reclaiming';
INSERT INTO audit_log (actor, action, job_id, plan_id, count, details)
VALUES (CAST(:actor AS text), 'plan_reclaim', NULL, CAST(:plan_id AS text), CAST(:count AS integer),
        CAST(:details AS text));

-- name: plan_by_label
-- The newest unfinished plan of :action with :label: what a labelled re-run resumes.
SELECT * FROM plans
WHERE label = CAST(:label AS text) AND action = CAST(:action AS text) AND state IN ('ready', 'running')
ORDER BY created_at DESC, id DESC LIMIT 1;

-- fragment: plan_items_json
-- A batch of plan items as JSON [{"ord", "id", "payload", "tags", "priority"}], ord being the place in the plan.
SELECT * FROM jsonb_to_recordset(CAST(:items AS jsonb))
    AS i(ord integer, id text, payload text, tags text, priority integer)

-- name: plan_scan_dlq_ids
-- A batch of a freeze (its own short transaction): the given ids that were dead jobs by :as_of (the
-- freeze's start), in the given order, with the per-job payload/tags/priority a resurrect plan replaces.
SELECT i.ord, i.id, i.payload, i.tags, i.priority
FROM ({{plan_items_json}}) i JOIN jobs_dlq d ON d.id = i.id WHERE d.failed_at <= CAST(:as_of AS timestamptz) ORDER BY i.ord;

-- name: plan_scan_hot_ids
-- A batch of a freeze (its own short transaction): the given ids that were hot jobs by :as_of (the
-- freeze's start; a cancel plan's running ones are skipped when it executes), in the given order.
SELECT i.ord, i.id, i.payload, i.tags, i.priority
FROM ({{plan_items_json}}) i JOIN jobs_hot h ON h.id = i.id WHERE h.created_at <= CAST(:as_of AS timestamptz) ORDER BY i.ord;

-- name: plan_scan_dlq_filter
-- A batch of a freeze (its own short transaction): the next :limit dead jobs matching a filter that
-- failed by :as_of (the freeze's start), newest failure first, after the
-- (failed_at, id) where the previous batch ended (:after_at/:after_id; NULL for the first batch). The
-- bound on failed_at stands alone so the index scan starts at the cursor: under an OR every batch
-- walked the index from the newest entry.
SELECT d.id, d.failed_at AS key_at FROM jobs_dlq d
WHERE {{dlq_where}}
  AND d.failed_at <= coalesce(CAST(:after_at AS timestamptz), CAST(:as_of AS timestamptz))
  AND (CAST(:after_at AS timestamptz) IS NULL OR d.failed_at < CAST(:after_at AS timestamptz)
       OR d.id > CAST(:after_id AS text))
ORDER BY d.failed_at DESC, d.id LIMIT CAST(:limit AS integer);

-- name: plan_scan_hot_filter
-- A batch of a freeze (its own short transaction): the next :limit pending or fetched hot jobs matching a
-- filter that were created by :as_of (the freeze's start), oldest first,
-- after the (created_at, id) where the previous batch ended.
SELECT h.id, h.created_at AS key_at FROM jobs_hot h
WHERE {{hot_where}} AND h.status IN (0, 1) AND h.created_at <= CAST(:as_of AS timestamptz)
  AND h.created_at >= coalesce(CAST(:after_at AS timestamptz), '-infinity')
  AND (CAST(:after_at AS timestamptz) IS NULL
       OR (h.created_at, h.id) > (CAST(:after_at AS timestamptz), CAST(:after_id AS text)))
ORDER BY h.created_at, h.id LIMIT CAST(:limit AS integer);

-- name: plan_add_items
-- Writes one batch of frozen items; an item's chunk follows from its ord.
WITH ins AS (
    INSERT INTO plan_items (plan_id, job_id, chunk, ord, payload, tags, priority)
    SELECT CAST(:plan_id AS text), i.id, i.ord / CAST(:chunk_size AS integer), i.ord, i.payload, i.tags, i.priority
    FROM ({{plan_items_json}}) i ON CONFLICT DO NOTHING RETURNING 1
)
SELECT count(*) AS n FROM ins;

-- name: plan_drop_items
-- One batch of the items of a plan whose freezing failed before the plan was sealed.
WITH gone AS (
    DELETE FROM plan_items WHERE plan_id = CAST(:plan_id AS text)
      AND job_id IN (SELECT job_id FROM plan_items WHERE plan_id = CAST(:plan_id AS text)
                     LIMIT CAST(:batch AS integer))
    RETURNING 1
)
SELECT count(*) AS n FROM gone;

-- name: plan_breakdown_dlq
-- The preview's counts by reason, queue and type from one join of the plan's items with the DLQ (three
-- joins, one per dimension, were a quarter of a 100k-job plan's freeze: 420 ms).
SELECT CASE WHEN GROUPING(d.failure_reason) = 0 THEN 'reason' WHEN GROUPING(d.queue) = 0 THEN 'queue'
            ELSE 'type' END AS dimension,
       coalesce(CAST(d.failure_reason AS text), d.queue, d.type) AS value, count(*) AS n
FROM plan_items i JOIN jobs_dlq d ON d.id = i.job_id WHERE i.plan_id = CAST(:plan_id AS text)
GROUP BY GROUPING SETS ((d.failure_reason), (d.queue), (d.type));

-- name: plan_breakdown_hot
-- As plan_breakdown_dlq: by status, queue and type from one join.
SELECT CASE WHEN GROUPING(h.status) = 0 THEN 'status' WHEN GROUPING(h.queue) = 0 THEN 'queue'
            ELSE 'type' END AS dimension,
       coalesce(CAST(h.status AS text), h.queue, h.type) AS value, count(*) AS n
FROM plan_items i JOIN jobs_hot h ON h.id = i.job_id WHERE i.plan_id = CAST(:plan_id AS text)
GROUP BY GROUPING SETS ((h.status), (h.queue), (h.type));

-- name: plan_sample_dlq
SELECT d.id, d.queue, d.type, d.failure_reason, d.attempt_count, d.failed_at, d.fingerprint, d.error_details,
       i.payload AS new_payload, i.tags AS new_tags, i.priority AS new_priority
FROM plan_items i JOIN jobs_dlq d ON d.id = i.job_id
WHERE i.plan_id = CAST(:plan_id AS text) ORDER BY i.ord LIMIT CAST(:limit AS integer);

-- name: plan_sample_hot
SELECT h.id, h.queue, h.type, h.status, h.attempt_count, h.created_at, h.scheduled_at
FROM plan_items i JOIN jobs_hot h ON h.id = i.job_id
WHERE i.plan_id = CAST(:plan_id AS text) ORDER BY i.ord LIMIT CAST(:limit AS integer);

-- name: plan_get
SELECT * FROM plans WHERE id = CAST(:id AS text);

-- name: plan_lock
-- Serialises executors of one plan; the chunk's whole transaction holds it.
SELECT * FROM plans WHERE id = CAST(:id AS text) FOR UPDATE;

-- name: plan_list
SELECT * FROM plans
WHERE (CAST(:state AS text) IS NULL OR state = CAST(:state AS text))
  AND (CAST(:action AS text) IS NULL OR action = CAST(:action AS text))
  AND (CAST(:label AS text) IS NULL OR label = CAST(:label AS text))
ORDER BY created_at DESC, id DESC LIMIT CAST(:limit AS integer) OFFSET CAST(:offset AS integer);

-- name: plan_count
SELECT count(*) AS n FROM plans
WHERE (CAST(:state AS text) IS NULL OR state = CAST(:state AS text))
  AND (CAST(:action AS text) IS NULL OR action = CAST(:action AS text))
  AND (CAST(:label AS text) IS NULL OR label = CAST(:label AS text));

-- name: plan_clock
-- The plan's clocks on the database clock, inside a chunk's transaction: seconds until its pace lets
-- the next chunk start (<= 0: now) and until its lease ends (null: no lease).
SELECT extract(epoch FROM coalesce(not_before, now()) - now()) AS wait_s,
       extract(epoch FROM lease_until - now()) AS lease_left_s
FROM plans WHERE id = CAST(:id AS text);

-- name: plan_paced
-- After a chunk: the pace moves the next chunk's earliest start :seconds on (from now, or from the
-- previous mark when it is still ahead, so two processes working the plan share one pace), and the
-- working run's lease is renewed for :ttl_s.
UPDATE plans
SET not_before = CASE WHEN CAST(:seconds AS double precision) > 0
                      THEN greatest(coalesce(not_before, now()), now())
                           + make_interval(secs => CAST(:seconds AS double precision))
                      ELSE not_before END,
    lease_until = CASE WHEN CAST(:holder AS text) IS NOT NULL AND lease_holder = CAST(:holder AS text)
                       THEN now() + make_interval(secs => CAST(:ttl_s AS double precision))
                       ELSE lease_until END
WHERE id = CAST(:id AS text);

-- name: plan_pace
-- Sets the plan's pace (jobs/s; null: none); every process working the plan follows it from its next chunk.
UPDATE plans SET rate = CAST(:rate AS double precision), updated_at = now() WHERE id = CAST(:id AS text)
RETURNING *;

-- name: plan_lease
-- A run takes (or renews) the plan's lease for :ttl_s: free, its own, expired, or held by :take_from (a
-- holder its caller found dead). No row: another run holds it, or the plan is finished.
UPDATE plans SET lease_holder = CAST(:holder AS text),
                 lease_until = now() + make_interval(secs => CAST(:ttl_s AS double precision))
WHERE id = CAST(:id AS text) AND state IN ('ready', 'running')
  AND (lease_holder IS NULL OR lease_holder = CAST(:holder AS text) OR lease_until < now()
       OR (CAST(:take_from AS text) IS NOT NULL AND lease_holder = CAST(:take_from AS text)))
RETURNING *;

-- name: plan_release
UPDATE plans SET lease_holder = NULL, lease_until = NULL
WHERE id = CAST(:id AS text) AND lease_holder = CAST(:holder AS text)
RETURNING id;

-- fragment: plan_claim_update
-- Claims the lowest unfinished chunk: its items are stamped done in the transaction that then moves the
-- jobs, so a crash rolls both back and a resumed plan never touches a job twice. Each is marked `done`
-- here; plan_chunk_done marks the few the move skipped, so the chunk's items are written once, not twice
-- (no one sees the mark before the move commits with it).
-- :from_chunk is the plan's chunks_done: chunks are claimed lowest first, so the k done ones are
-- numbered below the next, and the search starts there instead of stepping over their items' entries in
-- ix_plan_items_pending, which stay (dead) until a vacuum: each chunk of a 100k-job plan walked every
-- chunk before it. The chunk is a scalar subquery, so it bounds the index scan: as a join with the
-- plan's items (estimated at one row before an analyze) each claim read every item left (17 ms a chunk
-- of a 100k-job plan, docs/benchmarks.md "Plans").
UPDATE plan_items i SET done_at = now(), outcome = 'done'
WHERE i.plan_id = CAST(:plan_id AS text) AND i.done_at IS NULL
  AND i.chunk = (SELECT min(chunk) FROM plan_items
                 WHERE plan_id = CAST(:plan_id AS text) AND done_at IS NULL AND chunk >= CAST(:from_chunk AS integer))
RETURNING i.job_id, i.chunk, i.ord, i.payload, i.tags, i.priority

-- fragment: plan_chunk_head
-- What a plan_*_chunk reply says of the chunk claimed (`claimed`, the claim's CTE): its number, its items'
-- order numbers and their count; no row when nothing was left to claim. Each reply is one row, the moved
-- ids as one JSON array: 1,000 rows through the ODBC driver cost more than the statement's own work.
(SELECT min(chunk) AS chunk, min(ord) AS ord_from, max(ord) AS ord_to, count(*) AS claimed
 FROM claimed HAVING count(*) > 0) c

-- name: plan_claim_chunk
{{plan_claim_update}};

-- name: plan_resurrect_chunk
-- plan_claim_chunk and resurrect of its items in one statement: the items' edits go from plan_items
-- straight into hot. Claimed apart, the chunk's 1,000 items (payloads and all) crossed to the client and
-- back as the resurrect's JSON parameter: 70 of a 78 ms chunk were those two statements, where a resurrect
-- by filter takes 35 (docs/benchmarks.md "Plans in one statement a chunk"). The reply: plan_chunk_head,
-- the ids put back in hot (`moved`) and those already there, displaced instead (`twins`).
WITH claimed AS ({{plan_claim_update}}),
-- The items as resurrect's `items`, and estimated as those are (a set-returning function's 100 rows): the
-- UPDATE's own estimate (one row, before plan_items is analyzed) made resurrect_rest's joins of moved and
-- revived nested loops, 1,000 x 1,000 (100 ms of a chunk).
items AS (
    SELECT * FROM jsonb_to_recordset((SELECT jsonb_agg(jsonb_build_object('id', job_id, 'payload', payload,
                                                                        'tags', tags, 'priority', priority))
                                      FROM claimed)) AS i(id text, payload text, tags text, priority integer)
),
{{resurrect_items}},
{{resurrect_rest}}
SELECT c.*, (SELECT json_agg(id) FROM revived WHERE (SELECT count(*) FROM signal) >= 0)::text AS moved,
       (SELECT json_agg(id) FROM hot_twins)::text AS twins
FROM {{plan_chunk_head}};

-- name: plan_purge_chunk
-- plan_claim_chunk and purge_dlq of its items in one statement (see plan_resurrect_chunk). The reply:
-- plan_chunk_head and the ids purged (`moved`); rows another session holds are skipped.
WITH claimed AS ({{plan_claim_update}}),
victims AS (
    SELECT id FROM jobs_dlq WHERE id = ANY(ARRAY(SELECT job_id FROM claimed))
    ORDER BY failed_at, id FOR UPDATE SKIP LOCKED
),
moved AS (
    DELETE FROM jobs_dlq d WHERE d.id = ANY(ARRAY(SELECT id FROM victims)) RETURNING d.id, d.queue
),
{{purge_dlq_rest}}
SELECT c.*, (SELECT json_agg(id) FROM moved)::text AS moved, CAST(NULL AS text) AS twins
FROM {{plan_chunk_head}};

-- name: plan_chunk_done
-- Marks the claimed items the move skipped (not in :moved: no longer where the plan found them; the
-- others are `done` since the claim), and advances the plan's counters and state. The chunk's items are
-- found by their order numbers (:ord_from..:ord_to, the claimed ones'), through ix_plan_items_order: by
-- chunk alone no index applies once the items are stamped done, and each chunk read every item of the
-- plan (20 ms a chunk of a 100k-job plan).
WITH marked AS (
    UPDATE plan_items i SET outcome = 'skipped'
    WHERE i.plan_id = CAST(:plan_id AS text) AND i.ord BETWEEN CAST(:ord_from AS integer) AND CAST(:ord_to AS integer)
      AND i.chunk = CAST(:chunk AS integer)
      AND i.job_id NOT IN (SELECT jsonb_array_elements_text(CAST(:moved AS jsonb)))
    RETURNING 1
),
counts AS (
    SELECT jsonb_array_length(CAST(:moved AS jsonb)) AS done, (SELECT count(*) FROM marked) AS skipped
)
UPDATE plans p
SET done = p.done + c.done, skipped = p.skipped + c.skipped, chunks_done = p.chunks_done + 1, updated_at = now(),
    state = CASE WHEN p.chunks_done + 1 >= p.chunks THEN 'done' ELSE 'running' END,
    finished_at = CASE WHEN p.chunks_done + 1 >= p.chunks THEN now() END
FROM counts c WHERE p.id = CAST(:plan_id AS text)
RETURNING p.*;

-- name: plan_finish
-- A plan with nothing left to claim is done (an empty plan, or chunks finished by another executor).
UPDATE plans SET state = 'done', updated_at = now(), finished_at = coalesce(finished_at, now())
WHERE id = CAST(:plan_id AS text) AND state IN ('ready', 'running')
  AND NOT EXISTS (SELECT 1 FROM plan_items WHERE plan_id = CAST(:plan_id AS text) AND done_at IS NULL)
RETURNING *;

-- name: plan_approve
-- Four-eyes: a ready or running plan approved by someone other than its creator; the first approval
-- stands (no row when the plan is finished, already approved, or the approver created it).
UPDATE plans SET approved_by = CAST(:actor AS text), approved_at = now(), updated_at = now()
WHERE id = CAST(:id AS text) AND state IN ('ready', 'running') AND approved_by IS NULL
  AND actor <> CAST(:actor AS text)
RETURNING *;

-- name: plan_discard
UPDATE plans SET state = 'discarded', updated_at = now()
WHERE id = CAST(:id AS text) AND state IN ('ready', 'running')
RETURNING *;

-- name: plan_items
-- The job's id is `id`, as in every other listing and frame.
SELECT job_id AS id, chunk, ord, done_at, outcome, payload, tags, priority FROM plan_items
WHERE plan_id = CAST(:plan_id AS text) ORDER BY ord LIMIT CAST(:limit AS integer) OFFSET CAST(:offset AS integer);

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
WHERE i.plan_id = CAST(:plan_id AS text) AND i.outcome = 'done'
  AND i.ord BETWEEN CAST(:ord_from AS integer) AND CAST(:ord_to AS integer)
  AND i.chunk BETWEEN CAST(:from_chunk AS integer) AND CAST(:to_chunk AS integer)
GROUP BY 1, 2;

-- ---------------------------------------------------------------- circuits (docs/circuits.md)

-- fragment: circuit_columns
type, CASE state WHEN 0 THEN 'closed' WHEN 1 THEN 'open' ELSE 'half_open' END AS state,
CASE prev_state WHEN 0 THEN 'closed' WHEN 1 THEN 'open' ELSE 'half_open' END AS prev_state,
forced = 1 AS forced, failures, last_failure_at, opened_at, open_until, probes, successes, transitions,
failure_threshold, failure_window_s, break_duration_s, half_open_max_calls, updated_at,
CASE WHEN open_until IS NULL THEN NULL
     ELSE greatest(0.0, extract(epoch FROM open_until - now()))::double precision END AS open_for_s

-- fragment: circuit_items
SELECT i->>'type' FROM jsonb_array_elements(CAST(:items AS jsonb)) i

-- name: circuit_failures
-- Counted failures of each type in :items ({type, n, threshold, window_s, break_s, half_open}). Closed:
-- the count restarts when the previous failure is older than the window (the original's tumbling
-- window), and reaching the threshold opens the circuit; half-open: any failure opens it again; open or
-- forced open: only counted. Rows are taken in type order, so two workers' reports cannot deadlock.
UPDATE circuits SET prev_state = state WHERE type IN ({{circuit_items}});
INSERT INTO circuits AS c (type, failures, last_failure_at, failure_threshold, failure_window_s, break_duration_s,
                           half_open_max_calls, updated_at)
SELECT i->>'type', (i->>'n')::integer, now(), (i->>'threshold')::integer, (i->>'window_s')::double precision,
       (i->>'break_s')::double precision, (i->>'half_open')::integer, now()
FROM jsonb_array_elements(CAST(:items AS jsonb)) i ORDER BY i->>'type'
ON CONFLICT (type) DO UPDATE SET
    failures = CASE WHEN c.state = 0 AND c.last_failure_at < now() - make_interval(secs => excluded.failure_window_s)
                    THEN excluded.failures ELSE c.failures + excluded.failures END,
    last_failure_at = excluded.last_failure_at, failure_threshold = excluded.failure_threshold,
    failure_window_s = excluded.failure_window_s, break_duration_s = excluded.break_duration_s,
    half_open_max_calls = excluded.half_open_max_calls, updated_at = excluded.updated_at;
UPDATE circuits SET state = 1, opened_at = now(), open_until = now() + make_interval(secs => break_duration_s),
                    probes = 0, successes = 0, transitions = transitions + 1
WHERE type IN ({{circuit_items}}) AND forced = 0 AND (state = 2 OR (state = 0 AND failures >= failure_threshold));
INSERT INTO events (kind, message, data)
SELECT 'circuit', 'Circuit of ' || type || ' opened after ' || failures || ' failures',
       json_build_object('type', type, 'state', 'open', 'from', CASE prev_state WHEN 0 THEN 'closed' ELSE 'half_open' END,
                         'failures', failures, 'open_until', open_until)::text
FROM circuits WHERE type IN ({{circuit_items}}) AND state <> prev_state;
SELECT {{circuit_columns}} FROM circuits WHERE type IN ({{circuit_items}});

-- name: circuit_successes
-- Successful probes of half-open circuits (:items {type, n}): as many successes as the type's
-- half_open_max_calls close the circuit and clear its failure count.
UPDATE circuits SET prev_state = state WHERE type IN ({{circuit_items}});
UPDATE circuits c SET successes = c.successes + (i->>'n')::integer,
                      probes = greatest(c.probes - (i->>'n')::integer, 0), updated_at = now()
FROM jsonb_array_elements(CAST(:items AS jsonb)) i
WHERE c.type = i->>'type' AND c.state = 2;
UPDATE circuits SET state = 0, failures = 0, successes = 0, probes = 0, probe_until = NULL, open_until = NULL,
                    transitions = transitions + 1
WHERE type IN ({{circuit_items}}) AND state = 2 AND successes >= half_open_max_calls;
INSERT INTO events (kind, message, data)
SELECT 'circuit', 'Circuit of ' || type || ' closed: the half-open probe succeeded',
       json_build_object('type', type, 'state', 'closed', 'from', 'half_open')::text
FROM circuits WHERE type IN ({{circuit_items}}) AND state <> prev_state;
SELECT {{circuit_columns}} FROM circuits WHERE type IN ({{circuit_items}});

-- name: circuit_probe
-- A probe permit for each type in :items ({type, probe_timeout_s}) whose circuit may let one through:
-- open past its break (it turns half-open), or half-open with fewer than half_open_max_calls probes in
-- flight (a probe unresolved after its timeout no longer counts). Returns the types granted one; the row
-- lock makes two workers asking at once get one permit between them.
UPDATE circuits SET prev_state = state WHERE type IN ({{circuit_items}});
INSERT INTO events (kind, message, data)
SELECT 'circuit', 'Circuit of ' || type || ' half-open: one probe may run',
       json_build_object('type', type, 'state', 'half_open', 'from', 'open')::text
FROM circuits WHERE type IN ({{circuit_items}}) AND forced = 0 AND state = 1 AND open_until <= now();
UPDATE circuits c SET
    probes = CASE WHEN c.state = 1 OR c.probe_until < now() THEN 1 ELSE c.probes + 1 END,
    successes = CASE WHEN c.state = 1 THEN 0 ELSE c.successes END,
    transitions = c.transitions + CASE WHEN c.state = 1 THEN 1 ELSE 0 END,
    state = 2,
    probe_until = now() + make_interval(secs => (i->>'probe_timeout_s')::double precision),
    updated_at = now()
FROM jsonb_array_elements(CAST(:items AS jsonb)) i
WHERE c.type = i->>'type' AND c.forced = 0
  AND ((c.state = 1 AND c.open_until <= now()) OR (c.state = 2 AND (c.probes < c.half_open_max_calls OR c.probe_until < now())))
RETURNING c.type, 'half_open' AS state;

-- name: circuit_states
-- What a worker's gate needs: every circuit that is not closed.
SELECT {{circuit_columns}} FROM circuits WHERE state <> 0;

-- name: list_circuits
SELECT {{circuit_columns}} FROM circuits ORDER BY type;

-- name: set_circuit
-- An operator forces a circuit open (:state 1: stays open, no probes, until closed) or closed (:state
-- 0: counts cleared, the policy applies again). Audited with the row before and after.
INSERT INTO audit_log (actor, action, details)
VALUES (CAST(:actor AS text), 'set_circuit', json_build_object('type', CAST(:type AS text), 'before',
        (SELECT json_build_object('state', state, 'forced', forced, 'failures', failures) FROM circuits
         WHERE type = CAST(:type AS text)))::text);
INSERT INTO circuits (type, updated_at) VALUES (CAST(:type AS text), now()) ON CONFLICT (type) DO NOTHING;
UPDATE circuits SET prev_state = state,
                    transitions = transitions + CASE WHEN state <> CAST(:state AS integer) THEN 1 ELSE 0 END,
                    state = CAST(:state AS integer), forced = CAST(:state AS integer),
                    failures = CASE WHEN CAST(:state AS integer) = 0 THEN 0 ELSE failures END,
                    opened_at = CASE WHEN CAST(:state AS integer) = 1 THEN now() ELSE opened_at END,
                    open_until = NULL, probes = 0, probe_until = NULL, successes = 0, updated_at = now()
WHERE type = CAST(:type AS text);
UPDATE audit_log SET details = (CAST(details AS jsonb) || jsonb_build_object('after',
       (SELECT json_build_object('state', state, 'forced', forced, 'failures', failures) FROM circuits
        WHERE type = CAST(:type AS text))))::text
WHERE id = (SELECT max(id) FROM audit_log WHERE action = 'set_circuit');
INSERT INTO events (kind, message, data)
SELECT 'circuit', 'Circuit of ' || type || CASE WHEN CAST(:state AS integer) = 1 THEN ' forced open by ' ELSE ' closed by ' END
                  || CAST(:actor AS text),
       json_build_object('type', type, 'state', CASE WHEN CAST(:state AS integer) = 1 THEN 'open' ELSE 'closed' END,
                         'forced', forced, 'actor', CAST(:actor AS text))::text
FROM circuits WHERE type = CAST(:type AS text);
SELECT {{circuit_columns}} FROM circuits WHERE type = CAST(:type AS text);

-- name: defer
-- Jobs an open circuit met at their start: back to pending after :delay_s without the attempt the start
-- counted (user code never ran). One event per type.
WITH moved AS (
    UPDATE jobs_hot SET status = 0, worker_id = NULL, heartbeat_at = NULL, ready_xid = pg_current_xact_id(),
                        attempt_count = greatest(attempt_count - 1, 0),
                        scheduled_at = now() + make_interval(secs => CAST(:delay_s AS double precision)),
                        due_at = now() + make_interval(secs => CAST(:delay_s AS double precision)),
                        updated_at = now()
    WHERE id = ANY(ARRAY(SELECT jsonb_array_elements_text(CAST(:ids AS jsonb))))
      AND worker_id = CAST(:worker_id AS text) AND status + 0 = 2
    RETURNING id, type, queue
),
deltas (queue, enqueued, succeeded, failed, retried, pending, fetched, processing) AS (SELECT queue, 0, 0, 0, 0, 1, 0, -1 FROM moved),
counters AS ({{count_deltas}}),
events AS (
    INSERT INTO events (kind, message, data)
    SELECT 'circuit', count(*) || ' jobs of ' || type || ' deferred: its circuit is open',
           json_build_object('type', type, 'deferred', count(*), 'delay_s', CAST(:delay_s AS double precision),
                             'worker_id', CAST(:worker_id AS text))::text
    FROM moved GROUP BY type
)
SELECT id FROM moved;

-- ---------------------------------------------------------------- worker registry (docs/worker.md "Registry")

-- fragment: registry_columns
id AS worker_id, host, pid, queues, concurrency, desired_concurrency, running, prefetched, started_at, last_seen_at,
extract(epoch FROM now() - last_seen_at)::double precision AS seen_s

-- name: worker_register
-- A worker's row, refreshed on every heartbeat; returns the operator's concurrency target. A row another
-- session holds locked (an operator's open transaction, a report's SELECT ... FOR UPDATE) is left for the
-- next beat, not waited for: no row back then. The beat writes the jobs' heartbeats first, and a wait
-- here would hold up the next beat's.
WITH mine AS (SELECT w.id FROM workers w WHERE w.id = CAST(:id AS text) FOR UPDATE SKIP LOCKED),
held AS (SELECT 1 FROM workers w WHERE w.id = CAST(:id AS text) AND NOT EXISTS (SELECT 1 FROM mine))
INSERT INTO workers AS w (id, host, pid, queues, concurrency, running, prefetched, started_at, last_seen_at)
SELECT CAST(:id AS text), CAST(:host AS text), CAST(:pid AS integer), CAST(:queues AS text),
       CAST(:concurrency AS integer), CAST(:running AS integer), CAST(:prefetched AS integer), now(), now()
WHERE NOT EXISTS (SELECT 1 FROM held)
ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,
    concurrency = excluded.concurrency, running = excluded.running, prefetched = excluded.prefetched,
    last_seen_at = excluded.last_seen_at,
    started_at = CASE WHEN w.pid = excluded.pid AND w.host = excluded.host THEN w.started_at
                      ELSE excluded.started_at END
RETURNING desired_concurrency;

-- name: worker_unregister
-- A stopping worker's registry row. One another session holds (an operator's open transaction on
-- `workers`) is left, not waited for: shutdown must not hang up to Storage.CommandTimeout on it. The
-- row left comes back; the registry shows it gone once its last_seen_at is older than
-- Health.WorkerHeartbeatTimeout, and retention prunes it (docs/worker.md "Registry and live concurrency").
WITH mine AS (SELECT id FROM workers WHERE id = CAST(:id AS text) FOR UPDATE SKIP LOCKED),
gone AS (DELETE FROM workers w WHERE w.id = ANY (ARRAY(SELECT id FROM mine)) RETURNING w.id)
-- The same statement's snapshot still sees a row it deleted: those are taken out by `gone`.
SELECT w.id FROM workers w WHERE w.id = CAST(:id AS text) AND NOT EXISTS (SELECT 1 FROM gone);

-- name: list_registry
SELECT {{registry_columns}} FROM workers ORDER BY id;

-- name: set_worker_concurrency
-- An operator's concurrency target for a registered worker; audited with the value before and after.
WITH before AS (SELECT * FROM workers WHERE id = CAST(:id AS text) FOR UPDATE),
changed AS (
    UPDATE workers SET desired_concurrency = CAST(:concurrency AS integer)
    WHERE id = (SELECT id FROM before) RETURNING *
),
audit AS (
    INSERT INTO audit_log (actor, action, details)
    SELECT CAST(:actor AS text), 'set_worker',
           json_build_object('worker_id', b.id, 'before', json_build_object('concurrency', b.concurrency,
                             'desired_concurrency', b.desired_concurrency),
                             'after', json_build_object('desired_concurrency', CAST(:concurrency AS integer)))::text
    FROM before b
),
events AS (
    INSERT INTO events (kind, message, data)
    SELECT 'worker', 'Worker ' || c.id || ' concurrency set to ' || c.desired_concurrency || ' by ' || CAST(:actor AS text),
           json_build_object('worker_id', c.id, 'desired_concurrency', c.desired_concurrency,
                             'actor', CAST(:actor AS text))::text
    FROM changed c
)
SELECT id AS worker_id, host, pid, queues, concurrency, desired_concurrency, running, prefetched, started_at,
       last_seen_at, extract(epoch FROM now() - last_seen_at)::double precision AS seen_s
FROM changed;

-- name: prune_workers
-- Registry rows of workers not seen for :older_than_s (they crashed or were killed: a stopping worker
-- deletes its own row). A small table: one statement.
WITH gone AS (
    DELETE FROM workers WHERE last_seen_at < now() - make_interval(secs => CAST(:older_than_s AS double precision))
    RETURNING 1
)
SELECT count(*) AS n FROM gone;

-- name: recover_orphaned
-- Rescue phase 1b, one batch: fetched rows of workers whose registry row was not refreshed for :gone_s
-- (Health.WorkerHeartbeatTimeout: the worker died) go back to pending at once; user code never ran.
WITH gone AS (
    SELECT id FROM workers WHERE last_seen_at < now() - make_interval(secs => CAST(:gone_s AS double precision))
),
victims AS (
    -- Read only while a worker is gone: the fetched rows' index holds the dead entries of every fetch.
    SELECT h.id FROM jobs_hot h
    WHERE EXISTS (SELECT 1 FROM gone) AND h.status = 1 AND h.worker_id IN (SELECT id FROM gone)
    LIMIT CAST(:batch AS integer) FOR UPDATE OF h SKIP LOCKED
),
moved AS (
    UPDATE jobs_hot SET status = 0, worker_id = NULL, updated_at = now(), ready_xid = pg_current_xact_id()
    WHERE id = ANY (ARRAY(SELECT id FROM victims)) AND status = 1
    RETURNING id, queue
),
deltas (queue, enqueued, succeeded, failed, retried, pending, fetched, processing) AS (SELECT queue, 0, 0, 0, 0, 1, -1, 0 FROM moved),
counters AS ({{count_deltas}})
SELECT id, queue FROM moved;

-- name: gone_workers
-- Registered workers not seen for :gone_s: their jobs are shown as "worker gone".
SELECT id FROM workers WHERE last_seen_at < now() - make_interval(secs => CAST(:gone_s AS double precision));

-- ---------------------------------------------------------------- failure history

-- name: failure_history
-- Failed attempts (see job_failures), oldest first, after the :after_seq of the previous page. List
-- filters are JSON arrays (or null): :ids, :queues/:not_queues, :types/:not_types, :reasons/:not_reasons
-- (codes), :fingerprints; times are half-open [:failed_from, :failed_to).
SELECT d.seq, d.job_id, d.queue, d.type, d.attempt, d.outcome,
       coalesce(r.name, 'reason ' || d.failure_reason) AS failure_reason, d.fingerprint, d.error_line,
       d.error_details, d.worker_id, d.failed_at
FROM job_failures d LEFT JOIN failure_reasons r ON r.code = d.failure_reason
WHERE d.seq > coalesce(CAST(:after_seq AS bigint), 0)
  AND (CAST(:ids AS jsonb) IS NULL OR d.job_id IN (SELECT jsonb_array_elements_text(CAST(:ids AS jsonb))))
  AND {{list_where}}
  AND (CAST(:outcome AS text) IS NULL OR d.outcome = CAST(:outcome AS text))
  AND (CAST(:failed_from AS timestamptz) IS NULL OR d.failed_at >= CAST(:failed_from AS timestamptz))
  AND (CAST(:failed_to AS timestamptz) IS NULL OR d.failed_at < CAST(:failed_to AS timestamptz))
ORDER BY d.seq LIMIT CAST(:limit AS integer);

-- name: prune_failures
-- One batch: the :batch oldest failure-history rows older than :older_than_s, from :after_at on.
WITH victims AS (
    SELECT seq FROM job_failures
    WHERE failed_at < now() - make_interval(secs => CAST(:older_than_s AS double precision))
      AND failed_at >= coalesce(CAST(:after_at AS timestamptz), '-infinity')
    ORDER BY failed_at LIMIT CAST(:batch AS integer) FOR UPDATE SKIP LOCKED
),
gone AS (DELETE FROM job_failures f WHERE f.seq = ANY (ARRAY(SELECT seq FROM victims)) RETURNING f.failed_at)
SELECT count(*) AS n, max(failed_at) AS last_at FROM gone;

-- name: locate_jobs
-- Where each of :ids (a JSON array) is now: hot (with its status), archive or dlq, or in no table.
SELECT j.id,
       CASE WHEN h.id IS NOT NULL THEN 'hot' WHEN a.id IS NOT NULL THEN 'archive'
            WHEN d.id IS NOT NULL THEN 'dlq' ELSE 'gone' END AS location,
       h.status AS hot_status, d.failure_reason AS failure_reason,
       coalesce(a.finished_at, d.failed_at) AS finished_at
FROM jsonb_array_elements_text(CAST(:ids AS jsonb)) WITH ORDINALITY AS j(id, n)
LEFT JOIN jobs_hot h ON h.id = j.id
LEFT JOIN jobs_archive a ON a.id = j.id
LEFT JOIN jobs_dlq d ON d.id = j.id
ORDER BY j.n;

-- name: register_job_types
-- A starting worker's declarations per job type (:types, JSON [{"type", "idempotent"}]); the last word wins.
INSERT INTO job_types AS t (type, idempotent, updated_at)
SELECT i.type, i.idempotent, now()
FROM jsonb_to_recordset(CAST(:types AS jsonb)) AS i(type text, idempotent boolean) ORDER BY i.type
ON CONFLICT (type) DO UPDATE SET idempotent = excluded.idempotent, updated_at = excluded.updated_at;

-- name: job_types
-- Every job type some worker declared when it started: whether it is idempotent, and when it was said.
SELECT type, idempotent, updated_at FROM job_types ORDER BY type;

-- name: idempotent_types
SELECT type FROM job_types WHERE idempotent ORDER BY type;
