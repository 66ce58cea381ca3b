-- Indexes for projects, goals and company search.

-- At most one primary workspace per project (the API clears the others when one is set).
CREATE UNIQUE INDEX project_workspaces_primary_key ON project_workspaces (project_id) WHERE is_primary;
CREATE INDEX project_goals_goal_idx ON project_goals (goal_id);
CREATE INDEX goals_parent_idx ON goals (parent_id) WHERE parent_id IS NOT NULL;

-- Search: prefix match on identifiers ("PRJ-1" finds PRJ-1, PRJ-12, PRJ-105 …) without a
-- scan; issues_identifier_key has the same expression but cannot serve LIKE.
CREATE INDEX issues_identifier_prefix_idx ON issues (upper(identifier) text_pattern_ops);

-- Search over work products ("artifacts"); the search query repeats this expression.
CREATE INDEX issue_work_products_search_idx ON issue_work_products USING gin ((
    to_tsvector('simple', coalesce(title, '') || ' ' || coalesce(summary, '') || ' ' || coalesce(url, ''))
));
