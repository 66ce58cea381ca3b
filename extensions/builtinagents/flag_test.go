package builtinagents_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// TestFlagStartsAndStopsTheExtension turns enableBuiltInAgents on and off at runtime: every
// route is 404 "Built-in agents are not enabled" while it is off, and what was provisioned
// is there again when it comes back on, without a restart of the host.
func TestFlagStartsAndStopsTheExtension(t *testing.T) {
	t.Parallel()
	h := startHost(t, false)
	co := company(t, h, "Flag Co", false)
	routes := []struct{ method, path string }{
		{"GET", path(co, "")},
		{"GET", path(co, "/summarizer/status")},
		{"POST", path(co, "/summarizer/provision")},
		{"POST", path(co, "/summarizer/reconcile")},
		{"POST", path(co, "/summarizer/reset")},
		{"PUT", path(co, "/summarizer/instructions")},
		{"POST", path(co, "/reflection-coach/routines/recent-agent-reflection/enable")},
		{"POST", path(co, "/reflection-coach/routines/recent-agent-reflection/disable")},
		{"POST", path(co, "/reflection-coach/routines/recent-agent-reflection/run")},
	}
	requireOff := func() {
		t.Helper()
		for _, r := range routes {
			res := h.Do(r.method, r.path, map[string]any{"markdown": "x"})
			require.Equal(t, http.StatusNotFound, res.Status, "%s %s: %s", r.method, r.path, res.Body)
			require.Equal(t, "Built-in agents are not enabled", res.Map(t)["error"], "%s %s", r.method, r.path)
		}
	}
	requireOff()

	setFlag(t, h, true)
	sdktest.WaitFor(t, 60*time.Second, func() bool { return h.Do("GET", path(co, ""), nil).Status == http.StatusOK },
		"built-in agents to come on")
	b := provision(t, h, co, "summarizer", processAdapter, http.StatusOK)
	require.Equal(t, "ready", b.State)

	setFlag(t, h, false)
	sdktest.WaitFor(t, 60*time.Second, func() bool { return h.Do("GET", path(co, ""), nil).Status == http.StatusNotFound },
		"built-in agents to go off")
	requireOff()
	// The agent itself stays an agent of the company.
	require.Equal(t, "Summarizer", agentRecord(t, h, *b.AgentID)["name"])

	setFlag(t, h, true)
	sdktest.WaitFor(t, 60*time.Second, func() bool { return h.Do("GET", path(co, ""), nil).Status == http.StatusOK },
		"built-in agents to come back")
	again := status(t, h, co, "summarizer")
	require.Equal(t, "ready", again.State)
	require.Equal(t, *b.AgentID, *again.AgentID)
}
