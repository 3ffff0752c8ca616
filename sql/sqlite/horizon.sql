-- The snapshot horizon (chokaq_ops/storage/horizon.py), SQLite: no server-side snapshot holders to name
-- (a long reader holds back the WAL checkpoint instead; its size is another check's business).

-- name: oldest_snapshot
SELECT NULL AS pid WHERE 0;
