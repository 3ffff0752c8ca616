-- 0010: the rest of what a held snapshot slowed down (docs/endurance.md).

-- Hot jobs per queue and status are counted by the same deltas as the totals (count_deltas): reading
-- them from jobs_hot walked the dead versions of every job finished since the oldest snapshot.
ALTER TABLE queue_counts ADD COLUMN pending bigint NOT NULL DEFAULT 0;
ALTER TABLE queue_counts ADD COLUMN fetched bigint NOT NULL DEFAULT 0;
ALTER TABLE queue_counts ADD COLUMN processing bigint NOT NULL DEFAULT 0;
ALTER TABLE stats_summary ADD COLUMN pending bigint NOT NULL DEFAULT 0;
ALTER TABLE stats_summary ADD COLUMN fetched bigint NOT NULL DEFAULT 0;
ALTER TABLE stats_summary ADD COLUMN processing bigint NOT NULL DEFAULT 0;
-- Counted once here, from the rows there are (the migration holds its lock: no job moves meanwhile).
INSERT INTO stats_summary AS s (queue, pending, fetched, processing)
SELECT queue, count(*) FILTER (WHERE status = 0), count(*) FILTER (WHERE status = 1),
       count(*) FILTER (WHERE status = 2)
FROM jobs_hot GROUP BY queue ORDER BY queue
ON CONFLICT (queue) DO UPDATE SET pending = excluded.pending, fetched = excluded.fetched,
    processing = excluded.processing;

-- Where each phase of the rescue sweep starts its next index scan (engine/rescue.py): the entries
-- before it are jobs that left long ago, dead but kept while a snapshot is held.
CREATE TABLE sweep_marks (
    phase  varchar(30)  NOT NULL,
    at     timestamptz  NOT NULL,
    CONSTRAINT pk_sweep_marks PRIMARY KEY (phase)
);

-- Tables whose rows churn are vacuumed as soon as a few thousand versions are dead, without the cost
-- delay: after a holder ends they shrink back within minutes instead of when a fraction of them is dead.
ALTER TABLE jobs_hot SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 10000,
    autovacuum_vacuum_cost_delay = 0);
ALTER TABLE queue_counts SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_cost_delay = 0);
ALTER TABLE metric_buckets SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_cost_delay = 0);
ALTER TABLE stats_summary SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 200,
    autovacuum_vacuum_cost_delay = 0);
ALTER TABLE idle_workers SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 200,
    autovacuum_vacuum_cost_delay = 0);
ALTER TABLE workers SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 200,
    autovacuum_vacuum_cost_delay = 0);
ALTER TABLE leases SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 100,
    autovacuum_vacuum_cost_delay = 0);
ALTER TABLE sweep_marks SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 100,
    autovacuum_vacuum_cost_delay = 0);
