-- Decision queues (spec part 1 "Decision queue and seed rule"; REFERENCE.md 5): named lanes
-- over attention items, which they point at by (sourceKind, sourceId).

CREATE TABLE decision_queues (
    id                    uuid PRIMARY KEY,
    company_id            uuid NOT NULL,
    key                   text NOT NULL,
    title                 text NOT NULL,
    description           text,
    retention_days        integer,
    seed_rules_enabled    boolean NOT NULL DEFAULT false,
    created_by_type       text NOT NULL,
    created_by_agent_id   uuid,
    created_by_user_id    text,
    created_by_run_id     text,
    created_at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (company_id, key)
);
CREATE INDEX decision_queues_company_updated_idx ON decision_queues (company_id, updated_at DESC, id);

CREATE TABLE decision_queue_items (
    queue_id    uuid NOT NULL REFERENCES decision_queues (id) ON DELETE CASCADE,
    source_kind text NOT NULL,
    source_id   text NOT NULL,
    added_by    text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (queue_id, source_kind, source_id)
);
