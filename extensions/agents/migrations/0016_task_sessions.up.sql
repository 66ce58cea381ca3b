-- Task sessions (REFERENCE.md 3 step 4): the session an adapter returned after a run (a
-- local CLI's session id and the cwd it was made in), kept per agent and task key (the
-- issue id; '' for runs without a task) and handed back to the adapter on the task's next
-- run, so the CLI resumes its conversation. A session of another adapter type is ignored.
CREATE TABLE agent_task_sessions (
    agent_id           uuid        NOT NULL,
    company_id         uuid        NOT NULL,
    task_key           text        NOT NULL,
    adapter_type       text        NOT NULL,
    session_id         text,
    session_params     jsonb,
    session_display_id text,
    last_run_id        uuid,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_id, task_key)
);
