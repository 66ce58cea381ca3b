-- Cases (spec part 2 "Case", "Case status", "Case document lock", "Cases"; REFERENCE.md 5):
-- document-heavy containers with revisioned documents, locks, annotation threads,
-- attachments, labels, typed issue links and an event timeline. Company, project, label,
-- issue, agent and run ids live with their owners (no foreign keys to them).

-- case_counters numbers each company's cases; a number is never handed out twice.
CREATE TABLE case_counters (
    company_id  uuid PRIMARY KEY,
    last_number bigint NOT NULL
);

-- case_trigrams is the distinct three-character substrings of a text: a GIN index over
-- them narrows the list's substring search (q) to the cases holding every trigram of the
-- term, without the pg_trgm extension (which the extension's role may not create).
CREATE FUNCTION case_trigrams(t text) RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(array_agg(DISTINCT substr(t, i, 3)), '{}') FROM generate_series(1, length(t) - 2) AS i
$$;

CREATE TABLE cases (
    id                  uuid PRIMARY KEY,
    company_id          uuid NOT NULL,
    case_number         bigint NOT NULL,
    identifier          text NOT NULL,
    case_type           text NOT NULL,
    key                 text,
    title               text NOT NULL,
    summary             text,
    status              text NOT NULL DEFAULT 'draft',
    fields              jsonb NOT NULL DEFAULT '{}',
    project_id          uuid,
    parent_case_id      uuid REFERENCES cases (id) ON DELETE SET NULL,
    created_by_agent_id uuid,
    created_by_user_id  text,
    created_by_run_id   text,
    completed_at        timestamptz,
    created_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- last_activity_at orders the list: any event of the case moves it.
    last_activity_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- search_text is what the list's q matches (a substring, case-insensitively).
    search_text         text GENERATED ALWAYS AS (lower(identifier || E'\n' || title || E'\n' || coalesce(summary, '') ||
                            E'\n' || coalesce(key, ''))) STORED,
    -- search_trigrams holds the trigrams of search_text plus a 'co:<company>' element, so
    -- that the GIN index intersects a term's trigrams with the company's cases alone.
    search_trigrams     text[] GENERATED ALWAYS AS (ext_cases.case_trigrams(lower(identifier || E'\n' || title || E'\n' ||
                            coalesce(summary, '') || E'\n' || coalesce(key, ''))) || ('co:' || company_id::text)) STORED,
    CONSTRAINT cases_status_check CHECK (status IN ('draft', 'in_progress', 'in_review', 'approved', 'done', 'cancelled')),
    CONSTRAINT cases_not_own_parent CHECK (parent_case_id IS NULL OR parent_case_id <> id),
    UNIQUE (company_id, case_number)
);
-- One case per (caseType, key); null is a key of its own (one keyless case per type).
CREATE UNIQUE INDEX cases_type_key ON cases (company_id, case_type, key) NULLS NOT DISTINCT;
CREATE UNIQUE INDEX cases_identifier ON cases (lower(identifier));
CREATE INDEX cases_company_activity_idx ON cases (company_id, last_activity_at DESC, id DESC);
CREATE INDEX cases_company_type_activity_idx ON cases (company_id, case_type, last_activity_at DESC);
CREATE INDEX cases_company_status_activity_idx ON cases (company_id, status, last_activity_at DESC);
CREATE INDEX cases_project_idx ON cases (project_id, last_activity_at DESC) WHERE project_id IS NOT NULL;
CREATE INDEX cases_search_trigrams_idx ON cases USING gin (search_trigrams);
CREATE INDEX cases_parent_idx ON cases (parent_case_id) WHERE parent_case_id IS NOT NULL;

CREATE TABLE case_labels (
    case_id    uuid NOT NULL REFERENCES cases (id) ON DELETE CASCADE,
    label_id   uuid NOT NULL,
    company_id uuid NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (case_id, label_id)
);
CREATE INDEX case_labels_label_idx ON case_labels (label_id);

CREATE TABLE case_issue_links (
    id                  uuid PRIMARY KEY,
    company_id          uuid NOT NULL,
    case_id             uuid NOT NULL REFERENCES cases (id) ON DELETE CASCADE,
    issue_id            uuid NOT NULL,
    role                text NOT NULL,
    created_by_agent_id uuid,
    created_by_user_id  text,
    created_by_run_id   text,
    created_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT case_issue_links_role_check CHECK (role IN ('origin', 'work', 'reference')),
    UNIQUE (case_id, issue_id)
);
CREATE INDEX case_issue_links_issue_idx ON case_issue_links (issue_id, created_at DESC);

CREATE TABLE case_events (
    id             uuid PRIMARY KEY,
    company_id     uuid NOT NULL,
    case_id        uuid NOT NULL REFERENCES cases (id) ON DELETE CASCADE,
    kind           text NOT NULL,
    actor_type     text NOT NULL,
    actor_user_id  text,
    actor_agent_id uuid,
    run_id         text,
    -- issue_id is the issue the event is tied to: the run's issue or the linked issue.
    issue_id       uuid,
    payload        jsonb NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX case_events_case_idx ON case_events (case_id, created_at DESC, id DESC);

CREATE TABLE case_documents (
    id                  uuid PRIMARY KEY,
    company_id          uuid NOT NULL,
    case_id             uuid NOT NULL REFERENCES cases (id) ON DELETE CASCADE,
    key                 text NOT NULL,
    title               text,
    format              text NOT NULL DEFAULT 'markdown',
    body                text NOT NULL DEFAULT '',
    latest_revision_id  uuid,
    revision_number     integer NOT NULL DEFAULT 0,
    locked_at           timestamptz,
    locked_by_agent_id  uuid,
    locked_by_user_id   text,
    created_by_agent_id uuid,
    created_by_user_id  text,
    updated_by_agent_id uuid,
    updated_by_user_id  text,
    created_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (case_id, key)
);

CREATE TABLE case_document_revisions (
    id                  uuid PRIMARY KEY,
    company_id          uuid NOT NULL,
    document_id         uuid NOT NULL REFERENCES case_documents (id) ON DELETE CASCADE,
    revision_number     integer NOT NULL,
    title               text,
    format              text NOT NULL DEFAULT 'markdown',
    body                text NOT NULL,
    change_summary      text,
    restored_from_id    uuid,
    created_by_agent_id uuid,
    created_by_user_id  text,
    created_by_run_id   text,
    -- issue_id is the issue the revision is attributed to (the writing run's issue).
    issue_id            uuid,
    created_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (document_id, revision_number)
);

-- Annotation threads are anchored to a text range of a revision: the quoted text with
-- context either side and character offsets. Open threads move to each new revision;
-- one whose text is gone is orphaned (kept, with its last anchor).
CREATE TABLE case_annotation_threads (
    id                  uuid PRIMARY KEY,
    company_id          uuid NOT NULL,
    case_id             uuid NOT NULL REFERENCES cases (id) ON DELETE CASCADE,
    document_id         uuid NOT NULL REFERENCES case_documents (id) ON DELETE CASCADE,
    revision_id         uuid NOT NULL,
    anchor_state        text NOT NULL DEFAULT 'anchored',
    quote               text NOT NULL,
    prefix              text NOT NULL DEFAULT '',
    suffix              text NOT NULL DEFAULT '',
    start_offset        integer NOT NULL,
    end_offset          integer NOT NULL,
    status              text NOT NULL DEFAULT 'open',
    created_by_agent_id uuid,
    created_by_user_id  text,
    created_by_run_id   text,
    resolved_at         timestamptz,
    resolved_by_agent_id uuid,
    resolved_by_user_id text,
    created_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT case_annotation_threads_status_check CHECK (status IN ('open', 'resolved')),
    CONSTRAINT case_annotation_threads_anchor_check CHECK (anchor_state IN ('anchored', 'orphaned'))
);
CREATE INDEX case_annotation_threads_doc_idx ON case_annotation_threads (document_id, status, created_at);

CREATE TABLE case_annotation_comments (
    id                  uuid PRIMARY KEY,
    company_id          uuid NOT NULL,
    thread_id           uuid NOT NULL REFERENCES case_annotation_threads (id) ON DELETE CASCADE,
    body                text NOT NULL,
    created_by_agent_id uuid,
    created_by_user_id  text,
    created_by_run_id   text,
    created_at          timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX case_annotation_comments_thread_idx ON case_annotation_comments (thread_id, created_at);

-- Stored assets are content-addressed per company: one file per distinct content.
CREATE TABLE case_assets (
    id           uuid PRIMARY KEY,
    company_id   uuid NOT NULL,
    sha256       text NOT NULL,
    byte_size    bigint NOT NULL,
    content_type text NOT NULL,
    storage_path text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (company_id, sha256)
);

CREATE TABLE case_attachments (
    id                  uuid PRIMARY KEY,
    company_id          uuid NOT NULL,
    case_id             uuid NOT NULL REFERENCES cases (id) ON DELETE CASCADE,
    asset_id            uuid NOT NULL REFERENCES case_assets (id),
    file_name           text NOT NULL,
    created_by_agent_id uuid,
    created_by_user_id  text,
    created_by_run_id   text,
    created_at          timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX case_attachments_case_idx ON case_attachments (case_id, created_at);
