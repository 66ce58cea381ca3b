-- Hidden issues (a plugin's operation issues, hidden_at set) are left out of every issue
-- list, count and dashboard count. The list's sort and broad filter indexes become partial
-- (WHERE hidden_at IS NULL) so the list and count keep their index (and index-only) scans
-- with the hidden_at predicate; the narrow filter indexes stay whole because other readers
-- (a project's live issues, children, origins) need hidden issues too and the list reads
-- them with a heap filter on few rows.
DROP INDEX issues_company_updated_idx;
CREATE INDEX issues_company_updated_idx ON issues (company_id, updated_at DESC, id DESC) WHERE hidden_at IS NULL;
DROP INDEX issues_company_created_idx;
CREATE INDEX issues_company_created_idx ON issues (company_id, created_at DESC, id DESC) WHERE hidden_at IS NULL;
DROP INDEX issues_company_priority_idx;
CREATE INDEX issues_company_priority_idx ON issues (company_id,
    (CASE priority WHEN 'critical' THEN 4 WHEN 'high' THEN 3 WHEN 'medium' THEN 2 ELSE 1 END) DESC,
    updated_at DESC, id DESC) WHERE hidden_at IS NULL;
DROP INDEX issues_company_status_rank_idx;
CREATE INDEX issues_company_status_rank_idx ON issues (company_id,
    (CASE status WHEN 'backlog' THEN 1 WHEN 'todo' THEN 2 WHEN 'in_progress' THEN 3 WHEN 'in_review' THEN 4
        WHEN 'blocked' THEN 5 WHEN 'done' THEN 6 ELSE 7 END) DESC,
    updated_at DESC, id DESC) WHERE hidden_at IS NULL;
DROP INDEX issues_company_status_idx;
CREATE INDEX issues_company_status_idx ON issues (company_id, status, updated_at DESC) WHERE hidden_at IS NULL;
DROP INDEX issues_company_assignee_idx;
CREATE INDEX issues_company_assignee_idx ON issues (company_id, assignee_agent_id, status) WHERE hidden_at IS NULL;
DROP INDEX issues_company_parent_idx;
CREATE INDEX issues_company_parent_idx ON issues (company_id, parent_id, updated_at DESC) WHERE hidden_at IS NULL;
DROP INDEX issues_company_origin_prefix_idx;
CREATE INDEX issues_company_origin_prefix_idx ON issues (company_id, origin_kind text_pattern_ops) WHERE hidden_at IS NULL;
