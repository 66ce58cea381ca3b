-- Company secrets (REFERENCE.md 2.9): the secret records, their encrypted versions, the
-- bindings that grant them to agents and other targets, and the access audit. Company,
-- agent and run ids are kernel- or extension-owned elsewhere (no foreign keys).

CREATE TABLE company_secrets (
    id                  uuid PRIMARY KEY,
    company_id          uuid NOT NULL,
    scope               text NOT NULL DEFAULT 'company',
    owner_user_id       text,
    key                 text NOT NULL,
    name                text NOT NULL,
    description         text,
    provider            text NOT NULL DEFAULT 'local_encrypted',
    provider_config_id  text,
    status              text NOT NULL DEFAULT 'active',
    managed_mode        text NOT NULL DEFAULT 'service_managed',
    external_ref        text,
    latest_version      integer NOT NULL DEFAULT 0,
    last_resolved_at    timestamptz,
    last_rotated_at     timestamptz,
    deleted_at          timestamptz,
    created_by_user_id  text,
    created_by_agent_id uuid,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT company_secrets_status_check CHECK (status IN ('active', 'disabled', 'archived', 'deleted')),
    CONSTRAINT company_secrets_managed_mode_check CHECK (managed_mode IN ('service_managed', 'external_reference'))
);
CREATE UNIQUE INDEX company_secrets_company_key_key ON company_secrets (company_id, key) WHERE deleted_at IS NULL;
CREATE INDEX company_secrets_company_idx ON company_secrets (company_id, created_at DESC);

CREATE TABLE company_secret_versions (
    id                   uuid PRIMARY KEY,
    secret_id            uuid NOT NULL REFERENCES company_secrets (id) ON DELETE CASCADE,
    version              integer NOT NULL,
    material             jsonb,
    value_sha256         text,
    provider_version_ref text,
    status               text NOT NULL DEFAULT 'current',
    created_by_user_id   text,
    created_at           timestamptz NOT NULL DEFAULT now(),
    revoked_at           timestamptz,
    CONSTRAINT company_secret_versions_status_check CHECK (status IN ('current', 'previous', 'disabled', 'destroyed', 'failed')),
    UNIQUE (secret_id, version)
);

CREATE TABLE company_secret_bindings (
    id                       uuid PRIMARY KEY,
    company_id               uuid NOT NULL,
    secret_id                uuid NOT NULL REFERENCES company_secrets (id) ON DELETE CASCADE,
    target_type              text NOT NULL,
    target_id                text NOT NULL,
    config_path              text,
    version_selector         text NOT NULL DEFAULT 'latest',
    required                 boolean NOT NULL DEFAULT true,
    delivery                 text NOT NULL DEFAULT 'both',
    projection_class         text NOT NULL DEFAULT 'unclassified',
    projection_allowlist_key text,
    created_at               timestamptz NOT NULL DEFAULT now(),
    updated_at               timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT company_secret_bindings_target_type_check CHECK (target_type IN
        ('agent', 'project', 'environment', 'routine', 'plugin', 'issue', 'run', 'tool_connection', 'system')),
    CONSTRAINT company_secret_bindings_delivery_check CHECK (delivery IN ('env', 'api', 'both'))
);
CREATE UNIQUE INDEX company_secret_bindings_target_key
    ON company_secret_bindings (secret_id, target_type, target_id, coalesce(config_path, ''));
CREATE INDEX company_secret_bindings_target_idx ON company_secret_bindings (company_id, target_type, target_id);

CREATE TABLE secret_access_events (
    id            uuid PRIMARY KEY,
    company_id    uuid NOT NULL,
    secret_id     uuid,
    secret_key    text,
    version       integer,
    provider      text,
    actor_type    text,
    actor_id      text,
    consumer_type text,
    consumer_id   text,
    requester     text,
    config_path   text,
    run_id        text,
    outcome       text NOT NULL,
    reason        text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT secret_access_events_outcome_check CHECK (outcome IN
        ('success', 'failure', 'missing', 'inactive', 'not_allowed', 'optional_omitted', 'provider_error'))
);
CREATE INDEX secret_access_events_secret_idx ON secret_access_events (secret_id, created_at DESC);
CREATE INDEX secret_access_events_company_idx ON secret_access_events (company_id, created_at DESC);
