-- People: company invites, join requests (a person or an outside agent asking to join a
-- company through an invite) and one-time board claims. Tokens and secrets are stored only
-- as SHA-256 hashes.
CREATE TABLE kernel.invites (
    id                  uuid PRIMARY KEY,
    company_id          uuid NOT NULL REFERENCES kernel.companies (id) ON DELETE CASCADE,
    invite_type         text NOT NULL DEFAULT 'company_join',
    token_hash          text NOT NULL UNIQUE,
    allowed_join_types  text NOT NULL DEFAULT 'both',
    membership_role     text NOT NULL DEFAULT 'operator',
    defaults_payload    jsonb NOT NULL DEFAULT '{}'::jsonb,
    agent_message       text,
    invited_by_user_id  text,
    expires_at          timestamptz NOT NULL,
    accepted_at         timestamptz,
    accepted_by_user_id text,
    revoked_at          timestamptz,
    revoked_by_user_id  text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX invites_company_idx ON kernel.invites (company_id, created_at DESC);

CREATE TABLE kernel.join_requests (
    id                     uuid PRIMARY KEY,
    company_id             uuid NOT NULL REFERENCES kernel.companies (id) ON DELETE CASCADE,
    invite_id              uuid REFERENCES kernel.invites (id) ON DELETE SET NULL,
    request_type           text NOT NULL,
    status                 text NOT NULL DEFAULT 'pending_approval',
    requesting_user_id     text,
    agent_name             text,
    adapter_type           text,
    capabilities           text,
    agent_defaults         jsonb NOT NULL DEFAULT '{}'::jsonb,
    claim_secret_hash      text,
    claim_secret_expires_at timestamptz,
    claimed_at             timestamptz,
    created_agent_id       uuid,
    decided_by_user_id     text,
    decided_at             timestamptz,
    decision_note          text,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX join_requests_company_idx ON kernel.join_requests (company_id, status, created_at DESC);

CREATE TABLE kernel.board_claims (
    id                  uuid PRIMARY KEY,
    token_hash          text NOT NULL UNIQUE,
    code_hash           text NOT NULL,
    expires_at          timestamptz NOT NULL,
    claimed_at          timestamptz,
    claimed_by_user_id  text,
    created_at          timestamptz NOT NULL DEFAULT now()
);
