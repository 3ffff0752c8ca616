-- 0007: the W3C trace context of the producer (docs/tracing.md), stored with the job at enqueue and
-- carried with it through every table it lives in (hot -> archive or DLQ -> hot again on resurrect), so
-- a worker's consumer span links to the producer's span, even for a job resurrected days later. JSON
-- text {"traceparent": ..., "tracestate": ...}; null when the producer had no trace (or no OpenTelemetry).
ALTER TABLE jobs_hot ADD COLUMN trace_context TEXT;
ALTER TABLE jobs_archive ADD COLUMN trace_context TEXT;
ALTER TABLE jobs_dlq ADD COLUMN trace_context TEXT;
