-- The LLM Wiki's own tables. Company ids are the kernel's; the plugin never reads kernel
-- tables, so there are no foreign keys to them (uninstall with purge drops the schema).

CREATE TABLE wiki_instances (
    company_id           uuid NOT NULL,
    wiki_id              text NOT NULL,
    configured_root_path text,
    schema_version       integer NOT NULL DEFAULT 1,
    settings             jsonb NOT NULL DEFAULT '{}',
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (company_id, wiki_id)
);

CREATE TABLE wiki_spaces (
    id                   uuid PRIMARY KEY,
    company_id           uuid NOT NULL,
    wiki_id              text NOT NULL,
    slug                 text NOT NULL,
    display_name         text NOT NULL,
    space_type           text NOT NULL DEFAULT 'local_folder',
    folder_mode          text NOT NULL DEFAULT 'managed_subfolder',
    root_folder_key      text NOT NULL DEFAULT 'wiki-root',
    path_prefix          text,
    access_scope         text NOT NULL DEFAULT 'shared',
    owner_user_id        text,
    owner_agent_id       uuid,
    team_key             text,
    settings             jsonb NOT NULL DEFAULT '{}',
    status               text NOT NULL DEFAULT 'active',
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (company_id, wiki_id, slug)
);

CREATE TABLE wiki_sources (
    id           uuid PRIMARY KEY,
    company_id   uuid NOT NULL,
    wiki_id      text NOT NULL,
    space_id     uuid NOT NULL REFERENCES wiki_spaces (id) ON DELETE CASCADE,
    source_type  text NOT NULL,
    source_key   text,
    title        text NOT NULL,
    url          text,
    raw_path     text NOT NULL,
    content_hash text NOT NULL,
    body_text    text NOT NULL DEFAULT '',
    status       text NOT NULL DEFAULT 'captured',
    metadata     jsonb NOT NULL DEFAULT '{}',
    search       tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', coalesce(title, '')), 'A') ||
        setweight(to_tsvector('simple', translate(raw_path, '/-._', '    ')), 'B') ||
        setweight(to_tsvector('english', body_text), 'C')) STORED,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (space_id, raw_path)
);
CREATE UNIQUE INDEX wiki_sources_key_idx ON wiki_sources (space_id, source_key) WHERE source_key IS NOT NULL;
CREATE INDEX wiki_sources_created_idx ON wiki_sources (space_id, created_at DESC, id DESC);
CREATE INDEX wiki_sources_search_idx ON wiki_sources USING gin (search);

CREATE TABLE wiki_pages (
    id                  uuid PRIMARY KEY,
    company_id          uuid NOT NULL,
    wiki_id             text NOT NULL,
    space_id            uuid NOT NULL REFERENCES wiki_spaces (id) ON DELETE CASCADE,
    path                text NOT NULL,
    title               text NOT NULL,
    page_type           text NOT NULL,
    frontmatter         jsonb NOT NULL DEFAULT '{}',
    source_refs         jsonb NOT NULL DEFAULT '[]',
    backlinks           text[] NOT NULL DEFAULT '{}',
    content_hash        text NOT NULL,
    body_text           text NOT NULL DEFAULT '',
    current_revision_id uuid,
    search              tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', title), 'A') ||
        setweight(to_tsvector('simple', translate(path, '/-._', '    ')), 'B') ||
        setweight(to_tsvector('english', body_text), 'C')) STORED,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (space_id, path)
);
-- backlinks holds the pages a page links to; "who links to X" is backlinks @> {X}.
CREATE INDEX wiki_pages_links_idx ON wiki_pages USING gin (backlinks);
CREATE INDEX wiki_pages_search_idx ON wiki_pages USING gin (search);

CREATE TABLE wiki_page_revisions (
    id           uuid PRIMARY KEY,
    company_id   uuid NOT NULL,
    space_id     uuid NOT NULL REFERENCES wiki_spaces (id) ON DELETE CASCADE,
    page_id      uuid NOT NULL REFERENCES wiki_pages (id) ON DELETE CASCADE,
    operation_id uuid,
    path         text NOT NULL,
    content_hash text NOT NULL,
    summary      text,
    author_kind  text NOT NULL,
    author_id    text,
    author_run_id text,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX wiki_page_revisions_page_idx ON wiki_page_revisions (page_id, created_at DESC);

CREATE TABLE wiki_operations (
    id                uuid PRIMARY KEY,
    company_id        uuid NOT NULL,
    wiki_id           text NOT NULL,
    space_id          uuid NOT NULL REFERENCES wiki_spaces (id) ON DELETE CASCADE,
    operation_type    text NOT NULL,
    status            text NOT NULL DEFAULT 'queued',
    hidden_issue_id   uuid,
    hidden_issue_identifier text,
    hidden_issue_title text,
    project_id        uuid,
    run_ids           jsonb NOT NULL DEFAULT '[]',
    cost_cents        integer NOT NULL DEFAULT 0,
    warnings          jsonb NOT NULL DEFAULT '[]',
    affected_pages    jsonb NOT NULL DEFAULT '[]',
    metadata          jsonb NOT NULL DEFAULT '{}',
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX wiki_operations_space_idx ON wiki_operations (space_id, created_at DESC, id DESC);

CREATE TABLE wiki_query_sessions (
    id              uuid PRIMARY KEY REFERENCES wiki_operations (id) ON DELETE CASCADE,
    company_id      uuid NOT NULL,
    wiki_id         text NOT NULL,
    space_id        uuid NOT NULL REFERENCES wiki_spaces (id) ON DELETE CASCADE,
    hidden_issue_id uuid,
    question        text NOT NULL,
    status          text NOT NULL DEFAULT 'active',
    answer          text,
    filed_outputs   jsonb NOT NULL DEFAULT '[]',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
