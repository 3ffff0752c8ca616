-- The snapshot horizon (chokaq_ops/storage/horizon.py), PostgreSQL: who holds back the oldest snapshot
-- that vacuum must respect in this database.

-- fragment: snapshot_holders
-- The sessions of `pg_stat_activity a` that hold a snapshot back: this database's client backends (the
-- calling one left out) and WAL senders, which feed standbys of every database.
a.backend_xmin IS NOT NULL AND a.pid <> pg_backend_pid()
AND ((a.datname = current_database() AND a.backend_type = 'client backend') OR a.backend_type = 'walsender')

-- name: oldest_snapshot
-- The backend of this database (or a WAL sender, which feeds standbys of every database) with the oldest
-- xmin: how long its transaction (or statement) has run and who it is. The calling backend is left out, and
-- so are the server's own processes (an autovacuum worker's xmin is momentary, and nobody to call).
SELECT a.pid, a.application_name, a.usename AS user_name, CAST(a.client_addr AS text) AS client, a.state,
       extract(epoch FROM now() - coalesce(a.xact_start, a.query_start)) AS age_s,
       age(a.backend_xmin) AS xid_age, left(a.query, 200) AS query, a.backend_type
FROM pg_stat_activity a
WHERE {{snapshot_holders}}
ORDER BY age(a.backend_xmin) DESC, coalesce(a.xact_start, a.query_start)
LIMIT 1;

-- name: horizon_slots
-- Replication slots that hold the horizon back (their xmin or catalog_xmin), oldest first: a standby's
-- hot_standby_feedback, or a logical slot nobody reads any more.
SELECT slot_name, slot_type, active, CAST(database AS text) AS database,
       age(xmin) AS xmin_age, age(catalog_xmin) AS catalog_xmin_age
FROM pg_replication_slots
WHERE xmin IS NOT NULL OR catalog_xmin IS NOT NULL
ORDER BY greatest(coalesce(age(xmin), 0), coalesce(age(catalog_xmin), 0)) DESC;

-- name: horizon_prepared
-- Prepared (two-phase) transactions of this database: each holds the horizon until it is committed or
-- rolled back, whoever prepared it.
SELECT gid, owner, extract(epoch FROM now() - prepared) AS age_s, age(transaction) AS xid_age
FROM pg_prepared_xacts WHERE database = current_database()
ORDER BY prepared;

-- name: horizon_session
-- One session of this database, as the horizon check names it (cancel_session checks its target).
SELECT a.pid, a.application_name, a.usename AS user_name, CAST(a.client_addr AS text) AS client, a.state,
       extract(epoch FROM now() - coalesce(a.xact_start, a.query_start)) AS age_s,
       age(a.backend_xmin) AS xid_age, left(a.query, 200) AS query, a.backend_type
FROM pg_stat_activity a
WHERE a.pid = CAST(:pid AS integer) AND a.pid <> pg_backend_pid() AND a.datname = current_database()
  AND a.backend_type = 'client backend';

-- name: signal_session
-- Cancels the running statement of session :pid (pg_cancel_backend), or with :terminate ends the session
-- (pg_terminate_backend: its open transaction rolls back and its snapshot goes). Only a client session of
-- this database, never the caller's own. A signal cannot be taken back, so its audit row is committed
-- before it is sent (storage/horizon.py).
SELECT a.pid, CASE WHEN CAST(:terminate AS boolean) THEN pg_terminate_backend(a.pid)
                   ELSE pg_cancel_backend(a.pid) END AS ok
FROM pg_stat_activity a
WHERE a.pid = CAST(:pid AS integer) AND a.pid <> pg_backend_pid() AND a.datname = current_database()
  AND a.backend_type = 'client backend';

-- name: queue_tables
-- Dead row versions and size of the tables whose rows churn (the statistics collector's counts lag by a
-- second or so): what a held snapshot makes grow.
SELECT s.relname AS name, s.n_live_tup AS live, s.n_dead_tup AS dead, pg_total_relation_size(s.relid) AS bytes
FROM pg_stat_user_tables s
WHERE s.relname IN ('jobs_hot', 'queue_counts', 'stats_summary', 'metric_buckets', 'idle_workers', 'workers',
                    'leases', 'sweep_marks', 'jobs_dlq', 'jobs_archive')
ORDER BY s.relname;

-- name: upkeep_tables
-- The tables whose rows churn, as the upkeep (engine/upkeep.py, docs/endurance.md "Upkeep") decides on
-- them: dead versions, live rows, heap and index bytes, the seconds since the last vacuum of either kind,
-- and whether a vacuum could remove anything now: no session of this database (nor a WAL sender) holds a
-- snapshot, or the oldest one began after that vacuum (versions that died between the two are
-- removable). A holder that began before it keeps everything since: a vacuum then only reads the table.
-- horizon_s: the oldest holder's age (a REINDEX CONCURRENTLY would wait for it).
WITH holder AS (
    SELECT min(coalesce(a.xact_start, a.query_start)) AS since
    FROM pg_stat_activity a
    WHERE {{snapshot_holders}}
),
t AS (
    SELECT s.relid, s.relname, s.n_live_tup, s.n_dead_tup, greatest(s.last_vacuum, s.last_autovacuum) AS vacuumed
    FROM pg_stat_user_tables s
    WHERE s.schemaname = current_schema()
      AND s.relname IN ('jobs_hot', 'queue_counts', 'stats_summary', 'metric_buckets', 'idle_workers', 'workers',
                        'leases', 'sweep_marks')
)
SELECT t.relname AS name, t.n_live_tup AS live, t.n_dead_tup AS dead,
       pg_relation_size(t.relid) AS heap_bytes, pg_indexes_size(t.relid) AS index_bytes,
       extract(epoch FROM now() - t.vacuumed) AS vacuumed_s,
       (h.since IS NULL OR t.vacuumed IS NULL OR h.since > t.vacuumed) AS removable,
       extract(epoch FROM now() - h.since) AS horizon_s
FROM t CROSS JOIN holder h
ORDER BY t.relname;

-- name: upkeep_invalid_hot_indexes
-- Indexes of jobs_hot left invalid by an interrupted REINDEX CONCURRENTLY (its `_ccnew` copies): every
-- write still maintains them, so the upkeep drops them before it rebuilds.
SELECT c.relname AS name FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = CAST('jobs_hot' AS regclass) AND NOT i.indisvalid;

-- name: upkeep_drop_invalid_hot_indexes
-- Drops them (identifiers quoted by format's %I on the server; a short lock_timeout: the queue never
-- waits behind this).
SET LOCAL lock_timeout = '200ms';
DO $$
DECLARE r record;
BEGIN
    FOR r IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
             WHERE i.indrelid = CAST('jobs_hot' AS regclass) AND NOT i.indisvalid LOOP
        EXECUTE format('DROP INDEX %I', r.relname);
    END LOOP;
END $$;

-- name: upkeep_reindex_jobs_hot
-- Rebuilds jobs_hot's indexes without blocking the queue (writes go on; the swap waits for the
-- statements using the old ones). After a long snapshot, VACUUM empties the pages of the versions it
-- kept but never gives index pages back to the file system.
REINDEX TABLE CONCURRENTLY jobs_hot;

-- name: upkeep_vacuum_jobs_hot
VACUUM (SKIP_LOCKED) jobs_hot;

-- name: upkeep_vacuum_queue_counts
VACUUM (SKIP_LOCKED) queue_counts;

-- name: upkeep_vacuum_stats_summary
VACUUM (SKIP_LOCKED) stats_summary;

-- name: upkeep_vacuum_metric_buckets
VACUUM (SKIP_LOCKED) metric_buckets;

-- name: upkeep_vacuum_idle_workers
VACUUM (SKIP_LOCKED) idle_workers;

-- name: upkeep_vacuum_workers
VACUUM (SKIP_LOCKED) workers;

-- name: upkeep_vacuum_leases
VACUUM (SKIP_LOCKED) leases;

-- name: upkeep_vacuum_sweep_marks
VACUUM (SKIP_LOCKED) sweep_marks;

-- name: session_statement_timeout
-- This connection's statement timeout, and setting it (Database.run_outside_transaction).
SELECT current_setting('statement_timeout') AS value;

-- name: set_session_statement_timeout
SELECT set_config('statement_timeout', CAST(:value AS text), false) AS value;
