package agents

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// Provided method of the dashboard snapshot (spec part 1 "Dashboard snapshot"): the
// dashboard extension asks the agents owner once per snapshot for its agent counts and the
// run activity of the last 14 UTC days.
func init() {
	addMethods(map[string]method{
		"dashboardCounts": {
			ReadOnly: true,
			Description: "Count a company's agents and recent runs for the dashboard. Input: {companyId (the call's company wins)}. " +
				"Output: {active (idle and active agents), running (executing a heartbeat), paused, error, " +
				"pausedByBudget (paused agents whose pauseReason is budget), runActivity: 14 entries, oldest first, one per UTC day " +
				"ending today: {date, succeeded, failed, recovered, other, total, failedByErrorCode}}. The agent buckets are " +
				"disjoint; terminated and pending_approval agents are in none.",
			Call: callDashboardCounts,
		},
	})
}

// dashboardRunActivityDays is how many UTC days of run activity the dashboard shows.
const dashboardRunActivityDays = 14

// DashboardCounts is the output of agents.dashboardCounts. The agent buckets follow the
// reference product: active holds idle and active agents, running the agents executing a
// heartbeat (kernel status running, set while a run executes), so active + running +
// paused + error is every agent that is neither terminated nor pending approval.
type DashboardCounts struct {
	// Active counts agents in status active or idle (operational, not executing).
	Active int64 `json:"active"`
	// Running counts agents executing a heartbeat run.
	Running int64 `json:"running"`
	// Paused counts intentionally paused agents, whatever the reason.
	Paused int64 `json:"paused"`
	// Error counts agents in error status (their last run failed, or an error was recorded).
	Error int64 `json:"error"`
	// PausedByBudget counts paused agents whose pauseReason is budget.
	PausedByBudget int64 `json:"pausedByBudget"`
	// RunActivity is one entry per UTC day, oldest first, ending today.
	RunActivity []RunActivityDay `json:"runActivity"`
}

// RunActivityDay counts the heartbeat runs created on one UTC day.
type RunActivityDay struct {
	// Date is the UTC day, YYYY-MM-DD.
	Date string `json:"date"`
	// Succeeded counts succeeded runs.
	Succeeded int64 `json:"succeeded"`
	// Failed counts failed and timed-out runs that no retry recovered.
	Failed int64 `json:"failed"`
	// Recovered counts failed and timed-out runs whose retry chain (retryOfRunId) later succeeded.
	Recovered int64 `json:"recovered"`
	// Other counts every other run: queued, scheduled for retry, running, cancelled, interrupted.
	Other int64 `json:"other"`
	// Total counts every run of the day.
	Total int64 `json:"total"`
	// FailedByErrorCode splits Failed by error code ("unknown" when the run has none).
	FailedByErrorCode map[string]int64 `json:"failedByErrorCode"`
}

// budgetPausedSQL lists the agents whose configuration records a budget pause; only those
// the kernel also shows as paused count (a terminated agent keeps its last pause reason).
const budgetPausedSQL = `SELECT agent_id::text FROM agent_configs WHERE company_id = $1 AND pause_reason = 'budget'`

// runActivitySQL counts the company's runs created since $2 (a UTC midnight) by UTC day
// (date_bin from $2, the cheapest bucketing PostgreSQL offers), status and error code, and
// tells whether a group holds retries (a succeeded retry may have recovered failures).
const runActivitySQL = `SELECT date_bin('1 day', created_at, $2), status, error_code, count(*), bool_or(retry_of_run_id IS NOT NULL)
FROM heartbeat_runs WHERE company_id = $1 AND created_at >= $2
GROUP BY 1, 2, 3`

// recoveredRunsSQL counts, by UTC day and error code, the failed and timed-out runs of the
// window that a run of their retry chain recovered (asked only when the window holds a
// succeeded retry): the recursive part walks
// retry_of_run_id up from the window's succeeded retries (few: only process-loss kills are
// retried) by primary key, and UNION ends it even on a malformed cyclic chain.
const recoveredRunsSQL = `WITH RECURSIVE recovered (id) AS (
	SELECT retry_of_run_id FROM heartbeat_runs
	WHERE company_id = $1 AND created_at >= $2 AND status = 'succeeded' AND retry_of_run_id IS NOT NULL
	UNION
	SELECT h.retry_of_run_id FROM recovered r JOIN heartbeat_runs h ON h.id = r.id WHERE h.retry_of_run_id IS NOT NULL
)
SELECT date_bin('1 day', h.created_at, $2), h.error_code, count(*)
FROM recovered r JOIN heartbeat_runs h ON h.id = r.id
WHERE h.company_id = $1 AND h.created_at >= $2 AND h.status IN ('failed', 'timed_out')
GROUP BY 1, 2`

func callDashboardCounts(a *Agents, ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		CompanyID string `json:"companyId"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	companyID := call.CompanyID
	if companyID == "" {
		companyID = in.CompanyID
	}
	if !isUUID(companyID) {
		return nil, invalid("companyId", "is required")
	}
	ctx = methodCtx(ctx, call, companyID)
	if err := requireCompanyAccess(ctx, companyID); err != nil {
		return nil, err
	}
	return a.dashboardCounts(ctx, companyID, time.Now())
}

// dashboardCounts reads the kernel's agent statuses and, concurrently, the budget pauses
// and the run activity of the dashboard window ending at now.
func (a *Agents) dashboardCounts(ctx context.Context, companyID string, now time.Time) (*DashboardCounts, error) {
	days := dashboardDays(now)
	out := &DashboardCounts{RunActivity: make([]RunActivityDay, len(days))}
	byDate := make(map[string]*RunActivityDay, len(days))
	for i, d := range days {
		out.RunActivity[i] = RunActivityDay{Date: d, FailedByErrorCode: map[string]int64{}}
		byDate[d] = &out.RunActivity[i]
	}
	start, _ := time.Parse(time.DateOnly, days[0])

	var identities []*hostv1.AgentIdentity
	budgetPaused := map[string]bool{}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		res, err := a.host.Principals.ListAgents(gctx, &hostv1.ListAgentsRequest{CompanyId: companyID})
		if err != nil {
			return fmt.Errorf("error listing agents of company %s: %w", companyID, err)
		}
		identities = res.Agents
		return nil
	})
	g.Go(func() error {
		if err := a.runActivity(gctx, companyID, start, byDate, budgetPaused); err != nil {
			return fmt.Errorf("error counting runs of company %s for the dashboard: %w", companyID, err)
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, id := range identities {
		switch id.Status {
		case statusActive, statusIdle:
			out.Active++
		case statusRunning:
			out.Running++
		case statusPaused:
			out.Paused++
			if budgetPaused[id.Id] {
				out.PausedByBudget++
			}
		case statusError:
			out.Error++
		}
	}
	return out, nil
}

// runActivity fills the days of byDate from start on and the set of budget-paused agents,
// in one database round trip, plus one more when succeeded retries may have recovered
// failures.
func (a *Agents) runActivity(ctx context.Context, companyID string, start time.Time, byDate map[string]*RunActivityDay,
	budgetPaused map[string]bool) error {
	retried := false
	batch := &pgx.Batch{}
	batch.Queue(budgetPausedSQL, companyID).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			budgetPaused[id] = true
		}
		return rows.Err()
	})
	batch.Queue(runActivitySQL, companyID, start).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var day time.Time
			var status string
			var code *string
			var n int64
			var retries bool
			if err := rows.Scan(&day, &status, &code, &n, &retries); err != nil {
				return err
			}
			d := byDate[day.UTC().Format(time.DateOnly)]
			if d == nil {
				continue // created "tomorrow" by a clock ahead of ours
			}
			d.Total += n
			switch status {
			case runSucceeded:
				d.Succeeded += n
				retried = retried || retries
			case runFailed, runTimedOut:
				d.Failed += n
				d.FailedByErrorCode[errorCodeKey(code)] += n
			default:
				d.Other += n
			}
		}
		return rows.Err()
	})
	if err := a.pool.SendBatch(ctx, batch).Close(); err != nil {
		return err
	}
	if !retried {
		return nil
	}
	rows, err := a.pool.Query(ctx, recoveredRunsSQL, companyID, start)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var day time.Time
		var code *string
		var n int64
		if err := rows.Scan(&day, &code, &n); err != nil {
			return err
		}
		d := byDate[day.UTC().Format(time.DateOnly)]
		if d == nil {
			continue
		}
		// This statement reads a later snapshot: never move more failures than were counted.
		key := errorCodeKey(code)
		m := min(n, d.FailedByErrorCode[key])
		d.Failed -= m
		d.Recovered += m
		if d.FailedByErrorCode[key] -= m; d.FailedByErrorCode[key] == 0 {
			delete(d.FailedByErrorCode, key)
		}
	}
	return rows.Err()
}

// errorCodeKey is the failedByErrorCode key of a run's error code ("unknown" when none).
func errorCodeKey(code *string) string {
	if code == nil || *code == "" {
		return "unknown"
	}
	return *code
}

// dashboardDays returns the dashboard's UTC days, oldest first, ending with now's.
func dashboardDays(now time.Time) []string {
	now = now.UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	out := make([]string, dashboardRunActivityDays)
	for i := range out {
		out[i] = today.AddDate(0, 0, i-(dashboardRunActivityDays-1)).Format(time.DateOnly)
	}
	return out
}
