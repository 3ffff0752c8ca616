-- 0005: failure history. One row per failed attempt (retried or dead-lettered, zombies and cancels
-- included), written in the transaction of the failure, so a job's failures survive its resurrect and
-- success. Pruned by Retention.FailureHistory. jobs_archive.failure_count: failures before the success.
CREATE TABLE job_failures (
    seq             bigint       GENERATED ALWAYS AS IDENTITY,
    job_id          varchar(50)  NOT NULL,
    queue           varchar(255) NOT NULL,
    type            varchar(255) NOT NULL,
    attempt         integer      NOT NULL,
    outcome         varchar(5)   NOT NULL CHECK (outcome IN ('retry', 'dead')),
    failure_reason  smallint     NOT NULL,
    fingerprint     varchar(32),
    error_line      varchar(500),
    error_details   text,
    worker_id       varchar(100),
    failed_at       timestamptz  NOT NULL DEFAULT now(),
    CONSTRAINT pk_job_failures PRIMARY KEY (seq)
);
CREATE INDEX ix_job_failures_job ON job_failures (job_id, seq);
CREATE INDEX ix_job_failures_failed ON job_failures (failed_at, seq);
ALTER TABLE jobs_archive ADD COLUMN failure_count integer NOT NULL DEFAULT 0;
-- A plan's label (the CLI's --label): a re-run with the same label resumes the unfinished plan.
ALTER TABLE plans ADD COLUMN label varchar(200);
CREATE INDEX ix_plans_label ON plans (label, action, created_at) WHERE label IS NOT NULL;
-- What workers declared per job type when they started (@job(idempotent=True)), so operators and
-- scripts can select safe retries (--idempotent-only) without importing handler code.
CREATE TABLE job_types (
    type        varchar(255) NOT NULL PRIMARY KEY,
    idempotent  boolean NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
