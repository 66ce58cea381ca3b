-- The adapter registry's operator state, per adapter type: whether an installed override of
-- a built-in type is paused (new runs go to the built-in) and whether the type is disabled
-- (hidden from creation menus, still runs for existing agents). Overrides themselves are
-- extensions (kernel.extensions); a row here outlives restarts and is shared by every node.
CREATE TABLE kernel.adapter_settings (
    adapter_type    text PRIMARY KEY,
    override_paused boolean NOT NULL DEFAULT false,
    disabled        boolean NOT NULL DEFAULT false,
    updated_at      timestamptz NOT NULL DEFAULT now()
);
