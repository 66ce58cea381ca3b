package agents_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/extensions/agents"
	_ "github.com/keelhq/keel/extensions/work"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as an extension,
// sdktest.Main serves the extension instead.
func TestMain(m *testing.M) { sdktest.Main(m) }

// startAgents starts a real host running the agents and work extensions as processes.
func startAgents(t *testing.T) *sdktest.Host {
	t.Helper()
	return sdktest.Start(t, sdktest.Options{Builtins: true})
}

// createAgent creates an agent through POST /api/companies/{companyId}/agents.
func createAgent(t *testing.T, h *sdktest.Host, companyID string, body map[string]any) map[string]any {
	t.Helper()
	res := h.Do("POST", "/api/companies/"+companyID+"/agents", body)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	return res.Map(t)
}

// agentKey mints an API key for an agent and returns bearer header pairs.
func agentKey(t *testing.T, h *sdktest.Host, agentID string) []string {
	t.Helper()
	res := h.Do("POST", "/api/agents/"+agentID+"/keys", map[string]any{"name": "test"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	return []string{"Authorization", "Bearer " + res.Map(t)["token"].(string)}
}

// orgChart creates a CEO and a worker reporting to it.
func orgChart(t *testing.T, h *sdktest.Host, companyID string) (ceo, worker map[string]any) {
	t.Helper()
	ceo = createAgent(t, h, companyID, map[string]any{"name": "Smoke CEO", "role": "ceo", "title": "Chief",
		"adapterConfig": map[string]any{"command": "/bin/echo", "args": []string{"ceo-heartbeat"}}})
	worker = createAgent(t, h, companyID, map[string]any{"name": "Smoke Worker", "role": "engineer", "reportsTo": ceo["id"],
		"capabilities": "echo things", "adapterConfig": map[string]any{"command": "/bin/echo", "args": []string{"worker-heartbeat"}}})
	return ceo, worker
}

func TestExtensionLoads(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	res := h.Do("GET", "/api/plugins/agents", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, "ready", res.Map(t)["status"], "%s", res.Body)
}
