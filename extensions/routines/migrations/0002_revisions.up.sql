-- Routine revisions (REFERENCE.md 5 "routines are revisioned") and the remaining routine
-- and run fields: env, folderId, the latest revision of a routine, and a run's revision,
-- responsible user and dispatch fingerprint.

ALTER TABLE routines
    ADD COLUMN folder_id              uuid,
    ADD COLUMN env                    jsonb,
    ADD COLUMN latest_revision_id     uuid,
    ADD COLUMN latest_revision_number integer NOT NULL DEFAULT 0;

-- A revision is the routine's configurable fields and its triggers' public settings after a
-- change; it never holds a secret (webhook triggers are recorded by public id only).
CREATE TABLE routine_revisions (
    id                        uuid PRIMARY KEY,
    company_id                uuid NOT NULL,
    routine_id                uuid NOT NULL REFERENCES routines (id) ON DELETE CASCADE,
    revision_number           integer NOT NULL,
    title                     text NOT NULL,
    description               text,
    snapshot                  jsonb NOT NULL,
    change_summary            text,
    restored_from_revision_id uuid,
    created_by_agent_id       uuid,
    created_by_user_id        text,
    created_by_run_id         uuid,
    responsible_user_id       text,
    created_at                timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT routine_revisions_number_key UNIQUE (routine_id, revision_number),
    CONSTRAINT routine_revisions_number_check CHECK (revision_number > 0)
);

ALTER TABLE routine_runs
    ADD COLUMN routine_revision_id  uuid,
    ADD COLUMN responsible_user_id  text,
    ADD COLUMN dispatch_fingerprint text;

-- Routines created before revisions existed start their history with revision 1, a
-- snapshot of their current state.
WITH first AS (
    SELECT r.id AS routine_id, gen_random_uuid() AS revision_id
    FROM routines r WHERE r.latest_revision_id IS NULL
), inserted AS (
    INSERT INTO routine_revisions (id, company_id, routine_id, revision_number, title, description, snapshot, change_summary,
        created_by_agent_id, created_by_user_id, responsible_user_id, created_at)
    SELECT f.revision_id, r.company_id, r.id, 1, r.title, r.description,
        jsonb_build_object('version', 1,
            'routine', jsonb_build_object('id', r.id, 'companyId', r.company_id, 'projectId', r.project_id,
                'folderId', r.folder_id, 'goalId', r.goal_id, 'parentIssueId', r.parent_issue_id, 'title', r.title,
                'description', r.description, 'assigneeAgentId', r.assignee_agent_id, 'priority', r.priority,
                'status', r.status, 'concurrencyPolicy', r.concurrency_policy, 'catchUpPolicy', r.catch_up_policy,
                'activityGatePolicy', r.activity_gate_policy, 'activityGateScope', r.activity_gate_scope,
                'variables', r.variables, 'env', r.env, 'responsibleUserId', r.responsible_user_id),
            'triggers', COALESCE((SELECT jsonb_agg(jsonb_build_object('id', t.id, 'kind', t.kind, 'label', t.label,
                'enabled', t.enabled, 'publicId', t.public_id, 'timezone', t.timezone, 'signingMode', t.signing_mode,
                'cronExpression', t.cron_expression, 'replayWindowSec', t.replay_window_sec) ORDER BY t.created_at, t.id)
                FROM routine_triggers t WHERE t.routine_id = r.id), '[]'::jsonb)),
        'Revision history started', r.created_by_agent_id, r.created_by_user_id, r.responsible_user_id, r.updated_at
    FROM first f JOIN routines r ON r.id = f.routine_id
    RETURNING id, routine_id
)
UPDATE routines r SET latest_revision_id = i.id, latest_revision_number = 1
FROM inserted i WHERE r.id = i.routine_id;
