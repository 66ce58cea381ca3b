-- Folders (spec part 2 "Folder", "Folders"): per-company trees that organise routines and
-- skills. The items themselves live with their owners (routines, skills), which keep each
-- item's folderId; company, user and project ids live with their owners (no foreign keys).
CREATE TABLE folders (
    id          uuid PRIMARY KEY,
    company_id  uuid NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('routine', 'skill')),
    parent_id   uuid REFERENCES folders (id),
    name        text NOT NULL,
    slug        text NOT NULL,
    system_key  text,
    color       text,
    position    integer NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- A slug is unique among siblings (roots are siblings of each other).
CREATE UNIQUE INDEX folders_sibling_slug ON folders (company_id, kind,
    coalesce(parent_id, '00000000-0000-0000-0000-000000000000'::uuid), slug);

-- A system key names one folder per company and kind.
CREATE UNIQUE INDEX folders_system_key ON folders (company_id, kind, system_key) WHERE system_key IS NOT NULL;

CREATE INDEX folders_parent ON folders (parent_id) WHERE parent_id IS NOT NULL;
