-- The snapshot horizon (chokaq_ops/storage/horizon.py), PostgreSQL: who holds back the oldest snapshot
-- that vacuum must respect in this database.

-- name: oldest_snapshot
-- The backend of this database (or a WAL sender, which feeds standbys of every database) with the oldest
-- xmin: how long its transaction (or statement) has run and who it is. The calling backend is left out, and
-- so are the server's own processes (an autovacuum worker's xmin is momentary, and nobody to call).
SELECT a.pid, a.application_name, a.usename AS user_name, CAST(a.client_addr AS text) AS client, a.state,
       extract(epoch FROM now() - coalesce(a.xact_start, a.query_start)) AS age_s,
       age(a.backend_xmin) AS xid_age, left(a.query, 200) AS query, a.backend_type
FROM pg_stat_activity a
WHERE a.backend_xmin IS NOT NULL AND a.pid <> pg_backend_pid()
  AND ((a.datname = current_database() AND a.backend_type = 'client backend') OR a.backend_type = 'walsender')
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
