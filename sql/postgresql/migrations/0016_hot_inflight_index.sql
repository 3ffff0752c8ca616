-- 0016: ix_jobs_hot_queue_status (queue, status) becomes ix_jobs_hot_inflight (queue) WHERE status IN (1, 2),
-- which is all that read it: the max_workers check counts a capped queue's fetched and processing rows.
-- The old index took an entry for every row version, pending ones included, and with most rows sharing
-- one key ('queue', 0) each insert met a long run of equal keys (deduplication, splits in the middle):
-- an enqueue_many of 1,000 jobs spent 0.9 ms of its 8.5 in it, a claim of 8 about 30 us of 600
-- (docs/benchmarks.md "enqueue_many"). Enqueues no longer write this index at all.
CREATE INDEX IF NOT EXISTS ix_jobs_hot_inflight ON jobs_hot (queue) WHERE status IN (1, 2);
DROP INDEX IF EXISTS ix_jobs_hot_queue_status;
