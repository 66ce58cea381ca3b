-- Agent configuration revisions: one row per change of an agent's configuration (a patch,
-- a skills sync or a rollback), holding the configuration before and after the change.
CREATE TABLE agent_config_revisions (
    id                            uuid PRIMARY KEY,
    company_id                    uuid NOT NULL,
    agent_id                      uuid NOT NULL,
    source                        text NOT NULL,
    changed_keys                  jsonb NOT NULL DEFAULT '[]'::jsonb,
    before_config                 jsonb NOT NULL DEFAULT '{}'::jsonb,
    after_config                  jsonb NOT NULL DEFAULT '{}'::jsonb,
    rolled_back_from_revision_id  uuid,
    created_by_agent_id           uuid,
    created_by_user_id            text,
    created_at                    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agent_config_revisions_agent_idx ON agent_config_revisions (agent_id, created_at DESC);
