-- Built-in agents (spec part 2 "Built-in agent definition", "Built-in agent lifecycle
-- state"): one row per company and registry key that was ever provisioned. The agent itself
-- lives with the agents owner, its routines with the routines owner and its approval with
-- the work owner (no foreign keys to them); this table holds which ones belong to the
-- built-in, and the registry-managed bundle pieces the extension keeps itself.
CREATE TABLE builtin_agents (
    company_id        uuid NOT NULL,
    key               text NOT NULL,
    -- agent_id is the provisioned agent; null before the first provision and after a
    -- rejected approval.
    agent_id          uuid,
    -- approval_id is the board approval of a provision under approval.
    approval_id       uuid,
    -- instructions is the agent's instructions bundle (instructions.md of the registry
    -- unless changed), instructions_hash the registry text it was last reset to.
    instructions      text NOT NULL DEFAULT '',
    instructions_hash text NOT NULL DEFAULT '',
    -- skills maps a bundled skill's name to {markdown, registryHash}.
    skills            jsonb NOT NULL DEFAULT '{}',
    -- routines maps a bundled routine's key to {routineId, triggerId}.
    routines          jsonb NOT NULL DEFAULT '{}',
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (company_id, key)
);

CREATE INDEX builtin_agents_approval ON builtin_agents (approval_id) WHERE approval_id IS NOT NULL;
