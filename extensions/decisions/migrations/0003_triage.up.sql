-- Triage, retention and archive state of attention items (REFERENCE.md 5 "Decision queues":
-- decision-triage, decision-retention, archive and revive, decision-archive-proposals). An
-- item is named by (sourceKind, sourceId) like a queue item; the state is the company's,
-- whichever queues hold the item.

CREATE TABLE decision_item_states (
    company_id           uuid NOT NULL,
    source_kind          text NOT NULL,
    source_id            text NOT NULL,
    decide_by            text,
    decide_by_date       date,
    snoozed_until        timestamptz,
    keep                 boolean NOT NULL DEFAULT false,
    archived_at          timestamptz,
    archived_by_type     text,
    archived_by_agent_id uuid,
    archived_by_user_id  text,
    archive_reason       text,
    updated_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (company_id, source_kind, source_id)
);

CREATE TABLE decision_archive_proposal_batches (
    id              uuid PRIMARY KEY,
    company_id      uuid NOT NULL,
    idempotency_key text,
    payload_hash    text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE UNIQUE INDEX decision_archive_proposal_batches_key ON decision_archive_proposal_batches (company_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE TABLE decision_archive_proposals (
    id                   uuid PRIMARY KEY,
    company_id           uuid NOT NULL,
    batch_id             uuid NOT NULL REFERENCES decision_archive_proposal_batches (id) ON DELETE CASCADE,
    position             integer NOT NULL,
    source_kind          text NOT NULL,
    source_id            text NOT NULL,
    reason               text,
    status               text NOT NULL DEFAULT 'pending',
    proposed_by_type     text NOT NULL,
    proposed_by_agent_id uuid,
    proposed_by_user_id  text,
    proposed_by_run_id   text,
    created_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    resolved_at          timestamptz,
    CONSTRAINT decision_archive_proposals_status_check CHECK (status IN ('pending', 'accepted', 'rejected'))
);
CREATE INDEX decision_archive_proposals_item_idx ON decision_archive_proposals (company_id, source_kind, source_id);
CREATE INDEX decision_archive_proposals_company_idx ON decision_archive_proposals (company_id, created_at DESC, id);

-- The attention feed offers a company's open decisions to the seeded questions queue.
CREATE INDEX decisions_company_open_idx ON decisions (company_id, created_at) WHERE status = 'open';

-- The list's targetIssueId filter (target_snapshots ? id) finds rare targets without a scan.
CREATE INDEX decisions_target_snapshots_idx ON decisions USING gin (target_snapshots);

-- How far the attention feed has offered a company's open decisions (by created_at), so a
-- build reads only what is new (plus a minute of overlap for late commits).
CREATE TABLE decision_feed_marks (
    company_id uuid PRIMARY KEY,
    seen_until timestamptz NOT NULL
);
