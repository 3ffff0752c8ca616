-- 0004: failure history. One row per failed attempt (retried or dead-lettered, zombies and cancels
-- included), written in the transaction of the failure, so a job's failures survive its resurrect and
-- success. Pruned by Retention.FailureHistory. jobs_archive.failure_count: failures before the success.
CREATE TABLE job_failures (
    seq             INTEGER NOT NULL PRIMARY KEY,
    job_id          TEXT    NOT NULL,
    queue           TEXT    NOT NULL,
    type            TEXT    NOT NULL,
    attempt         INTEGER NOT NULL,
    outcome         TEXT    NOT NULL CHECK (outcome IN ('retry', 'dead')),
    failure_reason  INTEGER NOT NULL,
    fingerprint     TEXT,
    error_line      TEXT,
    error_details   TEXT,
    worker_id       TEXT,
    failed_at       TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);
CREATE INDEX ix_job_failures_job ON job_failures (job_id, seq);
CREATE INDEX ix_job_failures_failed ON job_failures (failed_at, seq);
ALTER TABLE jobs_archive ADD COLUMN failure_count INTEGER NOT NULL DEFAULT 0;
-- A plan's label (the CLI's --label): a re-run with the same label resumes the unfinished plan.
ALTER TABLE plans ADD COLUMN label TEXT;
CREATE INDEX ix_plans_label ON plans (label, action, created_at) WHERE label IS NOT NULL;
-- What workers declared per job type when they started (@job(idempotent=True)), so operators and
-- scripts can select safe retries (--idempotent-only) without importing handler code.
CREATE TABLE job_types (
    type        TEXT NOT NULL PRIMARY KEY,
    idempotent  INTEGER NOT NULL,
    updated_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);
