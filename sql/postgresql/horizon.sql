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
