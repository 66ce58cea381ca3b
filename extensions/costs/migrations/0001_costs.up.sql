-- Costs and budgets (spec part 1 "Cost event", "Budget policy and incident", "Finance
-- event"; REFERENCE.md 2.12). Company, agent, issue, project, goal and run ids belong to
-- other owners (no foreign keys).

-- cost_events is the ledger of token spend. source says who recorded a row: 'api' (POST
-- cost-events) or 'run' (the agents engine, one row per heartbeat run). counts_run marks
-- the first row of a heartbeat run, so that rollups count distinct runs.
CREATE TABLE cost_events (
    id                   uuid PRIMARY KEY,
    company_id           uuid NOT NULL,
    agent_id             uuid NOT NULL,
    issue_id             uuid,
    project_id           uuid,
    goal_id              uuid,
    heartbeat_run_id     uuid,
    billing_code         text,
    provider             text NOT NULL,
    biller               text NOT NULL,
    billing_type         text NOT NULL DEFAULT 'unknown',
    cost_status          text NOT NULL DEFAULT 'reported',
    model                text NOT NULL,
    input_tokens         bigint NOT NULL DEFAULT 0,
    cached_input_tokens  bigint NOT NULL DEFAULT 0,
    output_tokens        bigint NOT NULL DEFAULT 0,
    cost_cents           bigint NOT NULL DEFAULT 0,
    occurred_at          timestamptz NOT NULL,
    source               text NOT NULL DEFAULT 'api',
    counts_run           boolean NOT NULL DEFAULT false,
    created_at           timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT cost_events_billing_type_check CHECK (billing_type IN
        ('metered_api', 'subscription_included', 'subscription_overage', 'credits', 'fixed', 'unknown')),
    CONSTRAINT cost_events_cost_status_check CHECK (cost_status IN ('reported', 'unpriced')),
    CONSTRAINT cost_events_source_check CHECK (source IN ('api', 'run')),
    CONSTRAINT cost_events_amounts_check CHECK (cost_cents >= 0 AND input_tokens >= 0
        AND cached_input_tokens >= 0 AND output_tokens >= 0)
);
-- Range reads touch events only at the ragged edges of a range (less than an hour each);
-- everything else comes from cost_rollups.
CREATE INDEX cost_events_company_time_idx ON cost_events (company_id, occurred_at);
CREATE UNIQUE INDEX cost_events_run_usage_key ON cost_events (heartbeat_run_id) WHERE source = 'run';
CREATE INDEX cost_events_run_idx ON cost_events (heartbeat_run_id) WHERE heartbeat_run_id IS NOT NULL;

-- cost_rollups holds the sums of cost_events per UTC hour (grain 'h'), UTC day ('d') and UTC
-- calendar month ('m'), per (agent, project, provider, biller, billing type, model). Every
-- insert into cost_events updates the three grains in the same statement. One partition
-- per grain keeps each grain's rows together, so a read of whole months or days touches
-- few pages whatever the size of the ledger.
CREATE TABLE cost_rollups (
    company_id           uuid NOT NULL,
    grain                char(1) NOT NULL,
    bucket               timestamptz NOT NULL,
    agent_id             uuid NOT NULL,
    project_id           uuid,
    provider             text NOT NULL,
    biller               text NOT NULL,
    billing_type         text NOT NULL,
    model                text NOT NULL,
    cost_cents           bigint NOT NULL DEFAULT 0,
    input_tokens         bigint NOT NULL DEFAULT 0,
    cached_input_tokens  bigint NOT NULL DEFAULT 0,
    output_tokens        bigint NOT NULL DEFAULT 0,
    event_count          bigint NOT NULL DEFAULT 0,
    run_count            bigint NOT NULL DEFAULT 0,
    CONSTRAINT cost_rollups_key UNIQUE NULLS NOT DISTINCT
        (company_id, grain, bucket, agent_id, project_id, provider, biller, billing_type, model)
) PARTITION BY LIST (grain);
CREATE TABLE cost_rollups_hourly PARTITION OF cost_rollups FOR VALUES IN ('h');
CREATE TABLE cost_rollups_daily PARTITION OF cost_rollups FOR VALUES IN ('d');
CREATE TABLE cost_rollups_monthly PARTITION OF cost_rollups FOR VALUES IN ('m');
CREATE INDEX cost_rollups_agent_idx ON cost_rollups (company_id, agent_id, grain, bucket);
CREATE INDEX cost_rollups_project_idx ON cost_rollups (company_id, project_id, grain, bucket) WHERE project_id IS NOT NULL;

-- finance_events are non-token accounting records (REFERENCE.md 2.12).
CREATE TABLE finance_events (
    id                      uuid PRIMARY KEY,
    company_id              uuid NOT NULL,
    agent_id                uuid,
    issue_id                uuid,
    project_id              uuid,
    goal_id                 uuid,
    heartbeat_run_id        uuid,
    cost_event_id           uuid,
    billing_code            text,
    description             text,
    event_kind              text NOT NULL,
    direction               text NOT NULL DEFAULT 'debit',
    biller                  text NOT NULL,
    provider                text,
    execution_adapter_type  text,
    pricing_tier            text,
    region                  text,
    model                   text,
    quantity                double precision,
    unit                    text,
    amount_cents            bigint NOT NULL,
    currency                text NOT NULL DEFAULT 'USD',
    estimated               boolean NOT NULL DEFAULT false,
    external_invoice_id     text,
    metadata_json           jsonb,
    occurred_at             timestamptz NOT NULL,
    created_at              timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT finance_events_direction_check CHECK (direction IN ('debit', 'credit')),
    CONSTRAINT finance_events_amount_check CHECK (amount_cents >= 0)
);
CREATE INDEX finance_events_company_time_idx ON finance_events (company_id, occurred_at DESC, created_at DESC);

-- budget_policies: one per (company, scope, metric, window kind).
CREATE TABLE budget_policies (
    id                 uuid PRIMARY KEY,
    company_id         uuid NOT NULL,
    scope_type         text NOT NULL,
    scope_id           uuid NOT NULL,
    metric             text NOT NULL DEFAULT 'billed_cents',
    window_kind        text NOT NULL,
    amount             bigint NOT NULL,
    warn_percent       integer NOT NULL DEFAULT 80,
    hard_stop_enabled  boolean NOT NULL DEFAULT true,
    notify_enabled     boolean NOT NULL DEFAULT true,
    is_active          boolean NOT NULL DEFAULT true,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT budget_policies_scope_check CHECK (scope_type IN ('company', 'agent', 'project')),
    CONSTRAINT budget_policies_metric_check CHECK (metric IN ('billed_cents')),
    CONSTRAINT budget_policies_window_check CHECK (window_kind IN ('calendar_month_utc', 'lifetime')),
    CONSTRAINT budget_policies_amount_check CHECK (amount >= 0),
    CONSTRAINT budget_policies_warn_check CHECK (warn_percent BETWEEN 1 AND 99),
    CONSTRAINT budget_policies_scope_key UNIQUE (company_id, scope_type, scope_id, metric, window_kind)
);

-- budget_incidents: a crossed threshold of a policy in one window. At most one incident per
-- (policy, window, threshold, limit), so concurrent cost events open it once; raising the
-- limit lets a later crossing of the new limit open a new one. window_start and window_end
-- are null for lifetime policies. scope_paused says this incident paused its scope.
CREATE TABLE budget_incidents (
    id                   uuid PRIMARY KEY,
    company_id           uuid NOT NULL,
    policy_id            uuid NOT NULL REFERENCES budget_policies (id) ON DELETE CASCADE,
    scope_type           text NOT NULL,
    scope_id             uuid NOT NULL,
    metric               text NOT NULL,
    window_kind          text NOT NULL,
    window_start         timestamptz,
    window_end           timestamptz,
    threshold_type       text NOT NULL,
    amount_limit         bigint NOT NULL,
    amount_observed      bigint NOT NULL,
    status               text NOT NULL DEFAULT 'open',
    approval_id          uuid,
    scope_paused         boolean NOT NULL DEFAULT false,
    resolution           text,
    decision_note        text,
    resolved_by_user_id  text,
    resolved_at          timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT budget_incidents_threshold_check CHECK (threshold_type IN ('soft', 'hard')),
    CONSTRAINT budget_incidents_status_check CHECK (status IN ('open', 'resolved', 'dismissed'))
);
CREATE UNIQUE INDEX budget_incidents_once_key ON budget_incidents (policy_id, window_start, threshold_type, amount_limit) NULLS NOT DISTINCT;
CREATE INDEX budget_incidents_company_idx ON budget_incidents (company_id, status, created_at DESC);
CREATE INDEX budget_incidents_scope_idx ON budget_incidents (company_id, scope_type, scope_id) WHERE threshold_type = 'hard';

-- costs_state keeps small markers of the maintenance job (the last month whose spend reset ran).
CREATE TABLE costs_state (
    key         text PRIMARY KEY,
    value       text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
