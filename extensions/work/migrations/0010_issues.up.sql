-- Issues area: per-principal read and inbox-archive marks, and the indexes the issue list
-- filters and sorts need (GET /api/companies/{companyId}/issues). A principal is a board
-- user (principal_type 'user', the user id) or an agent ('agent', the agent id).

CREATE TABLE issue_read_marks (
    issue_id        uuid NOT NULL REFERENCES issues (id) ON DELETE CASCADE,
    company_id      uuid NOT NULL,
    principal_type  text NOT NULL CHECK (principal_type IN ('user', 'agent')),
    principal_id    text NOT NULL,
    read_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (issue_id, principal_type, principal_id)
);
CREATE INDEX issue_read_marks_principal_idx ON issue_read_marks (company_id, principal_type, principal_id);

CREATE TABLE issue_inbox_archives (
    issue_id        uuid NOT NULL REFERENCES issues (id) ON DELETE CASCADE,
    company_id      uuid NOT NULL,
    principal_type  text NOT NULL CHECK (principal_type IN ('user', 'agent')),
    principal_id    text NOT NULL,
    archived_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (issue_id, principal_type, principal_id)
);
CREATE INDEX issue_inbox_archives_principal_idx ON issue_inbox_archives (company_id, principal_type, principal_id);

-- Sorts other than the default (company_id, updated_at DESC, id DESC).
CREATE INDEX issues_company_created_idx ON issues (company_id, created_at DESC, id DESC);
CREATE INDEX issues_company_priority_idx ON issues (company_id,
    (CASE priority WHEN 'critical' THEN 4 WHEN 'high' THEN 3 WHEN 'medium' THEN 2 ELSE 1 END) DESC,
    updated_at DESC, id DESC);
CREATE INDEX issues_company_status_rank_idx ON issues (company_id,
    (CASE status WHEN 'backlog' THEN 1 WHEN 'todo' THEN 2 WHEN 'in_progress' THEN 3 WHEN 'in_review' THEN 4
        WHEN 'blocked' THEN 5 WHEN 'done' THEN 6 ELSE 7 END) DESC,
    updated_at DESC, id DESC);

-- Filters without an index in 0001.
CREATE INDEX issues_company_assignee_user_idx ON issues (company_id, assignee_user_id, updated_at DESC)
    WHERE assignee_user_id IS NOT NULL;
CREATE INDEX issues_company_goal_idx ON issues (company_id, goal_id, updated_at DESC) WHERE goal_id IS NOT NULL;
CREATE INDEX issues_company_parent_idx ON issues (company_id, parent_id, updated_at DESC);
CREATE INDEX issues_company_origin_id_idx ON issues (company_id, origin_id) WHERE origin_id IS NOT NULL;
CREATE INDEX issues_company_origin_prefix_idx ON issues (company_id, origin_kind text_pattern_ops);
