-- 0004 (SQLite has no 0004 of its own): the index behind an idle worker's timer to the next delayed job (query next_due). Only scheduled
-- jobs (a delay, a time, a retry) have scheduled_at, and only pending ones can become due, so the jobs
-- enqueued to run at once never pay for it.
CREATE INDEX ix_jobs_hot_due ON jobs_hot (due_at) WHERE status = 0 AND scheduled_at IS NOT NULL;
