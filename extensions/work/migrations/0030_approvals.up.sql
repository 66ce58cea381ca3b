-- Approvals (REFERENCE 2.5): board decisions requested by agents or other extensions
-- (hire_agent, approve_ceo_strategy, budget_override_required, request_board_approval),
-- their comment threads and their links to issues.

CREATE TABLE approvals (
    id                     uuid PRIMARY KEY,
    company_id             uuid NOT NULL,
    type                   text NOT NULL,
    requested_by_agent_id  uuid,
    requested_by_user_id   text,
    status                 text NOT NULL DEFAULT 'pending',
    payload                jsonb NOT NULL DEFAULT '{}'::jsonb,
    decision_note          text,
    decided_by_user_id     text,
    decided_at             timestamptz,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT approvals_type_check CHECK (type IN ('hire_agent', 'approve_ceo_strategy', 'budget_override_required', 'request_board_approval')),
    CONSTRAINT approvals_status_check CHECK (status IN ('pending', 'revision_requested', 'approved', 'rejected', 'cancelled'))
);
CREATE INDEX approvals_company_idx ON approvals (company_id, created_at DESC, id DESC);
CREATE INDEX approvals_company_status_idx ON approvals (company_id, status, created_at DESC);
CREATE INDEX approvals_requested_by_agent_idx ON approvals (requested_by_agent_id) WHERE requested_by_agent_id IS NOT NULL;

CREATE TABLE approval_comments (
    id               uuid PRIMARY KEY,
    company_id       uuid NOT NULL,
    approval_id      uuid NOT NULL REFERENCES approvals (id) ON DELETE CASCADE,
    author_agent_id  uuid,
    author_user_id   text,
    body             text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX approval_comments_approval_idx ON approval_comments (approval_id, created_at, id);

CREATE TABLE issue_approvals (
    issue_id            uuid NOT NULL REFERENCES issues (id) ON DELETE CASCADE,
    approval_id         uuid NOT NULL REFERENCES approvals (id) ON DELETE CASCADE,
    company_id          uuid NOT NULL,
    linked_by_agent_id  uuid,
    linked_by_user_id   text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (issue_id, approval_id)
);
CREATE INDEX issue_approvals_approval_idx ON issue_approvals (approval_id);
