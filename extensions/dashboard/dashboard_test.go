package dashboard_test

import (
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/extensions/dashboard"
	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/sdktest"
)

func TestDashboard(t *testing.T) {
	t.Parallel()
	h := startHost(t)

	t.Run("ShapeAndAccess", func(t *testing.T) {
		t.Parallel()
		company := h.CreateCompany("Shape Co")

		// The snapshot has exactly the sample's keys, and 14 UTC days ending today.
		res := h.Do("GET", "/api/companies/"+company+"/dashboard", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		body := res.Map(t)
		keys := make([]string, 0, len(body))
		for k := range body {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		require.Equal(t, []string{"agents", "budgets", "companyId", "costs", "pendingApprovals", "runActivity", "tasks"}, keys)
		require.Equal(t, map[string]any{"active": 0.0, "running": 0.0, "paused": 0.0, "error": 0.0}, body["agents"])
		require.Equal(t, map[string]any{"open": 0.0, "inProgress": 0.0, "blocked": 0.0, "done": 0.0}, body["tasks"])
		require.Equal(t, map[string]any{"monthSpendCents": 0.0, "monthBudgetCents": 0.0, "monthUtilizationPercent": 0.0}, body["costs"])
		require.Equal(t, map[string]any{"activeIncidents": 0.0, "pendingApprovals": 0.0, "pausedAgents": 0.0, "pausedProjects": 0.0}, body["budgets"])
		require.Equal(t, 0.0, body["pendingApprovals"])
		activity := body["runActivity"].([]any)
		require.Len(t, activity, 14)
		for i, d := range activity {
			require.Equal(t, map[string]any{"date": utcDay(i - 13), "succeeded": 0.0, "failed": 0.0, "recovered": 0.0,
				"other": 0.0, "total": 0.0, "failedByErrorCode": map[string]any{}}, d)
		}

		// An agent of the company may read it (API key or run JWT); one of another company may not.
		other := h.CreateCompany("Other Co")
		member := h.CreateAgent(company, "Member", "engineer")
		outsider := h.CreateAgent(other, "Outsider", "engineer")
		require.Equal(t, company, getDashboard(t, h, company, member.As("")...).CompanyID)
		jwt := h.AgentJWT(member, uuid.NewString())
		require.Equal(t, company, getDashboard(t, h, company, "Authorization", "Bearer "+jwt).CompanyID)
		res = h.Do("GET", "/api/companies/"+company+"/dashboard", nil, outsider.As("")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		require.Equal(t, "You do not have access to this company", res.Map(t)["error"])

		// An unknown company is 404, a malformed id too.
		for _, id := range []string{uuid.NewString(), "not-a-company"} {
			res = h.Do("GET", "/api/companies/"+id+"/dashboard", nil)
			require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
			require.Equal(t, "Company not found", res.Map(t)["error"])
		}

		// Read-only: no other method is routed.
		res = h.Do("POST", "/api/companies/"+company+"/dashboard", map[string]any{})
		require.Equal(t, http.StatusMethodNotAllowed, res.Status, "%s", res.Body)
	})

	t.Run("Counts", func(t *testing.T) {
		t.Parallel()
		company := do(t, h, "POST", "/api/companies", map[string]any{"name": "Counts Co",
			"requireBoardApprovalForNewAgents": true}, http.StatusCreated)["id"].(string)
		other := h.CreateCompany("Counts Other Co")

		// Agents in every status. Idle ran once and succeeded; the failing one is in error
		// after its failed run; the sleeper is executing a heartbeat.
		idle := createAgent(t, h, company, "Idle", "/bin/echo", "hello")
		succeeded := waitRunDone(t, h, wakeAgent(t, h, idle))
		require.Equal(t, "succeeded", succeeded["status"], "%v", succeeded)
		waitAgentStatus(t, h, idle, "idle")

		active := createAgent(t, h, company, "Active", "/bin/echo")
		do(t, h, "PATCH", "/api/agents/"+active, map[string]any{"status": "active"}, http.StatusOK)

		failing := createAgent(t, h, company, "Failing", "/bin/false")
		failed := waitRunDone(t, h, wakeAgent(t, h, failing))
		require.Equal(t, "failed", failed["status"], "%v", failed)
		waitAgentStatus(t, h, failing, "error")
		failedCode, _ := failed["errorCode"].(string)
		if failedCode == "" {
			failedCode = "unknown"
		}

		sleeper := createAgent(t, h, company, "Sleeper", "/bin/sleep", "60")
		wakeAgent(t, h, sleeper)
		waitAgentStatus(t, h, sleeper, "running")

		paused := createAgent(t, h, company, "Paused", "/bin/echo")
		do(t, h, "POST", "/api/agents/"+paused+"/pause", nil, http.StatusOK)

		budgetPaused := createAgent(t, h, company, "Budget Paused", "/bin/echo")
		pauseForBudget(t, h, company, budgetPaused)

		terminated := createAgent(t, h, company, "Terminated", "/bin/echo")
		do(t, h, "POST", "/api/agents/"+terminated+"/terminate", nil, http.StatusOK)

		// A hire in a company that requires approval: a pending agent and a pending approval.
		hire := do(t, h, "POST", "/api/companies/"+company+"/agent-hires", map[string]any{
			"name": "Hire", "role": "engineer", "adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/echo"},
		}, http.StatusCreated)
		require.Equal(t, "pending_approval", hire["agent"].(map[string]any)["status"], "%v", hire)

		// Issues in every status (unassigned, so nothing wakes).
		for _, st := range []string{"backlog", "todo", "todo", "in_progress", "in_review", "blocked", "done", "done", "cancelled"} {
			do(t, h, "POST", "/api/companies/"+company+"/issues", map[string]any{"title": "Task " + st, "status": st}, http.StatusCreated)
		}

		// Approvals: the hire's and one more pending, one approved, one rejected.
		newApproval := func() string {
			return do(t, h, "POST", "/api/companies/"+company+"/approvals", map[string]any{
				"type": "request_board_approval", "payload": map[string]any{"title": "Ship it?"},
			}, http.StatusCreated)["id"].(string)
		}
		newApproval()
		do(t, h, "POST", "/api/approvals/"+newApproval()+"/approve", map[string]any{}, http.StatusOK)
		do(t, h, "POST", "/api/approvals/"+newApproval()+"/reject", map[string]any{}, http.StatusOK)

		// Projects: one paused by budget, one paused by hand, one running.
		newProject := func(name string) string {
			return do(t, h, "POST", "/api/companies/"+company+"/projects", map[string]any{"name": name}, http.StatusCreated)["id"].(string)
		}
		pauseProjectForBudget(t, h, company, newProject("Over budget"))
		do(t, h, "PATCH", "/api/projects/"+newProject("On hold"), map[string]any{"pauseReason": "waiting on legal"}, http.StatusOK)
		newProject("Live")

		// Another company's work never leaks in.
		createAgent(t, h, other, "Elsewhere", "/bin/echo")
		do(t, h, "POST", "/api/companies/"+other+"/issues", map[string]any{"title": "Elsewhere", "status": "in_progress"}, http.StatusCreated)

		snap := getDashboard(t, h, company)
		require.Equal(t, company, snap.CompanyID)
		require.Equal(t, dashboard.AgentCounts{Active: 2, Running: 1, Paused: 2, Error: 1}, snap.Agents)
		require.Equal(t, dashboard.TaskCounts{Open: 6, InProgress: 1, Blocked: 1, Done: 2}, snap.Tasks)
		require.EqualValues(t, 2, snap.PendingApprovals)
		require.EqualValues(t, 1, snap.Budgets.PausedAgents)
		require.EqualValues(t, 1, snap.Budgets.PausedProjects)

		// Today's runs: the idle agent's success, the failure, the sleeper's live run.
		require.Len(t, snap.RunActivity, 14)
		today := snap.RunActivity[13]
		require.Equal(t, dashboard.RunActivityDay{Date: utcDay(0), Succeeded: 1, Failed: 1, Other: 1, Total: 3,
			FailedByErrorCode: map[string]int64{failedCode: 1}}, today)

		// The other company sees only its own.
		otherSnap := getDashboard(t, h, other)
		require.Equal(t, dashboard.AgentCounts{Active: 1}, otherSnap.Agents)
		require.Equal(t, dashboard.TaskCounts{Open: 1, InProgress: 1}, otherSnap.Tasks)
		require.Zero(t, otherSnap.PendingApprovals)
	})

	t.Run("RunActivity", func(t *testing.T) {
		t.Parallel()
		company := h.CreateCompany("Runs Co")
		other := h.CreateCompany("Runs Other Co")
		agent := h.CreateAgent(company, "Runner", "engineer")
		otherAgent := h.CreateAgent(other, "Other Runner", "engineer")

		// Runs made days ago: a process-loss kill recovered by its retry; a chain of two kills
		// recovered by the third attempt; an unrecovered quota failure; a timeout without a
		// code; a cancelled run. Runs older than the window and another company's are ignored.
		threeDaysAgo := time.Now().UTC().AddDate(0, 0, -3).Truncate(time.Hour)
		type run struct {
			status, code string
			retryOf      *string
			at           time.Time
			agent        string
			company      string
		}
		ids := map[string]string{}
		add := func(name string, r run) {
			id := uuid.NewString()
			ids[name] = id
			if r.agent == "" {
				r.agent, r.company = agent.ID, company
			}
			if r.at.IsZero() {
				r.at = threeDaysAgo
			}
			var code *string
			if r.code != "" {
				code = &r.code
			}
			exec(t, h, `INSERT INTO ext_agents.heartbeat_runs (id, company_id, agent_id, status, error_code, retry_of_run_id, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $7)`, id, r.company, r.agent, r.status, code, r.retryOf, r.at)
		}
		ref := func(name string) *string { id := ids[name]; return &id }
		add("kill", run{status: "failed", code: "process_lost"})
		add("killRetry", run{status: "succeeded", retryOf: ref("kill"), at: threeDaysAgo.Add(time.Minute)})
		add("chain", run{status: "failed", code: "process_lost"})
		add("chainRetry", run{status: "failed", code: "process_lost", retryOf: ref("chain"), at: threeDaysAgo.Add(time.Minute)})
		add("chainRetry2", run{status: "succeeded", retryOf: ref("chainRetry"), at: threeDaysAgo.Add(2 * time.Minute)})
		add("quota", run{status: "failed", code: "provider_quota"})
		add("timeout", run{status: "timed_out"})
		add("cancelled", run{status: "cancelled"})
		add("old", run{status: "succeeded", at: time.Now().UTC().AddDate(0, 0, -20)})
		add("elsewhere", run{status: "failed", code: "elsewhere", agent: otherAgent.ID, company: other})
		add("yesterday", run{status: "queued", at: time.Now().UTC().AddDate(0, 0, -1)})

		snap := getDashboard(t, h, company)
		require.Len(t, snap.RunActivity, 14)
		byDate := map[string]dashboard.RunActivityDay{}
		for i, d := range snap.RunActivity {
			require.Equal(t, utcDay(i-13), d.Date)
			byDate[d.Date] = d
		}
		require.Equal(t, dashboard.RunActivityDay{Date: threeDaysAgo.Format(time.DateOnly), Succeeded: 2, Recovered: 3, Failed: 2,
			Other: 1, Total: 8, FailedByErrorCode: map[string]int64{"provider_quota": 1, "unknown": 1}}, byDate[threeDaysAgo.Format(time.DateOnly)])
		require.Equal(t, dashboard.RunActivityDay{Date: utcDay(-1), Other: 1, Total: 1, FailedByErrorCode: map[string]int64{}}, byDate[utcDay(-1)])
		var total int64
		for _, d := range snap.RunActivity {
			total += d.Total
		}
		require.EqualValues(t, 9, total, "only the window's runs of this company")
	})
}

// TestDashboardCosts checks the costs and budget figures against known spend, budgets and
// enforcement: the sample's 250 of 100000 cents, then agent and project hard stops.
func TestDashboardCosts(t *testing.T) {
	t.Parallel()
	h := startHost(t)
	now := time.Now().UTC()
	monthStart := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	cost := func(t *testing.T, company, agent string, cents int64, at time.Time, extra ...any) {
		t.Helper()
		body := map[string]any{"agentId": agent, "provider": "anthropic", "model": "m1", "costCents": cents,
			"occurredAt": at.Format(time.RFC3339Nano)}
		for i := 0; i+1 < len(extra); i += 2 {
			body[extra[i].(string)] = extra[i+1]
		}
		do(t, h, "POST", "/api/companies/"+company+"/cost-events", body, http.StatusCreated)
	}
	setBudget := func(t *testing.T, company string, cents int64) {
		t.Helper()
		do(t, h, "PATCH", "/api/companies/"+company+"/budgets", map[string]any{"budgetMonthlyCents": cents}, http.StatusOK)
	}

	t.Run("Sample", func(t *testing.T) {
		t.Parallel()
		company := h.CreateCompany("Sample Spend Co")
		agent := createAgent(t, h, company, "Spender", "/bin/echo")
		setBudget(t, company, 100000)
		cost(t, company, agent, 250, now)
		cost(t, company, agent, 999, monthStart.Add(-time.Hour)) // last month
		snap := getDashboard(t, h, company)
		require.Equal(t, dashboard.CostSummary{MonthSpendCents: 250, MonthBudgetCents: 100000, MonthUtilizationPercent: 0.25}, snap.Costs)
		require.Equal(t, dashboard.BudgetCounts{}, snap.Budgets)
	})

	t.Run("NoBudget", func(t *testing.T) {
		t.Parallel()
		company := h.CreateCompany("No Budget Co")
		cost(t, company, createAgent(t, h, company, "Spender", "/bin/echo"), 1234, now)
		require.Equal(t, dashboard.CostSummary{MonthSpendCents: 1234}, getDashboard(t, h, company).Costs)
	})

	t.Run("Enforcement", func(t *testing.T) {
		t.Parallel()
		company := h.CreateCompany("Enforced Co")
		setBudget(t, company, 300000)
		spender := createAgent(t, h, company, "Spender", "/bin/echo")
		steady := createAgent(t, h, company, "Steady", "/bin/echo")
		project := do(t, h, "POST", "/api/companies/"+company+"/projects", map[string]any{"name": "Capped"}, http.StatusCreated)["id"].(string)
		do(t, h, "POST", "/api/companies/"+company+"/budgets/policies",
			map[string]any{"scopeType": "agent", "scopeId": spender, "amount": 1000, "warnPercent": 50}, http.StatusOK)
		do(t, h, "POST", "/api/companies/"+company+"/budgets/policies",
			map[string]any{"scopeType": "project", "scopeId": project, "amount": 100, "notifyEnabled": false}, http.StatusOK)

		cost(t, company, steady, 250, now)
		cost(t, company, spender, 600, now) // agent soft incident
		snap := getDashboard(t, h, company)
		require.Equal(t, dashboard.BudgetCounts{ActiveIncidents: 1}, snap.Budgets)
		require.Equal(t, dashboard.AgentCounts{Active: 2}, snap.Agents)

		cost(t, company, spender, 500, now)                           // agent hard stop: paused by budget
		cost(t, company, steady, 150, now, "projectId", project)      // project hard stop: paused by budget
		cost(t, company, steady, 70000, monthStart.Add(-time.Minute)) // last month: not this month's spend

		snap = getDashboard(t, h, company)
		require.Equal(t, dashboard.CostSummary{MonthSpendCents: 1500, MonthBudgetCents: 300000, MonthUtilizationPercent: 0.5}, snap.Costs)
		require.Equal(t, dashboard.BudgetCounts{ActiveIncidents: 3, PendingApprovals: 2, PausedAgents: 1, PausedProjects: 1}, snap.Budgets)
		require.Equal(t, dashboard.AgentCounts{Active: 1, Paused: 1}, snap.Agents)
		require.EqualValues(t, 2, snap.PendingApprovals, "each hard stop asks the board for a budget override")
		require.Equal(t, dashboard.TaskCounts{}, snap.Tasks)

		// The dashboard agrees with the costs owner's own overview.
		ov := do(t, h, "GET", "/api/companies/"+company+"/budgets/overview", nil, http.StatusOK)
		require.Len(t, ov["activeIncidents"], int(snap.Budgets.ActiveIncidents))
		require.EqualValues(t, snap.Budgets.PendingApprovals, ov["pendingApprovalCount"])
		require.EqualValues(t, snap.Budgets.PausedAgents, ov["pausedAgentCount"])
		require.EqualValues(t, snap.Budgets.PausedProjects, ov["pausedProjectCount"])
	})
}

// TestDashboardBoardKeys checks company scoping for board users in authenticated mode: a
// board API key reaches its own company's dashboard, another company's key is refused.
func TestDashboardBoardKeys(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) {
		c.DeploymentMode = "authenticated"
	}})
	boardKey := func(email string) string {
		res := h.Do("POST", "/api/auth/sign-up/email", map[string]any{"email": email, "password": "correct horse", "name": email})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var session string
		for _, c := range (&http.Response{Header: res.Header}).Cookies() {
			if c.Value != "" {
				session = c.Name + "=" + c.Value
			}
		}
		require.NotEmpty(t, session, "a session cookie")
		res = h.Do("POST", "/api/board-api-keys", map[string]any{"name": "cli"}, "Cookie", session)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		return res.Map(t)["token"].(string)
	}
	createCompany := func(key, name string) string {
		res := h.Do("POST", "/api/companies", map[string]any{"name": name}, "Authorization", "Bearer "+key)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		return res.Map(t)["id"].(string)
	}
	alice, bob := boardKey("alice@example.com"), boardKey("bob@example.com")
	aliceCo := createCompany(alice, "Alice Co")
	createCompany(bob, "Bob Co")

	require.Equal(t, aliceCo, getDashboard(t, h, aliceCo, "Authorization", "Bearer "+alice).CompanyID)
	res := h.Do("GET", "/api/companies/"+aliceCo+"/dashboard", nil, "Authorization", "Bearer "+bob)
	require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	res = h.Do("GET", "/api/companies/"+aliceCo+"/dashboard", nil)
	require.Equal(t, http.StatusUnauthorized, res.Status, "%s", res.Body)
	// A company bob cannot reach is 403 before it is 404: existence is not disclosed.
	res = h.Do("GET", "/api/companies/"+uuid.NewString()+"/dashboard", nil, "Authorization", "Bearer "+bob)
	require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
}
