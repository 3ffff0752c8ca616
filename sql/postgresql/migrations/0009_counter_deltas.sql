-- 0009: counters and idle marks that do not slow down while another session holds an old snapshot
-- (docs/endurance.md).
--
-- Every statement that moved jobs updated its queue's one stats_summary row (and enqueues one of 64
-- enqueue_counts rows). While a snapshot is held, none of those rows' old versions can be removed, and
-- each update walks all of them to find the newest: a busy queue's row reached hundreds of thousands.
-- Deltas now go to rows of their own per bucket of 1,024 transaction ids (queue_counts), which stop
-- being written once those transactions end; fold_counters adds finished buckets into stats_summary.

CREATE TABLE queue_counts (
    queue      varchar(255) NOT NULL,
    xb         bigint       NOT NULL,  -- transaction id >> 10
    slot       smallint     NOT NULL,  -- transaction id % 64
    enqueued   bigint       NOT NULL DEFAULT 0,
    succeeded  bigint       NOT NULL DEFAULT 0,
    failed     bigint       NOT NULL DEFAULT 0,
    retried    bigint       NOT NULL DEFAULT 0,
    at         timestamptz  NOT NULL,
    CONSTRAINT pk_queue_counts PRIMARY KEY (queue, xb, slot)
) WITH (fillfactor = 70);

-- Buckets before this one are folded into the row (readers sum queue_counts from here on).
ALTER TABLE stats_summary ADD COLUMN folded_xb bigint NOT NULL DEFAULT 0;

-- The enqueue shards' counts join the totals, and the shards go.
INSERT INTO stats_summary AS s (queue, enqueued_total, last_activity_at)
SELECT queue, sum(n), max(at) FROM enqueue_counts GROUP BY queue ORDER BY queue
ON CONFLICT (queue) DO UPDATE SET enqueued_total = s.enqueued_total + excluded.enqueued_total,
    last_activity_at = greatest(s.last_activity_at, excluded.last_activity_at);
DROP TABLE enqueue_counts;

-- An enqueue asks whether any worker waits (idle_workers.seen_at within the last minute) on every
-- statement; marks come and go several times a second under load, and without this index the question
-- read every version of every mark since the oldest snapshot. Through it, only the last minute's.
CREATE INDEX ix_idle_workers_seen ON idle_workers (seen_at);
