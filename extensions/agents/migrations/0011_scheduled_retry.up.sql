-- Retries wait in status scheduled_retry until scheduled_retry_at, then join the queue.
ALTER TABLE heartbeat_runs
    ADD COLUMN scheduled_retry_at      timestamptz,
    ADD COLUMN scheduled_retry_attempt integer NOT NULL DEFAULT 0,
    ADD COLUMN scheduled_retry_reason  text;
CREATE INDEX heartbeat_runs_scheduled_retry_idx ON heartbeat_runs (scheduled_retry_at) WHERE status = 'scheduled_retry';
