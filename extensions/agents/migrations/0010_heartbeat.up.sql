-- Heartbeat engine: wakeup requests, heartbeat runs and their events (REFERENCE 2.7, 2.8).
CREATE TABLE agent_wakeup_requests (
    id                       uuid PRIMARY KEY,
    company_id               uuid NOT NULL,
    agent_id                 uuid NOT NULL,
    source                   text NOT NULL DEFAULT 'on_demand',
    trigger_detail           text,
    reason                   text,
    payload                  jsonb NOT NULL DEFAULT '{}'::jsonb,
    status                   text NOT NULL DEFAULT 'queued',
    coalesced_count          integer NOT NULL DEFAULT 0,
    requested_by_actor_type  text,
    requested_by_actor_id    text,
    idempotency_key          text,
    run_id                   uuid,
    requested_at             timestamptz NOT NULL DEFAULT now(),
    claimed_at               timestamptz,
    finished_at              timestamptz,
    error                    text
);
CREATE INDEX agent_wakeup_requests_agent_idx ON agent_wakeup_requests (agent_id, requested_at DESC);
CREATE INDEX agent_wakeup_requests_idem_idx ON agent_wakeup_requests (agent_id, idempotency_key) WHERE idempotency_key IS NOT NULL;

CREATE TABLE heartbeat_runs (
    id                        uuid PRIMARY KEY,
    company_id                uuid NOT NULL,
    agent_id                  uuid NOT NULL,
    invocation_source         text NOT NULL DEFAULT 'on_demand',
    trigger_detail            text,
    status                    text NOT NULL DEFAULT 'queued'
        CHECK (status IN ('queued', 'scheduled_retry', 'running', 'succeeded', 'failed', 'cancelled', 'timed_out', 'interrupted')),
    started_at                timestamptz,
    finished_at               timestamptz,
    error                     text,
    error_code                text,
    wakeup_request_id         uuid,
    adapter_type              text,
    exit_code                 integer,
    signal                    text,
    process_pid               integer,
    process_started_at        timestamptz,
    usage_json                jsonb,
    result_json               jsonb,
    session_id_before         text,
    session_id_after          text,
    log_store                 text NOT NULL DEFAULT 'local_file',
    log_ref                   text,
    log_bytes                 bigint NOT NULL DEFAULT 0,
    log_sha256                text,
    stdout_excerpt            text,
    stderr_excerpt            text,
    last_output_at            timestamptz,
    last_output_seq           bigint NOT NULL DEFAULT 0,
    last_output_stream        text,
    last_output_bytes         bigint NOT NULL DEFAULT 0,
    retry_of_run_id           uuid,
    process_loss_retry_count  integer NOT NULL DEFAULT 0,
    context_snapshot          jsonb NOT NULL DEFAULT '{}'::jsonb,
    -- executor_id names the engine instance executing the run; executor_seen_at is its
    -- liveness beat. The reaper treats a running run whose beat is stale as process-lost.
    executor_id               text,
    executor_host             text,
    executor_seen_at          timestamptz,
    created_at                timestamptz NOT NULL DEFAULT now(),
    updated_at                timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX heartbeat_runs_company_idx ON heartbeat_runs (company_id, created_at DESC);
CREATE INDEX heartbeat_runs_agent_status_idx ON heartbeat_runs (agent_id, status, created_at);
CREATE INDEX heartbeat_runs_status_idx ON heartbeat_runs (status) WHERE status IN ('queued', 'running');

CREATE TABLE heartbeat_run_events (
    id          bigserial PRIMARY KEY,
    run_id      uuid NOT NULL,
    agent_id    uuid NOT NULL,
    seq         bigint NOT NULL,
    event_type  text NOT NULL,
    stream      text,
    level       text,
    message     text,
    payload     jsonb,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX heartbeat_run_events_run_idx ON heartbeat_run_events (run_id, seq, id);
