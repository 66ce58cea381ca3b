package costs

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/adapters/process"
	_ "github.com/keelhq/keel/extensions/agents"
	_ "github.com/keelhq/keel/extensions/secrets"
	_ "github.com/keelhq/keel/extensions/work"
	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// The tests are in package costs (not costs_test) so that the query plan test can EXPLAIN
// the very SQL the reads build; everything else goes through the real host over HTTP.

// TestMain runs the tests; when the host re-executes this binary as an extension,
// sdktest.Main serves the extension instead.
func TestMain(m *testing.M) { sdktest.Main(m) }

// startHost starts a real host running costs, agents, work, secrets and the adapters as
// processes.
func startHost(t testing.TB) *sdktest.Host {
	t.Helper()
	return sdktest.Start(t, sdktest.Options{Builtins: true})
}

// do sends a request and requires the status, returning the response.
func do(t testing.TB, h *sdktest.Host, want int, method, path string, body any, headers ...string) *sdktest.Response {
	t.Helper()
	res := h.Do(method, path, body, headers...)
	require.Equal(t, want, res.Status, "%s %s: %s", method, path, res.Body)
	return res
}

// obj and list decode a response body.
func obj(t testing.TB, res *sdktest.Response) map[string]any { t.Helper(); return res.Map(t) }

func list(t testing.TB, res *sdktest.Response) []map[string]any {
	t.Helper()
	var out []map[string]any
	res.JSON(t, &out)
	return out
}

// requireValidation requires a 400 Validation error naming path.
func requireValidation(t testing.TB, res *sdktest.Response, path string) {
	t.Helper()
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	var body struct {
		Error   string                 `json:"error"`
		Details []sdk.ValidationDetail `json:"details"`
	}
	res.JSON(t, &body)
	require.Equal(t, "Validation error", body.Error)
	paths := []string{}
	for _, d := range body.Details {
		paths = append(paths, d.Path)
	}
	require.Contains(t, paths, path, "%s", res.Body)
}

// createAgent creates an agent through the agents extension and returns its id.
func createAgent(t testing.TB, h *sdktest.Host, companyID, name string) string {
	t.Helper()
	res := do(t, h, http.StatusCreated, "POST", "/api/companies/"+companyID+"/agents", map[string]any{
		"name": name, "role": "engineer", "adapterConfig": map[string]any{"command": "/bin/true"}})
	return obj(t, res)["id"].(string)
}

// scriptAgent creates an agent running the process adapter with `sh -c script` and
// returns its id. The script may write a usage report to $SERVICE_RUN_REPORT_FILE.
func scriptAgent(t testing.TB, h *sdktest.Host, companyID, name, script string) string {
	t.Helper()
	res := do(t, h, http.StatusCreated, "POST", "/api/companies/"+companyID+"/agents", map[string]any{
		"name": name, "role": "engineer", "adapterType": "process",
		"adapterConfig": map[string]any{"command": "sh", "args": []string{"-c", script}}})
	return obj(t, res)["id"].(string)
}

// postCost reports a cost event as the board (or with headers) and requires 201.
func postCost(t testing.TB, h *sdktest.Host, companyID string, body map[string]any, headers ...string) map[string]any {
	t.Helper()
	return obj(t, do(t, h, http.StatusCreated, "POST", "/api/companies/"+companyID+"/cost-events", body, headers...))
}

// invoke calls a provided method as the kernel does and returns its output or error.
func invoke(t testing.TB, h *sdktest.Host, method, companyID string, input any, out any) *sdk.Error {
	t.Helper()
	in, err := json.Marshal(input)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := h.Supervisor.Invoke(ctx, "kernel", &hostv1.InvokeRequest{Method: method, InputJson: in, CompanyId: companyID, Actor: sdk.SystemActor()})
	require.NoError(t, err)
	if res.Error != nil {
		return sdk.FromProtoError(res.Error).(*sdk.Error)
	}
	if out != nil {
		require.NoError(t, json.Unmarshal(res.OutputJson, out), "%s", res.OutputJson)
	}
	return nil
}

// iso formats an instant for a request.
func iso(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// num reads a JSON number as int64.
func num(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

// waitRun waits until a run's status is one of statuses and returns it.
func waitRun(t testing.TB, h *sdktest.Host, runID string, statuses ...string) map[string]any {
	t.Helper()
	var run map[string]any
	sdktest.WaitFor(t, 30*time.Second, func() bool {
		run = obj(t, do(t, h, http.StatusOK, "GET", "/api/heartbeat-runs/"+runID, nil))
		for _, s := range statuses {
			if run["status"] == s {
				return true
			}
		}
		return false
	}, "run "+runID+" to reach "+statuses[0])
	return run
}
