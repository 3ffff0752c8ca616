-- 0005: the index behind an idle worker's timer to the next delayed job (query next_due). Only scheduled
-- jobs (a delay, a time, a retry) have scheduled_at, and only pending ones can become due, so the jobs
-- enqueued to run at once never pay for it.
CREATE INDEX ix_jobs_hot_due ON jobs_hot (due_at) WHERE status = 0 AND scheduled_at IS NOT NULL;

-- Enqueue counters without a hot row: each enqueue adds to one of 64 rows of its queue (chosen by the
-- server process id, so concurrent producers' connections rarely share one), instead of the queue's one
-- stats_summary row, whose lock every producer of the queue waited for until the holder's commit was
-- flushed (about 450 enqueues/s in all, from any number of producers). Queue totals add the shards to
-- stats_summary.enqueued_total (which keeps the counts from before).
CREATE TABLE enqueue_counts (
    queue  varchar(255) NOT NULL,
    shard  smallint     NOT NULL,
    n      bigint       NOT NULL DEFAULT 0,
    at     timestamptz,
    CONSTRAINT pk_enqueue_counts PRIMARY KEY (queue, shard)
);

-- Workers waiting for work (engine/wakeup.py): an enqueue sends its NOTIFY only while one is marked,
-- because a notifying commit holds a database-wide lock until it is flushed, which let notifying
-- producers commit one at a time. A busy worker (its claims come back full) unmarks itself; a mark not
-- refreshed for a minute (a worker that died) no longer counts.
CREATE TABLE idle_workers (
    worker_id  varchar(100) NOT NULL,
    seen_at    timestamptz  NOT NULL,
    CONSTRAINT pk_idle_workers PRIMARY KEY (worker_id)
);
