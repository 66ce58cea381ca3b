-- Files attached to issues. The bytes live in the extension's data directory at
-- storage_path (relative to it); the row records their size and SHA-256.

CREATE TABLE issue_attachments (
    id                   uuid PRIMARY KEY,
    company_id           uuid NOT NULL,
    issue_id             uuid NOT NULL REFERENCES issues (id) ON DELETE CASCADE,
    file_name            text NOT NULL,
    content_type         text NOT NULL,
    size_bytes           bigint NOT NULL,
    sha256               text NOT NULL,
    storage_path         text NOT NULL,
    created_by_agent_id  uuid,
    created_by_user_id   text,
    created_by_run_id    text,
    created_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX issue_attachments_issue_idx ON issue_attachments (issue_id, created_at);
CREATE INDEX issue_attachments_company_idx ON issue_attachments (company_id, created_at DESC);
