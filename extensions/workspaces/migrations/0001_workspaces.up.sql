-- Execution workspaces (spec part 2 "Instance-admin routes"; REFERENCE.md 3 step 4): the
-- working directory each issue run gets (the project's workspace, shared, or a git
-- worktree of it on the issue's own branch), the operations that made, provisioned and
-- removed them, and the runtime services and commands started in them. Company, project,
-- project workspace, issue, agent and run ids live with their owners (no foreign keys).

CREATE TABLE execution_workspaces (
    id                    uuid PRIMARY KEY,
    company_id            uuid NOT NULL,
    project_id            uuid NOT NULL,
    project_workspace_id  uuid NOT NULL,
    source_issue_id       uuid,
    -- mode is shared_workspace (the project workspace itself) or isolated_workspace (a
    -- git worktree of it for one issue).
    mode                  text NOT NULL,
    strategy_type         text NOT NULL,
    provider_type         text NOT NULL,
    name                  text NOT NULL,
    status                text NOT NULL DEFAULT 'active',
    cwd                   text NOT NULL,
    repo_root             text,
    repo_url              text,
    base_ref              text,
    branch_name           text,
    worktree_path         text,
    -- created_by_runtime says keel made the worktree (and may remove it on close).
    created_by_runtime    boolean NOT NULL DEFAULT false,
    config                jsonb NOT NULL DEFAULT '{}',
    metadata              jsonb NOT NULL DEFAULT '{}',
    last_used_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    opened_at             timestamptz NOT NULL DEFAULT clock_timestamp(),
    closed_at             timestamptz,
    cleanup_reason        text,
    created_at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at            timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX execution_workspaces_company ON execution_workspaces (company_id, updated_at DESC);
-- One open isolated workspace per issue and one open shared workspace per project workspace.
CREATE UNIQUE INDEX execution_workspaces_issue_open ON execution_workspaces (source_issue_id)
    WHERE mode = 'isolated_workspace' AND status <> 'archived';
CREATE UNIQUE INDEX execution_workspaces_shared_open ON execution_workspaces (project_workspace_id)
    WHERE mode = 'shared_workspace' AND status <> 'archived';

CREATE TABLE workspace_operations (
    id                     uuid PRIMARY KEY,
    company_id             uuid NOT NULL,
    execution_workspace_id uuid NOT NULL REFERENCES execution_workspaces (id) ON DELETE CASCADE,
    heartbeat_run_id       uuid,
    -- phase: worktree_prepare, workspace_provision, runtime_command, runtime_service_start,
    -- runtime_service_stop, workspace_teardown, worktree_cleanup.
    phase                  text NOT NULL,
    command                text,
    cwd                    text,
    status                 text NOT NULL DEFAULT 'running',
    exit_code              integer,
    stdout_excerpt         text,
    stderr_excerpt         text,
    metadata               jsonb NOT NULL DEFAULT '{}',
    started_at             timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at            timestamptz,
    created_at             timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at             timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX workspace_operations_workspace ON workspace_operations (execution_workspace_id, started_at DESC);

CREATE TABLE runtime_services (
    id                     uuid PRIMARY KEY,
    company_id             uuid NOT NULL,
    execution_workspace_id uuid NOT NULL REFERENCES execution_workspaces (id) ON DELETE CASCADE,
    service_name           text NOT NULL,
    -- kind is service (long-running) or command (a job run to completion).
    kind                   text NOT NULL DEFAULT 'service',
    status                 text NOT NULL,
    command                text NOT NULL,
    cwd                    text NOT NULL,
    port                   integer,
    url                    text,
    pid                    integer,
    -- host is the node whose workspaces extension holds the process.
    host                   text NOT NULL,
    exit_code              integer,
    started_at             timestamptz NOT NULL DEFAULT clock_timestamp(),
    stopped_at             timestamptz,
    created_at             timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at             timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX runtime_services_workspace ON runtime_services (execution_workspace_id, started_at DESC);
