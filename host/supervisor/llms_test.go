package supervisor_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/extensions/all"
	"github.com/keelhq/keel/sdktest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

// TestLLMDocuments reads the plain-text agent configuration documents as the board, as an
// agent with canCreateAgents (a CEO) and as one without: the per-type document is
// generated from the adapter's own config schema.
func TestLLMDocuments(t *testing.T) {
	h := sdktest.Start(t, sdktest.Options{Builtins: true})
	sdktest.WaitFor(t, time.Minute, func() bool {
		res := h.Do("GET", "/api/plugins/agents", nil)
		return res.Status == http.StatusOK && res.Map(t)["status"] == "ready"
	}, "the agents extension to be ready")
	company := h.CreateCompany("Docs Co")
	agentKey := func(name, role string) []string {
		res := h.Do("POST", "/api/companies/"+company+"/agents", map[string]any{"name": name, "role": role,
			"adapterType": "process", "adapterConfig": map[string]any{"command": "true"}})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		res = h.Do("POST", "/api/agents/"+res.Map(t)["id"].(string)+"/keys", map[string]any{"name": "test"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		return []string{"Authorization", "Bearer " + res.Map(t)["token"].(string)}
	}
	ceo, engineer := agentKey("Chief", "ceo"), agentKey("Eng", "engineer")

	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/api/llms/agent-configuration.txt", []string{"# Agent configuration\n", "- process: ", "  /api/llms/agent-configuration/process.txt\n", "- http: "}},
		{"/api/llms/agent-configuration/process.txt", []string{"# Adapter type process\n", "Adapter: adapter.process", "Status: ",
			"- command (string, required): The executable to run, a path or a name looked up in PATH.\n",
			"- timeoutSec (number): Run timeout in seconds; 0 means none.\n", "## adapterConfig JSON Schema\n"}},
		{"/api/llms/agent-icons.txt", []string{"# Agent icons\n", "- bot\n"}},
	} {
		for _, as := range [][]string{nil, ceo} {
			res := h.Do("GET", tc.path, nil, as...)
			require.Equal(t, http.StatusOK, res.Status, "%s: %s", tc.path, res.Body)
			require.Equal(t, "text/plain; charset=utf-8", res.Header.Get("Content-Type"))
			for _, w := range tc.want {
				require.Contains(t, string(res.Body), w, tc.path)
			}
		}
		res := h.Do("GET", tc.path, nil, engineer...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s: %s", tc.path, res.Body)
		require.Equal(t, "Only board users and agents with canCreateAgents can read agent configuration documents", res.Map(t)["error"])
	}
	for _, path := range []string{"/api/llms/agent-configuration/nope.txt", "/api/llms/agent-configuration/process"} {
		res := h.Do("GET", path, nil)
		require.Equal(t, http.StatusNotFound, res.Status, "%s: %s", path, res.Body)
	}
}
