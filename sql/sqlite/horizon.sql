-- The snapshot horizon (chokaq_ops/storage/horizon.py), SQLite: no server-side snapshot holders to name
-- (a long reader holds back the WAL checkpoint instead; its size is another check's business).

-- name: oldest_snapshot
SELECT NULL AS pid WHERE 0;

-- name: horizon_slots
-- SQLite has no replication slots.
SELECT NULL AS slot_name WHERE 0;

-- name: horizon_prepared
-- Nor prepared transactions.
SELECT NULL AS gid WHERE 0;

-- name: horizon_session
-- Nor sessions to name (a reader holding the WAL is another process's connection).
SELECT NULL AS pid WHERE 0;

-- name: signal_session
-- Nor sessions to cancel: nothing happens, nothing is written.
SELECT NULL AS pid, NULL AS ok WHERE 0;

-- name: queue_tables
-- SQLite keeps no dead row versions; its write-ahead log is reported apart (storage/wal.py).
SELECT NULL AS name WHERE 0;
