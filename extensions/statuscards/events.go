package statuscards

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/migrate"
)

// Events (the activity log is the event stream, delivered at least once through the job
// queue; only the work owner's own issue events count):
//   - a generation task that reaches done, cancelled or blocked before its summary was
//     written fails its update and moves the card to error, with a failureReason that says
//     which;
//   - any other issue event of a company marks its live reactive cards dirty and pushes
//     their evaluation to the end of the debounce (trailing debounce): the scheduler then
//     diffs the watched set and decides.

// issueEvent is the part of an issue activity entry the extension reads.
type issueEvent struct {
	EntityType string `json:"entityType"`
	EntityID   string `json:"entityId"`
	Details    struct {
		Changes map[string]struct {
			From any `json:"from"`
			To   any `json:"to"`
		} `json:"changes"`
		OriginKind string `json:"originKind"`
	} `json:"details"`
}

func (x *StatusCards) onEvent(ctx context.Context, ev *sdk.Event) error {
	if ev.Type == "company.deleted" && ev.From("kernel") && sdk.IsUUID(ev.CompanyID) {
		_, err := migrate.PurgeCompany(ctx, x.pool, Schema, ev.CompanyID)
		return err
	}
	if !ev.From("work") || !sdk.IsUUID(ev.CompanyID) {
		return nil
	}
	var e issueEvent
	if err := json.Unmarshal(ev.Payload, &e); err != nil || e.EntityType != "issue" || !sdk.IsUUID(e.EntityID) {
		return nil
	}
	issueID := strings.ToLower(e.EntityID)
	if e.Details.OriginKind == "status_card" {
		return nil
	}
	// Generation tasks never count as changes of a watched set.
	var isTask bool
	if err := x.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM status_card_updates WHERE generation_issue_id = $1)`,
		issueID).Scan(&isTask); err != nil {
		return fmt.Errorf("error reading status card tasks: %w", err)
	}
	if isTask {
		if ev.Type != "issue.updated" {
			return nil
		}
		ch, ok := e.Details.Changes["status"]
		if !ok {
			return nil
		}
		to, _ := ch.To.(string)
		switch to {
		case "done", "cancelled", "blocked":
			return x.taskEnded(ctx, ev.CompanyID, issueID, to)
		}
		return nil
	}
	return x.markDirty(ctx, ev.CompanyID, time.Now().UTC())
}

// taskEnded fails the in-flight update of the card whose generation task ended without a
// summary and moves the card to error.
func (x *StatusCards) taskEnded(ctx context.Context, companyID, issueID, status string) error {
	reason := fmt.Sprintf("Generation task was %s before the summary was written", status)
	if status == "done" {
		reason = "Generation task was marked done without a summary"
	}
	now := x.now()
	rows, err := x.pool.Query(ctx, `WITH c AS (
			SELECT id, generating_entry_id FROM status_cards WHERE company_id = $1 AND generating_issue_id = $2 FOR UPDATE)
		, e AS (UPDATE status_card_updates u SET status = 'failed', error = $3, finished_at = $4 FROM c
			WHERE u.id = c.generating_entry_id AND u.status = 'running')
		UPDATE status_cards s SET state = 'error', failure_reason = $3, generating_entry_id = NULL, generating_issue_id = NULL,
			updated_at = $4 FROM c WHERE s.id = c.id RETURNING s.id::text`, companyID, issueID, reason, now)
	if err != nil {
		return fmt.Errorf("error failing the generation of task %s: %w", issueID, err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return fmt.Errorf("error failing the generation of task %s: %w", issueID, err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("error failing the generation of task %s: %w", issueID, err)
	}
	rows.Close()
	for _, id := range ids {
		x.activity(ctx, companyID, "status_card.generation_failed", id, map[string]any{"issueId": issueID, "failureReason": reason})
	}
	return nil
}

// markDirty pushes the evaluation of a company's live reactive cards to the end of their
// debounce.
func (x *StatusCards) markDirty(ctx context.Context, companyID string, now time.Time) error {
	_, err := x.pool.Exec(ctx, `UPDATE status_cards SET dirty_at = coalesce(dirty_at, $2),
			next_eval_at = $2 + make_interval(secs => (refresh_policy->>'debounceSeconds')::int)
		WHERE company_id = $1 AND archived_at IS NULL AND refresh_policy->>'mode' = 'reactive'`, companyID, now)
	if err != nil {
		return fmt.Errorf("error marking reactive status cards: %w", err)
	}
	return nil
}
