-- Status cards (spec part 1 "Status card"): standing questions compiled into company-search
-- queries and kept summarized by a summarizer agent.
CREATE TABLE status_cards (
    id                         uuid PRIMARY KEY,
    company_id                 uuid NOT NULL,
    created_by_user_id         text,
    created_by_agent_id        uuid,
    title                      text,
    title_pinned               boolean NOT NULL DEFAULT false,
    interest_prompt            text NOT NULL,
    queries                    jsonb NOT NULL DEFAULT '[]',
    query_version              integer NOT NULL DEFAULT 0,
    query_compiled_at          timestamptz,
    query_compiled_by_agent_id uuid,
    agent_id                   uuid,
    refresh_policy             jsonb NOT NULL,
    state                      text NOT NULL DEFAULT 'compiling',
    pending_change_count       integer NOT NULL DEFAULT 0,
    last_change_at             timestamptz,
    fingerprint                jsonb,
    fingerprint_at             timestamptz,
    mentioned_issue_ids        text[] NOT NULL DEFAULT '{}',
    document_id                uuid,
    summary_body               text,
    last_update_run_kind       text,
    last_generated_at          timestamptz,
    last_model                 text,
    generating_issue_id        uuid,
    generating_entry_id        uuid,
    failure_reason             text,
    next_eval_at               timestamptz,
    -- dirty_at is when a reactive card first saw an event since its last evaluation.
    dirty_at                   timestamptz,
    archived_at                timestamptz,
    archived_by_user_id        text,
    archived_by_agent_id       uuid,
    created_at                 timestamptz NOT NULL DEFAULT now(),
    updated_at                 timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT status_cards_state_check CHECK (state IN ('compiling', 'active', 'error', 'paused_budget', 'paused_hours')),
    CONSTRAINT status_cards_author_check CHECK ((created_by_user_id IS NULL) <> (created_by_agent_id IS NULL))
);
CREATE INDEX status_cards_company_idx ON status_cards (company_id, updated_at DESC);
CREATE INDEX status_cards_due_idx ON status_cards (next_eval_at) WHERE next_eval_at IS NOT NULL AND archived_at IS NULL;
CREATE INDEX status_cards_generating_idx ON status_cards (generating_issue_id) WHERE generating_issue_id IS NOT NULL;
CREATE INDEX status_cards_agent_author_idx ON status_cards (company_id, created_by_agent_id) WHERE created_by_agent_id IS NOT NULL;

-- The update ledger: one entry per compile, full or incremental update.
CREATE TABLE status_card_updates (
    id                  uuid PRIMARY KEY,
    company_id          uuid NOT NULL,
    card_id             uuid NOT NULL REFERENCES status_cards (id) ON DELETE CASCADE,
    kind                text NOT NULL,
    trigger             text NOT NULL,
    status              text NOT NULL DEFAULT 'running',
    agent_id            uuid,
    generation_issue_id uuid,
    run_id              uuid,
    changes             jsonb NOT NULL DEFAULT '[]',
    model               text,
    query_version       integer NOT NULL DEFAULT 0,
    change_summary      text,
    -- prompt is the interest prompt a compile entry compiles.
    prompt              text,
    -- fingerprint is the watched set's snapshot the update covers.
    fingerprint         jsonb,
    error               text,
    started_at          timestamptz NOT NULL,
    finished_at         timestamptz,
    CONSTRAINT status_card_updates_kind_check CHECK (kind IN ('compile', 'full', 'incremental')),
    CONSTRAINT status_card_updates_trigger_check CHECK (trigger IN ('manual', 'interval', 'reactive', 'restore')),
    CONSTRAINT status_card_updates_status_check CHECK (status IN ('running', 'ok', 'failed'))
);
CREATE INDEX status_card_updates_card_idx ON status_card_updates (card_id, started_at DESC, id DESC);
CREATE INDEX status_card_updates_issue_idx ON status_card_updates (generation_issue_id) WHERE generation_issue_id IS NOT NULL;

-- Past summaries of a card.
CREATE TABLE status_card_revisions (
    id              uuid PRIMARY KEY,
    company_id      uuid NOT NULL,
    card_id         uuid NOT NULL REFERENCES status_cards (id) ON DELETE CASCADE,
    revision_number integer NOT NULL,
    title           text,
    body            text NOT NULL,
    change_summary  text NOT NULL,
    update_id       uuid,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (card_id, revision_number)
);
