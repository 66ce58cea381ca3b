-- Distillation bookkeeping (the reference product's *_distillation_* tables): what event
-- ingestion has observed per scope (a cursor: the company, or a project), the work items and
-- runs that distil it into pages, the source bundles a run read, and which page a scope's
-- distillation last wrote. Event ingestion keeps the cursors; the maintainer's routines and
-- later versions fill the rest.

CREATE TABLE distillation_cursors (
    id                     uuid PRIMARY KEY,
    company_id             uuid NOT NULL,
    wiki_id                text NOT NULL,
    space_id               uuid NOT NULL REFERENCES wiki_spaces (id) ON DELETE CASCADE,
    source_scope           text NOT NULL CHECK (source_scope IN ('company', 'project', 'root_issue')),
    scope_key              text NOT NULL,
    project_id             uuid,
    root_issue_id          uuid,
    source_kind            text NOT NULL DEFAULT 'keel_issue_history',
    last_processed_at      timestamptz,
    last_observed_at       timestamptz,
    pending_event_count    integer NOT NULL DEFAULT 0,
    last_successful_run_id uuid,
    last_source_hash       text,
    metadata               jsonb NOT NULL DEFAULT '{}',
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    UNIQUE (space_id, source_scope, scope_key, source_kind)
);

CREATE TABLE distillation_work_items (
    id                    uuid PRIMARY KEY,
    company_id            uuid NOT NULL,
    wiki_id               text NOT NULL,
    space_id              uuid NOT NULL REFERENCES wiki_spaces (id) ON DELETE CASCADE,
    work_item_kind        text NOT NULL CHECK (work_item_kind IN ('manual', 'retry', 'backfill', 'priority_override', 'review_patch')),
    status                text NOT NULL DEFAULT 'pending',
    priority              text NOT NULL DEFAULT 'medium',
    project_id            uuid,
    root_issue_id         uuid,
    requested_by_issue_id uuid,
    idempotency_key       text,
    metadata              jsonb NOT NULL DEFAULT '{}',
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX distillation_work_items_key_idx ON distillation_work_items (space_id, idempotency_key) WHERE idempotency_key IS NOT NULL;

CREATE TABLE distillation_runs (
    id                  uuid PRIMARY KEY,
    company_id          uuid NOT NULL,
    wiki_id             text NOT NULL,
    space_id            uuid NOT NULL REFERENCES wiki_spaces (id) ON DELETE CASCADE,
    cursor_id           uuid REFERENCES distillation_cursors (id) ON DELETE SET NULL,
    work_item_id        uuid REFERENCES distillation_work_items (id) ON DELETE SET NULL,
    project_id          uuid,
    root_issue_id       uuid,
    source_window_start timestamptz,
    source_window_end   timestamptz,
    source_hash         text,
    status              text NOT NULL DEFAULT 'source_ready',
    operation_issue_id  uuid,
    retry_count         integer NOT NULL DEFAULT 0,
    cost_cents          integer NOT NULL DEFAULT 0,
    warnings            jsonb NOT NULL DEFAULT '[]',
    metadata            jsonb NOT NULL DEFAULT '{}',
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX distillation_runs_cursor_idx ON distillation_runs (cursor_id, created_at DESC);

CREATE TABLE source_snapshots (
    id                  uuid PRIMARY KEY,
    company_id          uuid NOT NULL,
    wiki_id             text NOT NULL,
    space_id            uuid NOT NULL REFERENCES wiki_spaces (id) ON DELETE CASCADE,
    distillation_run_id uuid NOT NULL REFERENCES distillation_runs (id) ON DELETE CASCADE,
    project_id          uuid,
    root_issue_id       uuid,
    source_hash         text NOT NULL,
    max_characters      integer NOT NULL,
    clipped             boolean NOT NULL DEFAULT false,
    source_refs         jsonb NOT NULL DEFAULT '[]',
    bundle_markdown     text NOT NULL,
    metadata            jsonb NOT NULL DEFAULT '{}',
    created_at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE page_bindings (
    id                       uuid PRIMARY KEY,
    company_id               uuid NOT NULL,
    wiki_id                  text NOT NULL,
    space_id                 uuid NOT NULL REFERENCES wiki_spaces (id) ON DELETE CASCADE,
    project_id               uuid,
    root_issue_id            uuid,
    page_path                text NOT NULL,
    last_applied_source_hash text,
    last_distillation_run_id uuid REFERENCES distillation_runs (id) ON DELETE SET NULL,
    created_at               timestamptz NOT NULL DEFAULT now(),
    updated_at               timestamptz NOT NULL DEFAULT now(),
    UNIQUE (space_id, page_path)
);
