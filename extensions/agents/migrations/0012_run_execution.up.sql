-- Run execution no longer holds a job worker: start-runs admits a queued run (claimed_at),
-- an executor takes it (executor_id) and it turns running once its adapter started it.
-- The process identity lets a restarted node find and kill a survivor of its own runs:
-- the group, and the leader's start time in clock ticks since boot (/proc/<pid>/stat
-- field 22) on the boot named by process_boot_id, so a recycled pid is never signalled.
ALTER TABLE heartbeat_runs
    ADD COLUMN claimed_at          timestamptz,
    ADD COLUMN process_group_id    integer,
    ADD COLUMN process_start_ticks bigint,
    ADD COLUMN process_boot_id     text;
CREATE INDEX heartbeat_runs_claimed_idx ON heartbeat_runs (agent_id) WHERE status = 'queued' AND claimed_at IS NOT NULL;
