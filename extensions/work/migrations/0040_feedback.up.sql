-- Feedback votes on agent work. A row is both the voter's vote on one agent-authored target
-- (a comment or a document revision of an issue) and its feedback trace: the target's label,
-- the sharing status the company's data-sharing setting gave it when the vote was cast, and a
-- payload snapshot of the target at that time. A second vote by the same voter on the same
-- target replaces the first.

CREATE TABLE feedback_votes (
    id               uuid PRIMARY KEY,
    company_id       uuid NOT NULL,
    issue_id         uuid NOT NULL REFERENCES issues (id) ON DELETE CASCADE,
    target_type      text NOT NULL,
    target_id        uuid NOT NULL,
    target_label     text NOT NULL,
    author_agent_id  uuid,
    voter_user_id    text NOT NULL,
    vote             text NOT NULL,
    reason           text,
    status           text NOT NULL,
    payload          jsonb,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (target_type, target_id, voter_user_id)
);
CREATE INDEX feedback_votes_issue_idx ON feedback_votes (issue_id, created_at DESC);
CREATE INDEX feedback_votes_company_idx ON feedback_votes (company_id, created_at DESC, id DESC);
