-- The core of the work graph: goals, projects and their workspaces, issues, labels and
-- blocker relations. Later migrations add comments, documents, work products,
-- attachments, read marks and approvals. Company ids are kernel-owned (no foreign key).

CREATE TABLE goals (
    id              uuid PRIMARY KEY,
    company_id      uuid NOT NULL,
    title           text NOT NULL,
    description     text,
    level           text NOT NULL DEFAULT 'task',
    status          text NOT NULL DEFAULT 'planned',
    parent_id       uuid REFERENCES goals (id) ON DELETE SET NULL,
    owner_agent_id  uuid,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX goals_company_idx ON goals (company_id, created_at DESC);

CREATE TABLE projects (
    id                          uuid PRIMARY KEY,
    company_id                  uuid NOT NULL,
    goal_id                     uuid REFERENCES goals (id) ON DELETE SET NULL,
    name                        text NOT NULL,
    description                 text,
    status                      text NOT NULL DEFAULT 'backlog',
    lead_agent_id               uuid,
    target_date                 date,
    color                       text,
    icon                        text,
    env                         jsonb NOT NULL DEFAULT '{}'::jsonb,
    pause_reason                text,
    paused_at                   timestamptz,
    execution_workspace_policy  jsonb,
    archived_at                 timestamptz,
    created_at                  timestamptz NOT NULL DEFAULT now(),
    updated_at                  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX projects_company_idx ON projects (company_id, created_at DESC);

CREATE TABLE project_goals (
    project_id  uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    goal_id     uuid NOT NULL REFERENCES goals (id) ON DELETE CASCADE,
    company_id  uuid NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project_id, goal_id)
);

CREATE TABLE project_workspaces (
    id                    uuid PRIMARY KEY,
    company_id            uuid NOT NULL,
    project_id            uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name                  text NOT NULL,
    source_type           text NOT NULL DEFAULT 'local_path',
    cwd                   text,
    repo_url              text,
    repo_ref              text,
    default_ref           text,
    visibility            text NOT NULL DEFAULT 'default',
    setup_command         text,
    cleanup_command       text,
    remote_provider       text,
    remote_workspace_ref  text,
    shared_workspace_key  text,
    metadata              jsonb NOT NULL DEFAULT '{}'::jsonb,
    is_primary            boolean NOT NULL DEFAULT false,
    runtime_config        jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX project_workspaces_project_idx ON project_workspaces (project_id);

CREATE TABLE issues (
    id                        uuid PRIMARY KEY,
    company_id                uuid NOT NULL,
    project_id                uuid REFERENCES projects (id) ON DELETE SET NULL,
    project_workspace_id      uuid REFERENCES project_workspaces (id) ON DELETE SET NULL,
    goal_id                   uuid REFERENCES goals (id) ON DELETE SET NULL,
    parent_id                 uuid REFERENCES issues (id) ON DELETE SET NULL,
    title                     text NOT NULL,
    description               text,
    status                    text NOT NULL DEFAULT 'backlog',
    work_mode                 text NOT NULL DEFAULT 'standard',
    priority                  text NOT NULL DEFAULT 'medium',
    review_policy             text,
    assignee_agent_id         uuid,
    assignee_user_id          text,
    checkout_run_id           text,
    execution_run_id          text,
    execution_agent_name_key  text,
    execution_locked_at       timestamptz,
    created_by_agent_id       uuid,
    created_by_user_id        text,
    responsible_user_id       text,
    issue_number              bigint NOT NULL,
    identifier                text NOT NULL,
    origin_kind               text NOT NULL DEFAULT 'manual',
    origin_id                 text,
    origin_run_id             text,
    origin_fingerprint        text,
    request_depth             integer NOT NULL DEFAULT 0,
    billing_code              text,
    unblock_descriptor        jsonb,
    idempotency_key           text,
    started_at                timestamptz,
    completed_at              timestamptz,
    cancelled_at              timestamptz,
    hidden_at                 timestamptz,
    created_at                timestamptz NOT NULL DEFAULT now(),
    updated_at                timestamptz NOT NULL DEFAULT now(),
    search_vector             tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('simple', coalesce(identifier, '') || ' ' || coalesce(title, '')), 'A') ||
        setweight(to_tsvector('simple', coalesce(description, '')), 'B')
    ) STORED,
    UNIQUE (company_id, issue_number)
);
CREATE UNIQUE INDEX issues_identifier_key ON issues (upper(identifier));
CREATE UNIQUE INDEX issues_idempotency_key ON issues (company_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX issues_company_updated_idx ON issues (company_id, updated_at DESC, id DESC);
CREATE INDEX issues_company_status_idx ON issues (company_id, status, updated_at DESC);
CREATE INDEX issues_company_assignee_idx ON issues (company_id, assignee_agent_id, status);
CREATE INDEX issues_company_project_idx ON issues (company_id, project_id, updated_at DESC);
CREATE INDEX issues_parent_idx ON issues (parent_id);
CREATE INDEX issues_origin_idx ON issues (company_id, origin_kind, origin_id);
CREATE INDEX issues_search_idx ON issues USING gin (search_vector);

CREATE TABLE labels (
    id          uuid PRIMARY KEY,
    company_id  uuid NOT NULL,
    name        text NOT NULL,
    color       text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX labels_company_name_key ON labels (company_id, lower(name));

CREATE TABLE issue_labels (
    issue_id    uuid NOT NULL REFERENCES issues (id) ON DELETE CASCADE,
    label_id    uuid NOT NULL REFERENCES labels (id) ON DELETE CASCADE,
    company_id  uuid NOT NULL,
    PRIMARY KEY (issue_id, label_id)
);
CREATE INDEX issue_labels_label_idx ON issue_labels (label_id);

-- A "blocks" edge: issue_id blocks related_issue_id.
CREATE TABLE issue_relations (
    id                   uuid PRIMARY KEY,
    company_id           uuid NOT NULL,
    issue_id             uuid NOT NULL REFERENCES issues (id) ON DELETE CASCADE,
    related_issue_id     uuid NOT NULL REFERENCES issues (id) ON DELETE CASCADE,
    type                 text NOT NULL DEFAULT 'blocks',
    created_by_agent_id  uuid,
    created_by_user_id   text,
    created_at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (issue_id, related_issue_id, type)
);
CREATE INDEX issue_relations_related_idx ON issue_relations (related_issue_id, type);
