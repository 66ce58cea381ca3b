-- What work on an issue produced: pull requests, branches, previews, artifacts.

CREATE TABLE issue_work_products (
    id                      uuid PRIMARY KEY,
    company_id              uuid NOT NULL,
    issue_id                uuid NOT NULL REFERENCES issues (id) ON DELETE CASCADE,
    type                    text NOT NULL,
    provider                text NOT NULL,
    external_id             text,
    title                   text NOT NULL,
    url                     text,
    status                  text NOT NULL DEFAULT 'active',
    review_state            text NOT NULL DEFAULT 'none',
    is_primary              boolean NOT NULL DEFAULT false,
    health_status           text NOT NULL DEFAULT 'unknown',
    summary                 text,
    metadata                jsonb,
    created_by_run_id       text,
    project_id              uuid REFERENCES projects (id) ON DELETE SET NULL,
    execution_workspace_id  text,
    runtime_service_id      text,
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX issue_work_products_issue_idx ON issue_work_products (issue_id, created_at);
CREATE INDEX issue_work_products_company_idx ON issue_work_products (company_id, updated_at DESC);
