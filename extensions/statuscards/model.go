package statuscards

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Card states (spec part 1 "Status card state").
const (
	stateCompiling    = "compiling"
	stateActive       = "active"
	stateError        = "error"
	statePausedBudget = "paused_budget"
	statePausedHours  = "paused_hours"
)

// Update-ledger kinds, triggers and statuses.
const (
	kindCompile     = "compile"
	kindFull        = "full"
	kindIncremental = "incremental"

	triggerManual   = "manual"
	triggerInterval = "interval"
	triggerReactive = "reactive"
	triggerRestore  = "restore"

	entryRunning = "running"
	entryOK      = "ok"
	entryFailed  = "failed"
)

// Card is a status card and its API shape; the read routes add the hydrated fields.
type Card struct {
	ID                     string          `json:"id"`
	CompanyID              string          `json:"companyId"`
	CreatedByUserID        *string         `json:"createdByUserId"`
	CreatedByAgentID       *string         `json:"createdByAgentId"`
	Title                  *string         `json:"title"`
	TitlePinned            bool            `json:"titlePinned"`
	InterestPrompt         string          `json:"interestPrompt"`
	Queries                json.RawMessage `json:"queries"`
	QueryVersion           int             `json:"queryVersion"`
	QueryCompiledAt        *time.Time      `json:"queryCompiledAt"`
	QueryCompiledByAgentID *string         `json:"queryCompiledByAgentId"`
	AgentID                *string         `json:"agentId"`
	RefreshPolicy          *RefreshPolicy  `json:"refreshPolicy"`
	State                  string          `json:"state"`
	PendingChangeCount     int             `json:"pendingChangeCount"`
	LastChangeAt           *time.Time      `json:"lastChangeAt"`
	Fingerprint            Fingerprint     `json:"fingerprint"`
	FingerprintAt          *time.Time      `json:"fingerprintAt"`
	MentionedIssueIDs      []string        `json:"mentionedIssueIds"`
	DocumentID             *string         `json:"documentId"`
	LastUpdateRunKind      *string         `json:"lastUpdateRunKind"`
	LastGeneratedAt        *time.Time      `json:"lastGeneratedAt"`
	LastModel              *string         `json:"lastModel"`
	GeneratingIssueID      *string         `json:"generatingIssueId"`
	FailureReason          *string         `json:"failureReason"`
	NextEvalAt             *time.Time      `json:"nextEvalAt"`
	ArchivedAt             *time.Time      `json:"archivedAt"`
	ArchivedByUserID       *string         `json:"archivedByUserId"`
	ArchivedByAgentID      *string         `json:"archivedByAgentId"`
	CreatedAt              time.Time       `json:"createdAt"`
	UpdatedAt              time.Time       `json:"updatedAt"`

	// Hydrated on reads.
	SummaryBody       *string `json:"summaryBody,omitempty"`
	TodayTokens       *int64  `json:"todayTokens,omitempty"`
	TodayCostCents    *int64  `json:"todayCostCents,omitempty"`
	WatchedIssueCount *int    `json:"watchedIssueCount,omitempty"`
	// Warning is built_in_agent_paused when the built-in summarizer is paused.
	Warning string `json:"warning,omitempty"`

	summaryBody       *string
	generatingEntryID *string
	dirtyAt           *time.Time
}

// cardCols are the columns scanCard reads, in order.
const cardCols = `id::text, company_id::text, created_by_user_id, created_by_agent_id::text, title, title_pinned, interest_prompt,
	queries, query_version, query_compiled_at, query_compiled_by_agent_id::text, agent_id::text, refresh_policy, state,
	pending_change_count, last_change_at, fingerprint, fingerprint_at, mentioned_issue_ids, document_id::text, summary_body,
	last_update_run_kind, last_generated_at, last_model, generating_issue_id::text, generating_entry_id::text, failure_reason,
	next_eval_at, dirty_at, archived_at, archived_by_user_id, archived_by_agent_id::text, created_at, updated_at`

// scanCard reads one card row.
func scanCard(row pgx.Row) (*Card, error) {
	c := new(Card)
	var policy, fp []byte
	err := row.Scan(&c.ID, &c.CompanyID, &c.CreatedByUserID, &c.CreatedByAgentID, &c.Title, &c.TitlePinned, &c.InterestPrompt,
		&c.Queries, &c.QueryVersion, &c.QueryCompiledAt, &c.QueryCompiledByAgentID, &c.AgentID, &policy, &c.State,
		&c.PendingChangeCount, &c.LastChangeAt, &fp, &c.FingerprintAt, &c.MentionedIssueIDs, &c.DocumentID, &c.summaryBody,
		&c.LastUpdateRunKind, &c.LastGeneratedAt, &c.LastModel, &c.GeneratingIssueID, &c.generatingEntryID, &c.FailureReason,
		&c.NextEvalAt, &c.dirtyAt, &c.ArchivedAt, &c.ArchivedByUserID, &c.ArchivedByAgentID, &c.CreatedAt, &c.UpdatedAt)
	if err != nil {
		return nil, err
	}
	c.RefreshPolicy = new(RefreshPolicy)
	if err := json.Unmarshal(policy, c.RefreshPolicy); err != nil {
		return nil, fmt.Errorf("error decoding the refresh policy of card %s: %w", c.ID, err)
	}
	if len(fp) > 0 {
		if err := json.Unmarshal(fp, &c.Fingerprint); err != nil {
			return nil, fmt.Errorf("error decoding the fingerprint of card %s: %w", c.ID, err)
		}
	}
	if c.MentionedIssueIDs == nil {
		c.MentionedIssueIDs = []string{}
	}
	if len(c.Queries) == 0 {
		c.Queries = json.RawMessage("[]")
	}
	return c, nil
}

// scanCards reads card rows.
func scanCards(rows pgx.Rows) ([]*Card, error) {
	defer rows.Close()
	out := []*Card{}
	for rows.Next() {
		c, err := scanCard(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading status cards: %w", err)
	}
	return out, nil
}

// Change is one detected change of a watched issue.
type Change struct {
	IssueID    string `json:"issueId"`
	Identifier string `json:"identifier"`
	From       any    `json:"from"`
	To         any    `json:"to"`
	// ChangeKind is new, removed, status, assignee, human_comment or updated.
	ChangeKind string `json:"changeKind"`
}

// Entry is one update-ledger entry.
type Entry struct {
	ID                string     `json:"id"`
	CardID            string     `json:"cardId"`
	Kind              string     `json:"kind"`
	Trigger           string     `json:"trigger"`
	Status            string     `json:"status"`
	GenerationIssueID *string    `json:"generationIssueId"`
	RunID             *string    `json:"runId"`
	Changes           []Change   `json:"changes"`
	InputTokens       int64      `json:"inputTokens"`
	OutputTokens      int64      `json:"outputTokens"`
	CostCents         int64      `json:"costCents"`
	Model             *string    `json:"model"`
	QueryVersion      int        `json:"queryVersion"`
	ChangeSummary     *string    `json:"changeSummary"`
	StartedAt         time.Time  `json:"startedAt"`
	FinishedAt        *time.Time `json:"finishedAt"`
	Error             *string    `json:"error"`

	agentID     *string
	prompt      *string
	fingerprint Fingerprint
}

// entryCols are the columns scanEntry reads, in order.
const entryCols = `id::text, card_id::text, kind, trigger, status, generation_issue_id::text, run_id::text, changes, model,
	query_version, change_summary, started_at, finished_at, error, agent_id::text, prompt, fingerprint`

// scanEntry reads one ledger row.
func scanEntry(row pgx.Row) (*Entry, error) {
	e := new(Entry)
	var changes, fp []byte
	if err := row.Scan(&e.ID, &e.CardID, &e.Kind, &e.Trigger, &e.Status, &e.GenerationIssueID, &e.RunID, &changes, &e.Model,
		&e.QueryVersion, &e.ChangeSummary, &e.StartedAt, &e.FinishedAt, &e.Error, &e.agentID, &e.prompt, &fp); err != nil {
		return nil, err
	}
	e.Changes = []Change{}
	if len(changes) > 0 {
		if err := json.Unmarshal(changes, &e.Changes); err != nil {
			return nil, fmt.Errorf("error decoding the changes of update %s: %w", e.ID, err)
		}
	}
	if len(fp) > 0 {
		if err := json.Unmarshal(fp, &e.fingerprint); err != nil {
			return nil, fmt.Errorf("error decoding the fingerprint of update %s: %w", e.ID, err)
		}
	}
	return e, nil
}

// Revision is a past summary.
type Revision struct {
	ID             string    `json:"id"`
	RevisionNumber int       `json:"revisionNumber"`
	Title          *string   `json:"title"`
	Body           string    `json:"body"`
	ChangeSummary  string    `json:"changeSummary"`
	CreatedAt      time.Time `json:"createdAt"`
}
