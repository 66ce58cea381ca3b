package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/adapters/process"
	_ "github.com/keelhq/keel/extensions/agents"
	_ "github.com/keelhq/keel/extensions/costs"
	"github.com/keelhq/keel/extensions/dashboard"
	_ "github.com/keelhq/keel/extensions/work"
	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as an extension,
// sdktest.Main serves the extension instead.
func TestMain(m *testing.M) { sdktest.Main(m) }

// startHost starts a real host running the dashboard and the owners it asks (agents, work,
// costs) plus the process adapter, each as its own process. The owners-absent and
// owner-down cases live in internal/withoutcosts, a test binary without costs.
func startHost(t testing.TB) *sdktest.Host {
	t.Helper()
	return sdktest.Start(t, sdktest.Options{Builtins: true})
}

// getDashboard reads a company's dashboard (with optional header pairs) and requires a 200.
func getDashboard(t testing.TB, h *sdktest.Host, companyID string, headers ...string) *dashboard.Snapshot {
	t.Helper()
	res := h.Do("GET", "/api/companies/"+companyID+"/dashboard", nil, headers...)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var snap dashboard.Snapshot
	res.JSON(t, &snap)
	return &snap
}

// do sends a request and requires the status; it returns the body as an object.
func do(t testing.TB, h *sdktest.Host, method, path string, body any, status int) map[string]any {
	t.Helper()
	res := h.Do(method, path, body)
	require.Equal(t, status, res.Status, "%s %s: %s", method, path, res.Body)
	return res.Map(t)
}

// createAgent creates a process agent through the API and returns its id.
func createAgent(t testing.TB, h *sdktest.Host, companyID, name string, command string, args ...string) string {
	t.Helper()
	if args == nil {
		args = []string{}
	}
	ag := do(t, h, "POST", "/api/companies/"+companyID+"/agents", map[string]any{
		"name": name, "role": "engineer", "adapterType": "process",
		"adapterConfig": map[string]any{"command": command, "args": args, "graceSec": 0},
	}, http.StatusCreated)
	return ag["id"].(string)
}

// wakeAgent wakes an agent and returns its run id.
func wakeAgent(t testing.TB, h *sdktest.Host, agentID string) string {
	t.Helper()
	run := do(t, h, "POST", "/api/agents/"+agentID+"/wakeup", map[string]any{"source": "on_demand"}, http.StatusAccepted)
	id, _ := run["id"].(string)
	require.NotEmpty(t, id, "a run, not a skip: %v", run)
	return id
}

// waitAgentStatus waits until the agent's status is want.
func waitAgentStatus(t testing.TB, h *sdktest.Host, agentID, want string) {
	t.Helper()
	var last any
	sdktest.WaitFor(t, 30*time.Second, func() bool {
		last = h.Do("GET", "/api/agents/"+agentID, nil).Map(t)["status"]
		return last == want
	}, "agent "+agentID+" to be "+want)
}

// waitRunDone waits until the run reaches a final status and returns the run.
func waitRunDone(t testing.TB, h *sdktest.Host, runID string) map[string]any {
	t.Helper()
	var run map[string]any
	sdktest.WaitFor(t, 30*time.Second, func() bool {
		run = h.Do("GET", "/api/heartbeat-runs/"+runID, nil).Map(t)
		switch run["status"] {
		case "succeeded", "failed", "timed_out", "cancelled":
			return true
		}
		return false
	}, "run "+runID+" to finish")
	return run
}

// exec runs SQL through the host's superuser pool (test fixtures the API cannot make, such
// as runs created days ago).
func exec(t testing.TB, h *sdktest.Host, sql string, args ...any) {
	t.Helper()
	_, err := h.Kernel.Pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

// utcDay returns the UTC date offset days from today, YYYY-MM-DD.
func utcDay(offset int) string {
	return time.Now().UTC().AddDate(0, 0, offset).Format(time.DateOnly)
}

// invoke calls a provided method as the kernel does, with the system actor, and requires
// success.
func invoke(t testing.TB, h *sdktest.Host, method, companyID string, in any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(in)
	require.NoError(t, err)
	res, err := h.Supervisor.Invoke(context.Background(), "kernel", &hostv1.InvokeRequest{
		Method: method, InputJson: b, CompanyId: companyID, Actor: sdk.SystemActor(),
	})
	require.NoError(t, err)
	require.Nil(t, res.Error, "%s: %v", method, res.Error)
	return res.OutputJson
}

// pauseForBudget pauses an agent the way budget enforcement does.
func pauseForBudget(t testing.TB, h *sdktest.Host, companyID, agentID string) {
	t.Helper()
	invoke(t, h, "agents.pauseForBudget", companyID, map[string]any{"agentId": agentID})
}

// pauseProjectForBudget pauses a project the way budget enforcement does.
func pauseProjectForBudget(t testing.TB, h *sdktest.Host, companyID, projectID string) {
	t.Helper()
	invoke(t, h, "work.projects.pauseForBudget", companyID, map[string]any{"projectId": projectID})
}
