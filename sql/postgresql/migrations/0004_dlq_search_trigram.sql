-- 0004: trigram indexes behind `search` on the dead-letter queue (GET /dlq?search=, DLQ filters of bulk
-- calls and plans). The search is a substring match (ILIKE '%text%') over id, type, tags and error
-- details; without them every search reads the whole DLQ, twice per page (the count and the page).
-- pg_trgm ships with PostgreSQL's contrib package and is a trusted extension (a database owner may
-- create it). Where it is missing or may not be created, the migration still succeeds and search scans
-- as before (bounded by the statement timeout); `chokaq migrate` run again later adds nothing, so install
-- it by hand then: CREATE EXTENSION pg_trgm, and the CREATE INDEX statements below.
-- The indexes are on lower(column), and search compares lower(column) LIKE lower(pattern): an index on
-- the bare column also answers `=`, and the planner took it for joins on id (a plan's 2,500 items joined
-- through the trigram index: 30 s instead of 5 ms, estimated cheaper on fresh statistics).
-- Only the DLQ gets them: it is where operators search error text, and it is written rarely. The hot table
-- takes every enqueue and claim, where four GIN indexes would cost more than its (small) scans.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm')
       AND EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
        BEGIN
            CREATE EXTENSION pg_trgm;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE NOTICE 'pg_trgm could not be created here; DLQ search stays a scan';
        END;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        CREATE INDEX IF NOT EXISTS ix_jobs_dlq_search_id ON jobs_dlq USING gin (lower(id) gin_trgm_ops);
        CREATE INDEX IF NOT EXISTS ix_jobs_dlq_search_type ON jobs_dlq USING gin (lower(type) gin_trgm_ops);
        CREATE INDEX IF NOT EXISTS ix_jobs_dlq_search_tags ON jobs_dlq USING gin (lower(tags) gin_trgm_ops);
        CREATE INDEX IF NOT EXISTS ix_jobs_dlq_search_error ON jobs_dlq USING gin (lower(error_details) gin_trgm_ops);
    END IF;
END
$$;
