package statuscards

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// Generation: every compile and every summary update is a task (an issue of the work owner)
// assigned to the card's designated agent, who is woken through the agents owner. The card
// holds at most one generation at a time: generating_entry_id is claimed with a conditional
// UPDATE before the task is created, so two requests, or two nodes' schedulers, never start
// the same update twice; the task's idempotency key is the ledger entry's id.

// errAlreadyGenerating says the card already has a generation in flight.
var errAlreadyGenerating = errors.New("status card already generating")

// resolved is the builtinagents.resolve answer.
type resolved struct {
	Key        string `json:"key"`
	AgentID    string `json:"agentId"`
	State      string `json:"state"`
	Paused     bool   `json:"paused"`
	Configured bool   `json:"configured"`
}

// designatedAgent returns the agent that compiles and summarizes a card: its agentId
// override, or the built-in summarizer. A summarizer that is missing or not configured is
// spec part 1's 422 summarizer_not_configured (status cards speak for themselves there,
// over part 2's general 412 for features that need a built-in); a paused one answers with
// the built_in_agent_paused warning.
func (x *StatusCards) designatedAgent(ctx context.Context, c *Card) (string, string, error) {
	if c.AgentID != nil {
		return *c.AgentID, "", nil
	}
	var r resolved
	err := x.host.Call(ctx, "builtinagents.resolve", sdk.SystemActor(), c.CompanyID, map[string]string{"key": builtInSummarizer}, &r)
	if err != nil && !sdk.IsMethodNotProvided(err) && statusOf(err) == 0 {
		x.log.Warn("error resolving the built-in summarizer", "company", c.CompanyID, "error", err)
	}
	if err != nil || !r.Configured || !sdk.IsUUID(r.AgentID) {
		status := map[string]any{"key": builtInSummarizer, "state": "missing", "configured": false}
		if err == nil {
			status["state"], status["paused"] = r.State, r.Paused
		}
		return "", "", &sdk.Error{Status: http.StatusUnprocessableEntity, Message: msgSummarizerMissing, Code: codeNotConfigured,
			Details: map[string]any{"builtInAgent": status}}
	}
	if r.Paused {
		return r.AgentID, warningPaused, nil
	}
	return r.AgentID, "", nil
}

// enqueueParams describe one generation.
type enqueueParams struct {
	kind, trigger string
	changes       []Change
	// fingerprint is the watched set the update covers (full and incremental).
	fingerprint Fingerprint
	now         time.Time
	// reuseIssueID reopens a blocked task as a fresh run instead of creating one.
	reuseIssueID string
}

// enqueue starts a generation of a card: it claims the card, records a running ledger entry,
// creates the task assigned to the designated agent and wakes it. It returns the card after
// the claim, the task and the paused warning; errAlreadyGenerating when another generation
// holds the card. When the task cannot be created or the agent woken, the claim and the entry
// are undone and the error returned.
func (x *StatusCards) enqueue(ctx context.Context, c *Card, p *enqueueParams) (*Card, *issueView, string, error) {
	agentID, warning, err := x.designatedAgent(ctx, c)
	if err != nil {
		return nil, nil, "", err
	}
	entryID := newID()
	changes := p.changes
	if changes == nil {
		changes = []Change{}
	}
	changesJSON, err := json.Marshal(changes)
	if err != nil {
		return nil, nil, "", fmt.Errorf("error encoding changes: %w", err)
	}
	var fpJSON []byte
	if p.fingerprint != nil {
		if fpJSON, err = json.Marshal(p.fingerprint); err != nil {
			return nil, nil, "", fmt.Errorf("error encoding fingerprint: %w", err)
		}
	}
	var prompt *string
	if p.kind == kindCompile {
		prompt = &c.InterestPrompt
	}
	err = pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE status_cards SET generating_entry_id = $2 WHERE id = $1 AND generating_entry_id IS NULL
			AND archived_at IS NULL`, c.ID, entryID)
		if err != nil {
			return fmt.Errorf("error claiming status card %s: %w", c.ID, err)
		}
		if tag.RowsAffected() == 0 {
			return errAlreadyGenerating
		}
		_, err = tx.Exec(ctx, `INSERT INTO status_card_updates (id, company_id, card_id, kind, trigger, status, agent_id, changes,
			query_version, prompt, fingerprint, started_at) VALUES ($1, $2, $3, $4, $5, 'running', $6, $7, $8, $9, $10, $11)`,
			entryID, c.CompanyID, c.ID, p.kind, p.trigger, agentID, changesJSON, c.QueryVersion, prompt, fpJSON, p.now)
		if err != nil {
			return fmt.Errorf("error recording update of status card %s: %w", c.ID, err)
		}
		return nil
	})
	if err != nil {
		return nil, nil, "", err
	}
	iss, err := x.startTask(ctx, c, entryID, agentID, p)
	if err != nil {
		if _, uerr := x.pool.Exec(ctx, `WITH e AS (DELETE FROM status_card_updates WHERE id = $2)
			UPDATE status_cards SET generating_entry_id = NULL WHERE id = $1 AND generating_entry_id = $2`, c.ID, entryID); uerr != nil {
			err = errors.Join(err, uerr)
		}
		return nil, nil, "", err
	}
	state := c.State
	if p.kind == kindCompile {
		state = stateCompiling
	}
	out, err := scanCard(x.pool.QueryRow(ctx, `WITH e AS (UPDATE status_card_updates SET generation_issue_id = $3 WHERE id = $2)
		UPDATE status_cards SET generating_issue_id = $3, state = $4, failure_reason = NULL, updated_at = $5
		WHERE id = $1 AND generating_entry_id = $2 RETURNING `+cardCols, c.ID, entryID, iss.ID, state, p.now))
	if errors.Is(err, pgx.ErrNoRows) {
		// Archived or reconfigured meanwhile: the task is no longer the card's.
		_ = x.setIssueStatus(ctx, c.CompanyID, iss.ID, "cancelled")
		return nil, nil, "", errAlreadyGenerating
	}
	if err != nil {
		return nil, nil, "", fmt.Errorf("error recording the generation task of status card %s: %w", c.ID, err)
	}
	return out, iss, warning, nil
}

// startTask creates (or reopens) the generation task assigned to the agent and wakes it.
func (x *StatusCards) startTask(ctx context.Context, c *Card, entryID, agentID string, p *enqueueParams) (*issueView, error) {
	var iss issueView
	if p.reuseIssueID != "" {
		if err := x.host.Call(ctx, "work.issues.update", sdk.SystemActor(), c.CompanyID, map[string]any{"id": p.reuseIssueID,
			"status": "todo", "assigneeAgentId": agentID}, &iss); err != nil {
			return nil, fmt.Errorf("error reopening the generation task of status card %s: %v", c.ID, err)
		}
		// The update answers {issue, changes, comment}; read the issue itself.
		got, err := x.getIssue(ctx, c.CompanyID, p.reuseIssueID)
		if err != nil || got == nil {
			return nil, fmt.Errorf("error reading the reopened generation task of status card %s: %w", c.ID, err)
		}
		iss = *got
	} else {
		in := map[string]any{
			"title": taskTitle(c, p.kind), "description": taskDescription(c, p), "status": "todo", "priority": "medium",
			"assigneeAgentId": agentID, "originKind": "status_card", "originId": c.ID, "idempotencyKey": "status-card:" + entryID,
		}
		if err := x.host.Call(ctx, "work.issues.create", sdk.SystemActor(), c.CompanyID, in, &iss); err != nil {
			return nil, fmt.Errorf("error creating the generation task of status card %s: %v", c.ID, err)
		}
	}
	wake := map[string]any{"agentId": agentID, "companyId": c.CompanyID, "source": "assignment", "reason": "issue_assigned",
		"triggerDetail": "system",
		"payload":       map[string]any{"issueId": iss.ID, "statusCardId": c.ID, "kind": p.kind},
		// The work owner wakes the assignee with the same key; whichever lands first wins.
		"idempotencyKey": "issue_assigned:" + iss.ID + ":" + agentID}
	if p.reuseIssueID != "" {
		wake["idempotencyKey"] = "status-card-rekick:" + entryID
	}
	if err := x.host.Call(ctx, "agents.wakeup", sdk.SystemActor(), c.CompanyID, wake, nil); err != nil {
		_ = x.setIssueStatus(ctx, c.CompanyID, iss.ID, "cancelled")
		return nil, fmt.Errorf("error waking the summarizer of status card %s: %v", c.ID, err)
	}
	return &iss, nil
}

// taskTitle is the title of a generation task.
func taskTitle(c *Card, kind string) string {
	name := deref(c.Title)
	if name == "" {
		name = excerpt(c.InterestPrompt, 80)
	}
	switch kind {
	case kindCompile:
		return "Compile status card: " + name
	case kindFull:
		return "Rebuild status card summary: " + name
	}
	return "Update status card summary: " + name
}

// taskDescription tells the designated agent what to do and where to write it.
func taskDescription(c *Card, p *enqueueParams) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Status card %s (%s update).\n\n", c.ID, p.kind)
	fmt.Fprintf(&b, "Interest prompt:\n\n%s\n\n", excerpt(c.InterestPrompt, issueDescExcerpt))
	switch p.kind {
	case kindCompile:
		b.WriteString("Compile the prompt into 1-10 company-search queries with PUT /api/status-cards/" + c.ID + "/query " +
			"{queries, title, changeSummary, generationIssueId}, then write the first summary with PUT /api/status-cards/" +
			c.ID + "/summary {markdown, changeSummary, generationIssueId, title?, model?}.\n")
	case kindFull:
		b.WriteString("Rebuild the whole summary from the card's watched issues (GET /api/status-cards/" + c.ID + "/dry-run " +
			"lists them) and write it with PUT /api/status-cards/" + c.ID + "/summary.\n")
	default:
		b.WriteString("Update the summary for the changes below and write it with PUT /api/status-cards/" + c.ID + "/summary.\n\n")
		for i, ch := range p.changes {
			if i == changesInDescMax {
				fmt.Fprintf(&b, "- … and %d more\n", len(p.changes)-i)
				break
			}
			fmt.Fprintf(&b, "- %s %s: %v → %v\n", ch.Identifier, ch.ChangeKind, ch.From, ch.To)
		}
	}
	return b.String()
}

// excerpt cuts s to at most n characters.
func excerpt(s string, n int) string {
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// cancelGeneration ends a card's in-flight generation: the running entry fails with reason,
// the card lets go of it, and the task is cancelled (after the card let go, so the task's
// end does not move the card to error).
func (x *StatusCards) cancelGeneration(ctx context.Context, tx pgx.Tx, c *Card, reason string, now time.Time) (string, error) {
	if c.generatingEntryID == nil {
		return "", nil
	}
	if _, err := tx.Exec(ctx, `UPDATE status_card_updates SET status = 'failed', error = $2, finished_at = $3
		WHERE id = $1 AND status = 'running'`, *c.generatingEntryID, reason, now); err != nil {
		return "", fmt.Errorf("error failing the update of status card %s: %w", c.ID, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE status_cards SET generating_entry_id = NULL, generating_issue_id = NULL WHERE id = $1`, c.ID); err != nil {
		return "", fmt.Errorf("error releasing status card %s: %w", c.ID, err)
	}
	return deref(c.GeneratingIssueID), nil
}
