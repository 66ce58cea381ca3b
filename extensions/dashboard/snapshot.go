package dashboard

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/keelhq/keel/sdk"
)

func init() {
	table.AddRoutes(route{
		Method: "GET", Path: "/api/companies/{companyId}/dashboard", Response: new(Snapshot), Access: sdk.AccessEither, CompanyFromPath: true,
		Summary: "The company health snapshot: agent, task, cost, approval and budget counts and 14 days of run activity",
		Handle:  handleSnapshot,
	})
}

// Snapshot is the body of GET /api/companies/{companyId}/dashboard
// (reference-samples/dashboard.json).
type Snapshot struct {
	CompanyID        string           `json:"companyId"`
	Agents           AgentCounts      `json:"agents"`
	Tasks            TaskCounts       `json:"tasks"`
	Costs            CostSummary      `json:"costs"`
	PendingApprovals int64            `json:"pendingApprovals"`
	Budgets          BudgetCounts     `json:"budgets"`
	RunActivity      []RunActivityDay `json:"runActivity"`
}

// AgentCounts are disjoint buckets of the company's agents; terminated agents and agents
// pending approval are in none.
type AgentCounts struct {
	// Active counts idle and active agents.
	Active int64 `json:"active"`
	// Running counts agents executing a heartbeat.
	Running int64 `json:"running"`
	// Paused counts intentionally paused agents.
	Paused int64 `json:"paused"`
	// Error counts agents whose last run failed or that are in error status.
	Error int64 `json:"error"`
}

// TaskCounts count the company's issues.
type TaskCounts struct {
	// Open counts every non-terminal issue: backlog, todo, in_progress, in_review, blocked.
	Open int64 `json:"open"`
	// InProgress counts in_progress issues.
	InProgress int64 `json:"inProgress"`
	// Blocked counts blocked issues.
	Blocked int64 `json:"blocked"`
	// Done counts done issues.
	Done int64 `json:"done"`
}

// CostSummary is the current UTC month's spend against the company budget.
type CostSummary struct {
	MonthSpendCents  int64 `json:"monthSpendCents"`
	MonthBudgetCents int64 `json:"monthBudgetCents"`
	// MonthUtilizationPercent is spend divided by budget, times 100, rounded to two
	// decimals; 0 when the budget is 0.
	MonthUtilizationPercent float64 `json:"monthUtilizationPercent"`
}

// BudgetCounts summarize budget enforcement.
type BudgetCounts struct {
	// ActiveIncidents counts open budget incidents.
	ActiveIncidents int64 `json:"activeIncidents"`
	// PendingApprovals counts budget incidents waiting for a board approval.
	PendingApprovals int64 `json:"pendingApprovals"`
	// PausedAgents counts agents paused by budget enforcement.
	PausedAgents int64 `json:"pausedAgents"`
	// PausedProjects counts projects paused by budget enforcement.
	PausedProjects int64 `json:"pausedProjects"`
}

// RunActivityDay counts the heartbeat runs created on one UTC day, as the agents owner
// reports them.
type RunActivityDay struct {
	Date              string           `json:"date"`
	Succeeded         int64            `json:"succeeded"`
	Failed            int64            `json:"failed"`
	Recovered         int64            `json:"recovered"`
	Other             int64            `json:"other"`
	Total             int64            `json:"total"`
	FailedByErrorCode map[string]int64 `json:"failedByErrorCode"`
}

// agentsCounts is the output of agents.dashboardCounts.
type agentsCounts struct {
	Active         int64            `json:"active"`
	Running        int64            `json:"running"`
	Paused         int64            `json:"paused"`
	Error          int64            `json:"error"`
	PausedByBudget int64            `json:"pausedByBudget"`
	RunActivity    []RunActivityDay `json:"runActivity"`
}

// workCounts is the output of work.dashboardCounts.
type workCounts struct {
	Open                   int64 `json:"open"`
	InProgress             int64 `json:"inProgress"`
	Blocked                int64 `json:"blocked"`
	Done                   int64 `json:"done"`
	PendingApprovals       int64 `json:"pendingApprovals"`
	PausedProjectsByBudget int64 `json:"pausedProjectsByBudget"`
}

// costsSummary is the output of costs.dashboardSummary. The utilization is recomputed
// from spend and budget so the snapshot's rounding rule holds whatever the owner sends.
type costsSummary struct {
	MonthSpendCents  int64 `json:"monthSpendCents"`
	MonthBudgetCents int64 `json:"monthBudgetCents"`
	ActiveIncidents  int64 `json:"activeIncidents"`
	PendingApprovals int64 `json:"pendingApprovals"`
}

// companyInput is the input of every owner method the snapshot calls.
type companyInput struct {
	CompanyID string `json:"companyId"`
}

// handleSnapshot serves GET /api/companies/{companyId}/dashboard. The kernel has already
// answered 403 for an actor outside the company and 404 for an unknown company.
func handleSnapshot(d *Dashboard, rw http.ResponseWriter, r *http.Request) {
	companyID := sdk.CompanyIDFrom(r.Context())
	if companyID == "" {
		companyID = r.PathValue("companyId")
	}
	snap, err := d.coalescedSnapshot(r.Context(), strings.ToLower(companyID))
	if err != nil {
		sdk.WriteErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, snap)
}

// coalescedSnapshot shares snapshots among the concurrent requests for a company, so a
// crowd of pollers costs the owners one round of calls at a time, not one per poller. A
// request is answered by a round that started after it arrived, so it always sees its own
// earlier writes. Every caller was authorized for the company by the kernel before its
// request got here, and the owners' answers do not depend on who asks, so sharing leaks
// nothing. Each caller waits on its own context; a round is bounded by snapshotTimeout.
func (d *Dashboard) coalescedSnapshot(ctx context.Context, companyID string) (*Snapshot, error) {
	return d.rounds.do(ctx, companyID, func(ctx context.Context) (*Snapshot, error) {
		ctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
		defer cancel()
		return d.snapshot(ctx, companyID)
	})
}

// snapshotTimeout bounds one round of owner calls.
const snapshotTimeout = 30 * time.Second

// snapshot asks each owner once, concurrently, and composes their answers. An owner that
// is not installed contributes zeros; any other failure fails the snapshot.
func (d *Dashboard) snapshot(ctx context.Context, companyID string) (*Snapshot, error) {
	actor := sdk.ActorFrom(ctx)
	in := companyInput{CompanyID: companyID}
	var (
		ag agentsCounts
		wk workCounts
		co costsSummary
	)
	g, gctx := errgroup.WithContext(ctx)
	ask := func(method string, out any) {
		g.Go(func() error {
			err := d.host.Call(gctx, method, actor, companyID, in, out)
			switch {
			case err == nil, sdk.IsMethodNotProvided(err):
				return nil
			case gctx.Err() != nil:
				return gctx.Err() // a sibling failed first, or the round timed out
			default:
				return d.ownerError(companyID, method, err)
			}
		})
	}
	ask(MethodAgentsCounts, &ag)
	ask(MethodWorkCounts, &wk)
	ask(MethodCostsSummary, &co)
	if err := g.Wait(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, &sdk.Error{Status: http.StatusGatewayTimeout, Code: "dashboard_timeout",
				Message: "Dashboard sources did not answer in time", Source: sdk.SourceDownstream}
		}
		return nil, err
	}

	snap := &Snapshot{
		CompanyID: companyID,
		Agents:    AgentCounts{Active: ag.Active, Running: ag.Running, Paused: ag.Paused, Error: ag.Error},
		Tasks:     TaskCounts{Open: wk.Open, InProgress: wk.InProgress, Blocked: wk.Blocked, Done: wk.Done},
		Costs: CostSummary{MonthSpendCents: co.MonthSpendCents, MonthBudgetCents: co.MonthBudgetCents,
			MonthUtilizationPercent: utilizationPercent(co.MonthSpendCents, co.MonthBudgetCents)},
		PendingApprovals: wk.PendingApprovals,
		Budgets: BudgetCounts{ActiveIncidents: co.ActiveIncidents, PendingApprovals: co.PendingApprovals,
			PausedAgents: ag.PausedByBudget, PausedProjects: wk.PausedProjectsByBudget},
		RunActivity: ag.RunActivity,
	}
	if snap.RunActivity == nil {
		snap.RunActivity = []RunActivityDay{}
	}
	for i := range snap.RunActivity {
		if snap.RunActivity[i].FailedByErrorCode == nil {
			snap.RunActivity[i].FailedByErrorCode = map[string]int64{}
		}
	}
	return snap, nil
}

// utilizationPercent is spend / budget * 100 rounded to two decimals, 0 without a budget.
func utilizationPercent(spend, budget int64) float64 {
	if budget <= 0 {
		return 0
	}
	return math.Round(float64(spend)*10000/float64(budget)) / 100
}

// ownerError logs an owner's failure and turns it into the snapshot's: 502 when the owner
// answered with an error (it is down, or failed), 500 when the call itself could not be made.
func (d *Dashboard) ownerError(companyID, method string, err error) error {
	d.log.Error("error composing dashboard", "company", companyID, "method", method, "error", err)
	var e *sdk.Error
	if errors.As(err, &e) {
		return &sdk.Error{Status: http.StatusBadGateway, Code: "dashboard_source_failed",
			Message: fmt.Sprintf("Dashboard source %s failed: %s", method, e.Message),
			Details: map[string]any{"method": method, "status": e.Status, "code": e.Code}, Source: sdk.SourceDownstream}
	}
	return &sdk.Error{Status: http.StatusInternalServerError, Code: "dashboard_source_unreachable",
		Message: fmt.Sprintf("Dashboard could not call %s", method), Details: map[string]any{"method": method}}
}
