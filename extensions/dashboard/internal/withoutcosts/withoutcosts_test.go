// Package withoutcosts_test runs the dashboard in a keel without the costs extension: this
// test binary compiles in the dashboard, agents and work only, so costs.dashboardSummary is
// provided by no one. It checks that an absent owner contributes zeros and that an owner
// that is down fails the snapshot with a clear 502.
package withoutcosts_test

import (
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/extensions/agents"
	"github.com/keelhq/keel/extensions/dashboard"
	_ "github.com/keelhq/keel/extensions/work"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as an extension,
// sdktest.Main serves the extension instead.
func TestMain(m *testing.M) { sdktest.Main(m) }

func TestDashboardWithoutCosts(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true})
	company := h.CreateCompany("No Costs Co")
	// The kernel's company record has a budget, but only the costs owner reports budgets.
	res := h.Do("PATCH", "/api/companies/"+company, map[string]any{"budgetMonthlyCents": 50000})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	h.CreateAgent(company, "Worker", "engineer")
	res = h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "Do it", "status": "todo"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	res = h.Do("POST", "/api/companies/"+company+"/approvals", map[string]any{"type": "request_board_approval", "payload": map[string]any{}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)

	read := func() *sdktest.Response { return h.Do("GET", "/api/companies/"+company+"/dashboard", nil) }
	res = read()
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var snap dashboard.Snapshot
	res.JSON(t, &snap)
	require.Equal(t, dashboard.CostSummary{}, snap.Costs, "no costs owner: zero spend, budget and utilization")
	require.Equal(t, dashboard.BudgetCounts{}, snap.Budgets)
	require.Equal(t, dashboard.AgentCounts{Active: 1}, snap.Agents, "the other owners still answer")
	require.Equal(t, dashboard.TaskCounts{Open: 1}, snap.Tasks)
	require.EqualValues(t, 1, snap.PendingApprovals)
	require.Len(t, snap.RunActivity, 14)

	// An owner that is installed but down is not an absent owner: the snapshot fails with a
	// 502 naming the method, until the supervisor has restarted it.
	pid := h.Supervisor.PID("work")
	require.NotZero(t, pid)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	sdktest.WaitFor(t, 10*time.Second, func() bool {
		res = read()
		return res.Status == http.StatusBadGateway
	}, "a 502 while work is down")
	body := res.Map(t)
	require.Equal(t, "dashboard_source_failed", body["code"], "%v", body)
	require.Contains(t, body["error"], "Dashboard source work.dashboardCounts failed")
	require.Equal(t, "work.dashboardCounts", body["details"].(map[string]any)["method"])
	sdktest.WaitFor(t, 30*time.Second, func() bool { return read().Status == http.StatusOK },
		"the dashboard back once work restarted")
}
