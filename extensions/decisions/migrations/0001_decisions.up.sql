-- Decisions (spec part 1 "Decision", "Decision status"; REFERENCE.md 5): agent-proposed
-- questions with signed options, their bundles and the execution row of every effect run.
-- Company, agent, run and issue ids live with their owners (no foreign keys).

CREATE TABLE decision_bundles (
    id              uuid PRIMARY KEY,
    company_id      uuid NOT NULL,
    origin_agent_id uuid NOT NULL,
    title           text NOT NULL,
    summary         text,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE decisions (
    id                     uuid PRIMARY KEY,
    company_id             uuid NOT NULL,
    bundle_id              uuid REFERENCES decision_bundles (id) ON DELETE CASCADE,
    origin_agent_id        uuid NOT NULL,
    origin_issue_id        uuid NOT NULL,
    origin_run_id          uuid NOT NULL,
    rule_key               text,
    title                  text NOT NULL,
    body                   text NOT NULL,
    options                jsonb NOT NULL,
    inputs                 jsonb,
    status                 text NOT NULL DEFAULT 'open',
    execution_status       text,
    chosen_option_id       text,
    input_values           jsonb,
    dismissed              boolean NOT NULL DEFAULT false,
    decided_by_user_id     text,
    decided_at             timestamptz,
    decide_idempotency_key text,
    resolved_at            timestamptz,
    expires_at             timestamptz NOT NULL,
    idempotency_key        text,
    payload_hash           text NOT NULL,
    signed_spec            text NOT NULL,
    target_snapshots       jsonb NOT NULL,
    continuation_policy    text NOT NULL DEFAULT 'none',
    metadata               jsonb NOT NULL DEFAULT '{}',
    created_at             timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at             timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT decisions_status_check CHECK (status IN ('open', 'decided', 'expired', 'cancelled')),
    CONSTRAINT decisions_execution_status_check CHECK (execution_status IN ('running', 'succeeded', 'partial', 'failed')),
    CONSTRAINT decisions_continuation_policy_check CHECK (continuation_policy IN ('none', 'wake_origin_agent'))
);
CREATE UNIQUE INDEX decisions_company_idempotency_key ON decisions (company_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX decisions_company_created_idx ON decisions (company_id, created_at DESC, id);
CREATE INDEX decisions_open_expiry_idx ON decisions (expires_at) WHERE status = 'open';
CREATE INDEX decisions_origin_agent_open_idx ON decisions (origin_agent_id) WHERE status = 'open';

CREATE TABLE decision_effect_executions (
    decision_id     uuid NOT NULL REFERENCES decisions (id) ON DELETE CASCADE,
    effect_index    integer NOT NULL,
    effect_type     text NOT NULL,
    target_issue_id uuid,
    status          text NOT NULL,
    result          jsonb,
    error           text,
    activity_log_id text,
    executed_at     timestamptz,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (decision_id, effect_index),
    CONSTRAINT decision_effect_executions_status_check CHECK (status IN ('claimed', 'executed', 'failed', 'skipped'))
);
