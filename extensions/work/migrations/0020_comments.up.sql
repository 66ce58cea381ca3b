-- Issue comments. A deleted comment keeps its row (deleted_at and who deleted it) so the
-- thread and the activity log stay consistent; lists and search skip it.

CREATE TABLE issue_comments (
    id                    uuid PRIMARY KEY,
    company_id            uuid NOT NULL,
    issue_id              uuid NOT NULL REFERENCES issues (id) ON DELETE CASCADE,
    author_agent_id       uuid,
    author_user_id        text,
    on_behalf_of_user_id  text,
    author_type           text NOT NULL DEFAULT 'user',
    created_by_run_id     text,
    body                  text NOT NULL,
    presentation          jsonb,
    metadata              jsonb,
    deleted_at            timestamptz,
    deleted_by_type       text,
    deleted_by_agent_id   uuid,
    deleted_by_user_id    text,
    deleted_by_run_id     text,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    search_vector         tsvector GENERATED ALWAYS AS (to_tsvector('simple', coalesce(body, ''))) STORED
);
CREATE INDEX issue_comments_issue_idx ON issue_comments (issue_id, created_at, id);
CREATE INDEX issue_comments_company_idx ON issue_comments (company_id, created_at DESC);
CREATE INDEX issue_comments_search_idx ON issue_comments USING gin (search_vector);
