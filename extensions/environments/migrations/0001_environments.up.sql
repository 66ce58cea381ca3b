-- Environments (spec part 2 "Environment, lease, execution workspace", "Instance-admin
-- routes"; REFERENCE-plugins.md C.8): a company's execution backends on the built-in local
-- driver or a driver a plugin declares, the leases held on them, and the adapter
-- device-login sessions that run inside a lease. Company and user ids live with their
-- owners (no foreign keys to them).

CREATE TABLE environments (
    id             uuid PRIMARY KEY,
    company_id     uuid NOT NULL,
    name           text NOT NULL,
    description    text,
    driver         text NOT NULL,
    config         jsonb NOT NULL DEFAULT '{}',
    -- status is active or archived; an archived environment takes no new leases.
    status         text NOT NULL DEFAULT 'active',
    last_probe     jsonb,
    last_probed_at timestamptz,
    created_by     text,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL
);
CREATE INDEX environments_company ON environments (company_id, created_at);
CREATE UNIQUE INDEX environments_company_name ON environments (company_id, lower(name));

-- environment_leases are holds on an environment: active until released (by its holder),
-- expired (by the reaper once expires_at passes) or failed (the driver refused it).
CREATE TABLE environment_leases (
    id                uuid PRIMARY KEY,
    company_id        uuid NOT NULL,
    environment_id    uuid NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    driver            text NOT NULL,
    purpose           text NOT NULL,
    holder_type       text,
    holder_id         text,
    status            text NOT NULL DEFAULT 'active',
    provider_lease_id text,
    metadata          jsonb,
    workspace_path    text,
    failure_reason    text,
    expires_at        timestamptz NOT NULL,
    released_at       timestamptz,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL
);
CREATE INDEX environment_leases_environment ON environment_leases (environment_id, created_at DESC);
CREATE INDEX environment_leases_expiring ON environment_leases (expires_at) WHERE status = 'active';

-- adapter_login_sessions are device logins (REFERENCE-plugins.md C.8 adapter_auth_sessions):
-- at most one in flight per company and adapter type. The code and URL the CLI prints
-- are kept in memory only, never here.
CREATE TABLE adapter_login_sessions (
    id                 uuid PRIMARY KEY,
    company_id         uuid NOT NULL,
    environment_id     uuid NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    adapter_type       text NOT NULL,
    started_by_user_id text NOT NULL,
    lease_id           uuid,
    status             text NOT NULL DEFAULT 'starting',
    expires_at         timestamptz NOT NULL,
    finished_at        timestamptz,
    failure_reason     text,
    failure_message    text,
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL
);
CREATE UNIQUE INDEX adapter_login_sessions_in_flight ON adapter_login_sessions (company_id, adapter_type)
    WHERE status IN ('starting', 'waiting_for_user');
