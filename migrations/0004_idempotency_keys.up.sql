-- Idempotency-Keys of the kernel's own create routes (see sdk/idem): the answer of a POST
-- remembered per actor and key for 24 hours.
CREATE TABLE kernel.idempotency_keys (
    principal     text NOT NULL,
    key           text NOT NULL,
    fingerprint   text NOT NULL,
    status        integer NOT NULL,
    location      text,
    content_type  text,
    body          bytea,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (principal, key)
);
CREATE INDEX idempotency_keys_created_at_idx ON kernel.idempotency_keys (created_at);
