package work

import (
	"context"
	"fmt"

	"github.com/keelhq/keel/sdk"
)

// Provided method of the dashboard snapshot (spec part 1 "Dashboard snapshot"): the
// dashboard extension asks the work graph once per snapshot for its task, approval and
// budget-paused project counts.
func init() {
	addMethods(map[string]method{
		"dashboardCounts": {
			ReadOnly: true,
			Description: "Count a company's work for the dashboard. Input: {companyId (defaults to the call's company)}. Output: " +
				"{open (backlog, todo, in_progress, in_review and blocked issues; hidden issues never count), inProgress, blocked, done, " +
				"pendingApprovals (approvals with status pending), pausedProjectsByBudget (unarchived projects with pauseReason budget)}.",
			Call: (*Work).methodDashboardCounts,
		},
	})
}

// DashboardCounts is the output of work.dashboardCounts.
type DashboardCounts struct {
	// Open counts every non-terminal issue: backlog, todo, in_progress, in_review, blocked.
	Open int64 `json:"open"`
	// InProgress counts issues in in_progress.
	InProgress int64 `json:"inProgress"`
	// Blocked counts issues in blocked.
	Blocked int64 `json:"blocked"`
	// Done counts issues in done.
	Done int64 `json:"done"`
	// PendingApprovals counts approvals in pending status.
	PendingApprovals int64 `json:"pendingApprovals"`
	// PausedProjectsByBudget counts unarchived projects paused by budget enforcement.
	PausedProjectsByBudget int64 `json:"pausedProjectsByBudget"`
}

// dashboardCountsSQL counts in one statement: the issue counts (hidden issues left out)
// come from one scan of the company's partial (company_id, status, …) index, the approvals and projects from their company
// indexes.
const dashboardCountsSQL = `SELECT
	count(*) FILTER (WHERE status IN ('backlog', 'todo', 'in_progress', 'in_review', 'blocked')),
	count(*) FILTER (WHERE status = 'in_progress'),
	count(*) FILTER (WHERE status = 'blocked'),
	count(*) FILTER (WHERE status = 'done'),
	(SELECT count(*) FROM approvals WHERE company_id = $1 AND status = 'pending'),
	(SELECT count(*) FROM projects WHERE company_id = $1 AND pause_reason = 'budget' AND archived_at IS NULL)
FROM issues WHERE company_id = $1 AND hidden_at IS NULL`

func (w *Work) methodDashboardCounts(ctx context.Context, call *sdk.MethodCall) (any, error) {
	ctx = issuesMethodContext(ctx, call)
	var in struct {
		CompanyID string `json:"companyId"`
	}
	if err := issuesMethodDecode(call, &in); err != nil {
		return nil, err
	}
	companyID, err := issuesMethodCompany(ctx, call, in.CompanyID)
	if err != nil {
		return nil, err
	}
	return w.dashboardCounts(ctx, companyID)
}

// dashboardCounts reads a company's dashboard counts.
func (w *Work) dashboardCounts(ctx context.Context, companyID string) (*DashboardCounts, error) {
	var c DashboardCounts
	err := w.pool.QueryRow(ctx, dashboardCountsSQL, companyID).
		Scan(&c.Open, &c.InProgress, &c.Blocked, &c.Done, &c.PendingApprovals, &c.PausedProjectsByBudget)
	if err != nil {
		return nil, fmt.Errorf("error counting work of company %s for the dashboard: %w", companyID, err)
	}
	return &c, nil
}
