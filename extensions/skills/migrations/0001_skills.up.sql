-- Company skills (spec part 2 "Skill", "Skills"): one row per (company, canonical key),
-- with the skill's files. Company, agent, folder and project ids live with their owners.
CREATE TABLE skills (
    id              uuid PRIMARY KEY,
    company_id      uuid NOT NULL,
    key             text NOT NULL,
    slug            text NOT NULL,
    name            text NOT NULL,
    description     text NOT NULL DEFAULT '',
    source_type     text NOT NULL,
    source_locator  text,
    source_ref      text,
    metadata        jsonb NOT NULL DEFAULT '{}',
    trust_level     text NOT NULL,
    inventory       jsonb NOT NULL DEFAULT '[]',
    content_hash    text NOT NULL,
    folder_id       uuid,
    managed_by      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (company_id, key)
);

CREATE INDEX skills_company_slug ON skills (company_id, slug);
CREATE INDEX skills_folder ON skills (company_id, folder_id);

-- skill_files holds each skill's files (SKILL.md, references, scripts, assets).
CREATE TABLE skill_files (
    skill_id    uuid NOT NULL REFERENCES skills (id) ON DELETE CASCADE,
    company_id  uuid NOT NULL,
    path        text NOT NULL,
    content     bytea NOT NULL,
    PRIMARY KEY (skill_id, path)
);
