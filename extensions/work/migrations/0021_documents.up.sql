-- Revisioned documents and their attachment to issues under a key. documents holds the
-- latest revision's title and body; document_revisions holds every revision.

CREATE TABLE documents (
    id                   uuid PRIMARY KEY,
    company_id           uuid NOT NULL,
    title                text,
    format               text NOT NULL DEFAULT 'markdown',
    body                 text NOT NULL DEFAULT '',
    latest_revision_id   uuid,
    revision_number      integer NOT NULL DEFAULT 0,
    locked_at            timestamptz,
    locked_by_agent_id   uuid,
    locked_by_user_id    text,
    created_by_agent_id  uuid,
    created_by_user_id   text,
    updated_by_agent_id  uuid,
    updated_by_user_id   text,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    search_vector        tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('simple', coalesce(title, '')), 'A') ||
        setweight(to_tsvector('simple', coalesce(body, '')), 'B')
    ) STORED
);
CREATE INDEX documents_company_idx ON documents (company_id, updated_at DESC);
CREATE INDEX documents_search_idx ON documents USING gin (search_vector);

CREATE TABLE document_revisions (
    id                   uuid PRIMARY KEY,
    document_id          uuid NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    company_id           uuid NOT NULL,
    revision_number      integer NOT NULL,
    title                text,
    format               text NOT NULL DEFAULT 'markdown',
    body                 text NOT NULL,
    change_summary       text,
    created_by_agent_id  uuid,
    created_by_user_id   text,
    created_by_run_id    text,
    created_at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (document_id, revision_number)
);

CREATE TABLE issue_documents (
    issue_id     uuid NOT NULL REFERENCES issues (id) ON DELETE CASCADE,
    document_id  uuid NOT NULL UNIQUE REFERENCES documents (id) ON DELETE CASCADE,
    key          text NOT NULL,
    company_id   uuid NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (issue_id, key)
);
