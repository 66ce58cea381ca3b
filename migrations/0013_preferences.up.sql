-- Personal preferences of board users: sidebar orders (one row for the instance level, with
-- company_id NULL, and one per company) and inbox dismissals (a user's dismissed or snoozed
-- inbox items in one company, keyed by the item's prefixed key).
CREATE TABLE kernel.sidebar_preferences (
    user_id     text NOT NULL REFERENCES kernel.users (id) ON DELETE CASCADE,
    company_id  uuid REFERENCES kernel.companies (id) ON DELETE CASCADE,
    ordered_ids jsonb NOT NULL DEFAULT '[]'::jsonb,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX sidebar_preferences_instance_idx ON kernel.sidebar_preferences (user_id) WHERE company_id IS NULL;
CREATE UNIQUE INDEX sidebar_preferences_company_idx ON kernel.sidebar_preferences (user_id, company_id) WHERE company_id IS NOT NULL;

CREATE TABLE kernel.inbox_dismissals (
    id            uuid PRIMARY KEY,
    company_id    uuid NOT NULL REFERENCES kernel.companies (id) ON DELETE CASCADE,
    user_id       text NOT NULL REFERENCES kernel.users (id) ON DELETE CASCADE,
    item_key      text NOT NULL,
    kind          text NOT NULL DEFAULT 'dismiss',
    snoozed_until timestamptz,
    dismissed_at  timestamptz NOT NULL DEFAULT now(),
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (company_id, user_id, item_key)
);

-- A bootstrap_ceo invite belongs to no company: accepting it makes a signed-in person the
-- instance's first admin (REFERENCE.md 2.11 inviteType company_join|bootstrap_ceo).
ALTER TABLE kernel.invites ALTER COLUMN company_id DROP NOT NULL;
