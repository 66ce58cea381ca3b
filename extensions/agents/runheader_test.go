package agents_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestRunHeaderMustNameALiveRunOfTheAgent shows an agent key refused when its
// X-Service-Run-Id names another agent's live run, an ended run or no run at all: run ids
// are what checkouts and comments are attributed to.
func TestRunHeaderMustNameALiveRunOfTheAgent(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Run Header Co")
	sleeper := map[string]any{"command": "/bin/sh", "args": []string{"-c", "sleep 30"}, "timeoutSec": 60, "graceSec": 1}
	victim := createAgent(t, h, company, map[string]any{"name": "Victim", "role": "engineer", "adapterType": "process", "adapterConfig": sleeper})
	thief := createAgent(t, h, company, map[string]any{"name": "Thief", "role": "engineer", "adapterType": "process", "adapterConfig": sleeper})
	victimKey := agentKey(t, h, victim["id"].(string))
	thiefKey := agentKey(t, h, thief["id"].(string))

	run := wake(t, h, victim["id"].(string), map[string]any{"source": "on_demand"})
	runID := run["id"].(string)
	waitRun(t, h, runID, 30*time.Second, "running")

	withRun := func(key []string, id string) []string {
		return append(append([]string{}, key...), "X-Service-Run-Id", id)
	}
	// The run's own agent is accepted.
	res := h.Do("GET", "/api/agents/me", nil, withRun(victimKey, runID)...)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	for name, id := range map[string]string{"AnotherAgentsRun": runID, "NoSuchRun": uuid.NewString(), "NotAnID": "run-1"} {
		res := h.Do("GET", "/api/agents/me", nil, withRun(thiefKey, id)...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s: %s", name, res.Body)
		require.Equal(t, "agent_run_not_live", res.Map(t)["code"], name)
	}

	// Once the run has ended its id no longer acts for anyone.
	res = h.Do("POST", "/api/heartbeat-runs/"+runID+"/cancel", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	waitRun(t, h, runID, 30*time.Second, "cancelled")
	require.Eventually(t, func() bool {
		return h.Do("GET", "/api/agents/me", nil, withRun(victimKey, runID)...).Status == http.StatusForbidden
	}, 30*time.Second, 100*time.Millisecond, "an ended run is refused once the short cache lapses")
}
