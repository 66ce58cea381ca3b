-- An agent's latest run, read per agent by the inbox badge (agents.inboxCounts), comes from
-- this index instead of sorting the agent's runs.
CREATE INDEX IF NOT EXISTS heartbeat_runs_agent_created_idx ON heartbeat_runs (agent_id, created_at DESC);
