-- Routines (spec part 1 "Routine", "Routine trigger", "Routine run"; REFERENCE.md 5): the
-- routines, their schedule, webhook and api triggers, and the runs they fired. Company,
-- agent, project, goal, issue and secret ids live with their owners (no foreign keys).

CREATE TABLE routines (
    id                   uuid PRIMARY KEY,
    company_id           uuid NOT NULL,
    project_id           uuid,
    goal_id              uuid,
    parent_issue_id      uuid,
    title                text NOT NULL,
    description          text,
    assignee_agent_id    uuid,
    priority             text NOT NULL DEFAULT 'medium',
    status               text NOT NULL,
    concurrency_policy   text NOT NULL DEFAULT 'coalesce_if_active',
    catch_up_policy      text NOT NULL DEFAULT 'skip_missed',
    activity_gate_policy text NOT NULL DEFAULT 'always',
    activity_gate_scope  text NOT NULL DEFAULT 'company',
    variables            jsonb NOT NULL DEFAULT '[]',
    origin_kind          text NOT NULL DEFAULT 'manual',
    origin_id            text,
    created_by_agent_id  uuid,
    created_by_user_id   text,
    responsible_user_id  text,
    updated_by_agent_id  uuid,
    updated_by_user_id   text,
    last_triggered_at    timestamptz,
    last_enqueued_at     timestamptz,
    created_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT routines_priority_check CHECK (priority IN ('critical', 'high', 'medium', 'low')),
    CONSTRAINT routines_status_check CHECK (status IN ('active', 'paused', 'archived')),
    CONSTRAINT routines_concurrency_policy_check CHECK (concurrency_policy IN ('coalesce_if_active', 'always_enqueue', 'skip_if_active')),
    CONSTRAINT routines_catch_up_policy_check CHECK (catch_up_policy IN ('skip_missed', 'enqueue_missed_with_cap')),
    CONSTRAINT routines_activity_gate_policy_check CHECK (activity_gate_policy IN ('always', 'require_external_activity')),
    CONSTRAINT routines_activity_gate_scope_check CHECK (activity_gate_scope IN ('company', 'project')),
    CONSTRAINT routines_active_needs_assignee CHECK (status <> 'active' OR assignee_agent_id IS NOT NULL)
);
CREATE INDEX routines_company_updated_idx ON routines (company_id, updated_at DESC, id);

CREATE TABLE routine_triggers (
    id                  uuid PRIMARY KEY,
    company_id          uuid NOT NULL,
    routine_id          uuid NOT NULL REFERENCES routines (id) ON DELETE CASCADE,
    kind                text NOT NULL,
    label               text,
    enabled             boolean NOT NULL DEFAULT true,
    cron_expression     text,
    timezone            text,
    next_run_at         timestamptz,
    last_fired_at       timestamptz,
    public_id           text UNIQUE,
    secret_id           uuid,
    secret_version      integer,
    signing_mode        text,
    replay_window_sec   integer,
    last_rotated_at     timestamptz,
    last_result         text,
    created_by_agent_id uuid,
    created_by_user_id  text,
    updated_by_agent_id uuid,
    updated_by_user_id  text,
    created_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT routine_triggers_kind_check CHECK (kind IN ('schedule', 'webhook', 'api')),
    CONSTRAINT routine_triggers_signing_mode_check CHECK (signing_mode IS NULL OR signing_mode IN ('bearer', 'hmac_sha256', 'forge_hmac', 'none')),
    CONSTRAINT routine_triggers_replay_window_check CHECK (replay_window_sec IS NULL OR replay_window_sec BETWEEN 30 AND 86400),
    CONSTRAINT routine_triggers_schedule_check CHECK (kind <> 'schedule' OR (cron_expression IS NOT NULL AND timezone IS NOT NULL)),
    CONSTRAINT routine_triggers_webhook_check CHECK (kind <> 'webhook' OR (public_id IS NOT NULL AND signing_mode IS NOT NULL))
);
CREATE INDEX routine_triggers_routine_idx ON routine_triggers (routine_id, created_at, id);
CREATE INDEX routine_triggers_due_idx ON routine_triggers (next_run_at) WHERE kind = 'schedule' AND enabled;

CREATE TABLE routine_runs (
    id                    uuid PRIMARY KEY,
    company_id            uuid NOT NULL,
    routine_id            uuid NOT NULL REFERENCES routines (id) ON DELETE CASCADE,
    trigger_id            uuid REFERENCES routine_triggers (id) ON DELETE SET NULL,
    source                text NOT NULL,
    status                text NOT NULL DEFAULT 'received',
    -- triggered_at is the wall-clock instant the run was recorded (database clock, like the
    -- activity log); scheduled_for is the schedule tick a scheduled run stands for.
    triggered_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    scheduled_for         timestamptz,
    idempotency_key       text,
    -- idempotency_scope is "<source>:<triggerId>" at insert: keys deduplicate per source and
    -- trigger, and stay unique after the trigger is deleted.
    idempotency_scope     text,
    trigger_payload       jsonb,
    -- dispatch holds what the execution issue is created from (rendered title and
    -- description, assignee, project), so a run left "received" can be completed later.
    dispatch              jsonb,
    linked_issue_id       uuid,
    coalesced_into_run_id uuid,
    failure_reason        text,
    completed_at          timestamptz,
    created_by_agent_id   uuid,
    created_by_user_id    text,
    created_at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT routine_runs_source_check CHECK (source IN ('schedule', 'manual', 'api', 'webhook')),
    CONSTRAINT routine_runs_status_check CHECK (status IN ('received', 'coalesced', 'skipped', 'issue_created', 'completed', 'failed')),
    -- Two hosts ticking the same schedule at once record each tick once.
    CONSTRAINT routine_runs_trigger_tick_key UNIQUE (trigger_id, scheduled_for)
);
CREATE INDEX routine_runs_routine_idx ON routine_runs (routine_id, created_at DESC, id DESC);
CREATE INDEX routine_runs_dispatched_idx ON routine_runs (routine_id, triggered_at DESC) WHERE status NOT IN ('skipped', 'coalesced');
CREATE INDEX routine_runs_linked_issue_idx ON routine_runs (linked_issue_id) WHERE linked_issue_id IS NOT NULL;
CREATE INDEX routine_runs_received_idx ON routine_runs (updated_at) WHERE status = 'received';
CREATE UNIQUE INDEX routine_runs_idempotency_key ON routine_runs (routine_id, idempotency_scope, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
