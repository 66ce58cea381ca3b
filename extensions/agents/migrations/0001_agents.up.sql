-- Agent configuration: everything about an agent except its identity, which the kernel
-- owns (id, company, name, url key, role, status). One row per kernel agent id.
CREATE TABLE agent_configs (
    agent_id              uuid PRIMARY KEY,
    company_id            uuid NOT NULL,
    title                 text,
    icon                  text,
    reports_to            uuid,
    capabilities          text,
    adapter_type          text NOT NULL DEFAULT 'process',
    adapter_config        jsonb NOT NULL DEFAULT '{}'::jsonb,
    runtime_config        jsonb NOT NULL DEFAULT '{}'::jsonb,
    budget_monthly_cents  bigint NOT NULL DEFAULT 0,
    spent_monthly_cents   bigint NOT NULL DEFAULT 0,
    permissions           jsonb NOT NULL DEFAULT '{}'::jsonb,
    desired_skills        jsonb NOT NULL DEFAULT '[]'::jsonb,
    metadata              jsonb NOT NULL DEFAULT '{}'::jsonb,
    default_environment_id uuid,
    pause_reason          text,
    paused_at             timestamptz,
    error_reason          text,
    last_heartbeat_at     timestamptz,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agent_configs_company_idx ON agent_configs (company_id);
CREATE INDEX agent_configs_reports_to_idx ON agent_configs (reports_to);
