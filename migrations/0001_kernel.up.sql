CREATE SCHEMA IF NOT EXISTS kernel;

CREATE TABLE kernel.instance (
    id          text PRIMARY KEY,
    singleton   boolean NOT NULL DEFAULT true UNIQUE CHECK (singleton),
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE kernel.instance_settings (
    section     text PRIMARY KEY,
    value       jsonb NOT NULL DEFAULT '{}'::jsonb,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE kernel.users (
    id             text PRIMARY KEY,
    email          text NOT NULL,
    name           text NOT NULL DEFAULT '',
    password_hash  text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON kernel.users (lower(email));

CREATE TABLE kernel.sessions (
    id          text PRIMARY KEY,
    user_id     text NOT NULL REFERENCES kernel.users (id) ON DELETE CASCADE,
    token_hash  text NOT NULL UNIQUE,
    expires_at  timestamptz NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE kernel.instance_user_roles (
    user_id     text NOT NULL REFERENCES kernel.users (id) ON DELETE CASCADE,
    role        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, role)
);

CREATE TABLE kernel.board_api_keys (
    id            uuid PRIMARY KEY,
    user_id       text NOT NULL REFERENCES kernel.users (id) ON DELETE CASCADE,
    name          text NOT NULL DEFAULT 'default',
    key_hash      text NOT NULL UNIQUE,
    last_used_at  timestamptz,
    revoked_at    timestamptz,
    expires_at    timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE kernel.cli_auth_challenges (
    id            uuid PRIMARY KEY,
    token_hash    text NOT NULL UNIQUE,
    status        text NOT NULL DEFAULT 'pending',
    client_name   text NOT NULL DEFAULT '',
    approved_by   text,
    board_key_id  uuid,
    expires_at    timestamptz NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE kernel.companies (
    id                                     uuid PRIMARY KEY,
    name                                   text NOT NULL,
    description                            text,
    status                                 text NOT NULL DEFAULT 'active',
    pause_reason                           text,
    paused_at                              timestamptz,
    issue_prefix                           text NOT NULL UNIQUE,
    issue_counter                          bigint NOT NULL DEFAULT 0,
    budget_monthly_cents                   bigint NOT NULL DEFAULT 0,
    spent_monthly_cents                    bigint NOT NULL DEFAULT 0,
    attachment_max_bytes                   bigint NOT NULL DEFAULT 10485760,
    default_responsible_user_id            text,
    require_board_approval_for_new_agents  boolean NOT NULL DEFAULT false,
    interaction_resolver_governance        jsonb NOT NULL DEFAULT '{}'::jsonb,
    feedback_data_sharing_enabled          boolean NOT NULL DEFAULT false,
    brand_color                            text,
    logo_url                               text,
    archived_at                            timestamptz,
    created_at                             timestamptz NOT NULL DEFAULT now(),
    updated_at                             timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE kernel.company_memberships (
    id               uuid PRIMARY KEY,
    company_id       uuid NOT NULL REFERENCES kernel.companies (id) ON DELETE CASCADE,
    principal_type   text NOT NULL,
    principal_id     text NOT NULL,
    status           text NOT NULL DEFAULT 'active',
    membership_role  text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (company_id, principal_type, principal_id)
);
CREATE INDEX company_memberships_principal_idx ON kernel.company_memberships (principal_type, principal_id);

CREATE TABLE kernel.principal_permission_grants (
    id                  uuid PRIMARY KEY,
    company_id          uuid NOT NULL REFERENCES kernel.companies (id) ON DELETE CASCADE,
    principal_type      text NOT NULL,
    principal_id        text NOT NULL,
    permission_key      text NOT NULL,
    scope               jsonb,
    granted_by_user_id  text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (company_id, principal_type, principal_id, permission_key)
);

CREATE TABLE kernel.agents (
    id          uuid PRIMARY KEY,
    company_id  uuid NOT NULL REFERENCES kernel.companies (id) ON DELETE CASCADE,
    name        text NOT NULL,
    url_key     text NOT NULL,
    role        text NOT NULL DEFAULT 'general',
    status      text NOT NULL DEFAULT 'idle',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX agents_company_url_key_live ON kernel.agents (company_id, url_key) WHERE status <> 'terminated';
CREATE INDEX agents_company_idx ON kernel.agents (company_id);

CREATE TABLE kernel.agent_api_keys (
    id                   uuid PRIMARY KEY,
    agent_id             uuid NOT NULL REFERENCES kernel.agents (id) ON DELETE CASCADE,
    company_id           uuid NOT NULL REFERENCES kernel.companies (id) ON DELETE CASCADE,
    name                 text NOT NULL DEFAULT 'default',
    key_hash             text NOT NULL UNIQUE,
    scope                jsonb NOT NULL DEFAULT '{"kind":"standard"}'::jsonb,
    responsible_user_id  text,
    last_used_at         timestamptz,
    revoked_at           timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agent_api_keys_agent_idx ON kernel.agent_api_keys (agent_id);

CREATE TABLE kernel.activity_log (
    id                   uuid PRIMARY KEY,
    company_id           uuid,
    actor_type           text NOT NULL DEFAULT 'system',
    actor_id             text NOT NULL DEFAULT '',
    action               text NOT NULL,
    entity_type          text NOT NULL DEFAULT '',
    entity_id            text NOT NULL DEFAULT '',
    agent_id             uuid,
    run_id               text,
    responsible_user_id  text,
    details              jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX activity_log_company_created_idx ON kernel.activity_log (company_id, created_at DESC, id DESC);
CREATE INDEX activity_log_company_entity_idx ON kernel.activity_log (company_id, entity_type, entity_id, created_at DESC);
CREATE INDEX activity_log_company_agent_idx ON kernel.activity_log (company_id, agent_id, created_at DESC);

CREATE TABLE kernel.extensions (
    key          text PRIMARY KEY,
    id           uuid NOT NULL UNIQUE,
    version      text NOT NULL,
    kind         text NOT NULL,
    runtime      text NOT NULL,
    source       text NOT NULL,
    path         text NOT NULL DEFAULT '',
    manifest     jsonb NOT NULL,
    config       jsonb NOT NULL DEFAULT '{}'::jsonb,
    status       text NOT NULL DEFAULT 'installed',
    enabled      boolean NOT NULL DEFAULT true,
    last_error   text,
    install_order serial,
    installed_at timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE kernel.extension_kv (
    extension_key  text NOT NULL,
    company_id     text NOT NULL DEFAULT '',
    key            text NOT NULL,
    value          bytea NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (extension_key, company_id, key)
);
