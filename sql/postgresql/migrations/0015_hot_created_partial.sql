-- 0015: ix_jobs_hot_created (the operator's listing, newest first, and plan freezes) becomes partial on a
-- predicate every row meets (created_at is NOT NULL), which the listings' filters (hot_where) state and
-- the worker's statements never do. Its second column is id: the worker's statements look rows up by id
-- through the primary key, but their generic plans are made again after every VACUUM of jobs_hot, and
-- behind a held snapshot the statistics say few rows in many pages. A walk of a whole index then looks
-- like one page, and the planner took this index, with id as a condition on its second column, as often
-- as the primary key: every claim, start and finish walked the whole index (docs/endurance.md "Plans").
-- The hot table is small in steady state; the rebuild takes it for that long.
DROP INDEX IF EXISTS ix_jobs_hot_created;
CREATE INDEX ix_jobs_hot_created ON jobs_hot (created_at, id) WHERE created_at IS NOT NULL;
