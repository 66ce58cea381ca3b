-- Timestamped webhook signatures seen within their trigger's replay window: a captured
-- delivery replayed inside the window is refused unless it is the same request retried with
-- the same idempotency key (which then returns the run it fired).
CREATE TABLE webhook_deliveries (
    trigger_id      uuid NOT NULL,
    digest          text NOT NULL,
    idempotency_key text NOT NULL,
    expires_at      timestamptz NOT NULL,
    PRIMARY KEY (trigger_id, digest)
);
CREATE INDEX webhook_deliveries_expires_at ON webhook_deliveries (expires_at);
