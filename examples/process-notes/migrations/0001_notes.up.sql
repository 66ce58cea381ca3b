CREATE TABLE notes (
    id          bigserial PRIMARY KEY,
    company_id  uuid NOT NULL,
    text        text NOT NULL,
    author_type text NOT NULL,
    author_id   text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notes_company_created_idx ON notes (company_id, created_at DESC, id DESC);

CREATE TABLE company_names (
    company_id  uuid PRIMARY KEY,
    name        text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE company_stats (
    company_id    uuid PRIMARY KEY,
    note_count    integer NOT NULL,
    refreshed_at  timestamptz NOT NULL DEFAULT now()
);
