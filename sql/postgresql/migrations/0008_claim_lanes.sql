-- 0008: claims that do not slow down while another session holds an old snapshot (docs/endurance.md).
--
-- A claim used to read the head of one partial index over all pending jobs. While any session keeps a
-- snapshot open (a notebook in a transaction, pg_dump, a BI report, a replica's hot_standby_feedback),
-- VACUUM cannot remove the index entries of the jobs claimed since, and every claim stepped over all of
-- them: its cost grew with the work done, not the work waiting (2,000 -> 330 jobs/s within minutes).
--
-- Now each worker remembers, per lane (queue, priority), the position (due_at, id) where the pending jobs
-- it has not claimed begin, and reads each lane from there: the entries behind the position are never
-- walked again. A job can land behind a position only through a transaction the worker's previous claim
-- could not see (a producer that committed late, a release, a retry, a resurrect, an edit); `ready_xid`
-- names the transaction that last made the row pending, and each claim also reads the pending rows made
-- by transactions that were unfinished or not yet begun at its previous claim (pg_current_snapshot()),
-- through their own index: a late commit is never skipped.

-- A volatile default: filled in for the rows there are (the table is rewritten once).
ALTER TABLE jobs_hot ADD COLUMN ready_xid xid8 NOT NULL DEFAULT pg_current_xact_id();

-- The lanes, read from a worker's position on; id ends the key so a position is exact.
CREATE INDEX ix_jobs_hot_lane ON jobs_hot (queue, priority DESC, due_at, id) WHERE status = 0;
-- Pending rows by the transaction that made them pending: the claim's guard for late commits.
CREATE INDEX ix_jobs_hot_ready_xid ON jobs_hot (ready_xid) WHERE status = 0;
-- The lane index answers everything these did (each per-queue read; the global head is gone).
DROP INDEX IF EXISTS ix_jobs_hot_fetch;
DROP INDEX IF EXISTS ix_jobs_hot_queue_fetch;
