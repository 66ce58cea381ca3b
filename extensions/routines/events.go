package routines

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/migrate"
)

// Run statuses follow their execution issues: the extension subscribes to issue.updated
// (the activity log is the event stream, delivered at least once through the job queue),
// and a status change of an execution issue moves the runs that created it:
//   - done: issue_created → completed;
//   - cancelled: issue_created → failed (failureReason "execution_issue_cancelled");
//   - reopened (done or cancelled → an open status): back to issue_created.
// Coalesced and skipped runs are final and stay as they are.

// issueUpdatedEvent is the part of an issue.updated activity entry routines read.
type issueUpdatedEvent struct {
	EntityType string `json:"entityType"`
	EntityID   string `json:"entityId"`
	Details    struct {
		Changes map[string]struct {
			From any `json:"from"`
			To   any `json:"to"`
		} `json:"changes"`
	} `json:"details"`
}

func (x *Routines) onEvent(ctx context.Context, ev *sdk.Event) error {
	if ev.Type == "company.deleted" && ev.From("kernel") && ev.CompanyID != "" {
		// A deleted company's routines, triggers, runs and revisions go with it.
		_, err := migrate.PurgeCompany(ctx, x.pool, Schema, ev.CompanyID)
		return err
	}
	// Only the work extension's own issue.updated counts, and only for its company's runs.
	if ev.Type != "issue.updated" || !ev.From("work") || !isUUID(ev.CompanyID) {
		return nil
	}
	var e issueUpdatedEvent
	if err := json.Unmarshal(ev.Payload, &e); err != nil || e.EntityType != "issue" || !isUUID(e.EntityID) {
		return nil
	}
	ch, ok := e.Details.Changes["status"]
	if !ok {
		return nil
	}
	to, _ := ch.To.(string)
	var sql string
	switch {
	case to == "done":
		sql = `UPDATE routine_runs SET status = 'completed', completed_at = clock_timestamp(), updated_at = clock_timestamp()
			WHERE linked_issue_id = $1 AND company_id = $2 AND status = 'issue_created' RETURNING ` + runCols
	case to == "cancelled":
		sql = `UPDATE routine_runs SET status = 'failed', failure_reason = '` + reasonIssueCancelled + `',
			completed_at = clock_timestamp(), updated_at = clock_timestamp()
			WHERE linked_issue_id = $1 AND company_id = $2 AND status = 'issue_created' RETURNING ` + runCols
	case strings.Contains(openIssueStatuses, to) && to != "":
		sql = `UPDATE routine_runs SET status = 'issue_created', failure_reason = NULL, completed_at = NULL, updated_at = clock_timestamp()
			WHERE linked_issue_id = $1 AND company_id = $2 AND coalesced_into_run_id IS NULL AND (status = 'completed'
			OR (status = 'failed' AND failure_reason = '` + reasonIssueCancelled + `')) RETURNING ` + runCols
	default:
		return nil
	}
	rows, err := x.pool.Query(ctx, sql, strings.ToLower(e.EntityID), ev.CompanyID)
	if err != nil {
		return fmt.Errorf("error syncing routine runs of issue %s: %w", e.EntityID, err)
	}
	runs, err := scanRuns(rows)
	if err != nil {
		return err
	}
	for _, run := range runs {
		rt, err := routineGet(ctx, x.pool, run.RoutineID, false)
		if err != nil || rt == nil {
			continue
		}
		details := map[string]any{"routineId": run.RoutineID, "status": run.Status, "linkedIssueId": run.LinkedIssueID}
		if run.FailureReason != nil {
			details["failureReason"] = *run.FailureReason
		}
		x.activityBy(ctx, nil, actorScheduler, run.CompanyID, "routine_run.updated", "routine_run", run.ID, withProject(rt.ProjectID, details))
	}
	return nil
}
