package agents_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// e2eScript is the whole "agent": it reads the environment keel gives a run, checks the
// issue out under its run id, comments and marks it done through the HTTP API.
const e2eScript = `set -eu
auth="Authorization: Bearer $SERVICE_API_KEY"
run="X-Service-Run-Id: $SERVICE_RUN_ID"
json="Content-Type: application/json"
echo "run $SERVICE_RUN_ID of agent $SERVICE_AGENT_ID on issue $SERVICE_TASK_ID"
curl -sS -f -X POST -H "$auth" -H "$run" -H "$json" \
  -d "{\"agentId\":\"$SERVICE_AGENT_ID\",\"expectedStatuses\":[\"todo\",\"backlog\"]}" \
  "$SERVICE_API_URL/api/issues/$SERVICE_TASK_ID/checkout" >/dev/null
curl -sS -f -X POST -H "$auth" -H "$run" -H "$json" \
  -d '{"body":"Done by the script"}' "$SERVICE_API_URL/api/issues/$SERVICE_TASK_ID/comments" >/dev/null
curl -sS -f -X PATCH -H "$auth" -H "$run" -H "$json" \
  -d '{"status":"done"}' "$SERVICE_API_URL/api/issues/$SERVICE_TASK_ID" >/dev/null
echo "finished"
`

// TestEndToEndProcessAgent assigns an issue to a process agent and watches the whole loop:
// the assignment wakes the agent, a run starts through the process adapter, the script
// calls back with the run's own credentials, and the run, the issue, the comment, the log
// and the activity trail all show it.
func TestEndToEndProcessAgent(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("End To End Co")
	agent := createAgent(t, h, company, map[string]any{
		"name": "Scripted", "role": "engineer", "adapterType": "process",
		"adapterConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", e2eScript}, "timeoutSec": 60},
	})
	agentID := agent["id"].(string)

	res := h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "Ship the thing", "assigneeAgentId": agentID})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	issueID := res.Map(t)["id"].(string)

	sdktest.WaitFor(t, 90*time.Second, func() bool {
		return h.Do("GET", "/api/issues/"+issueID, nil).Map(t)["status"] == "done"
	}, "the agent's script to mark the issue done")

	var comments []map[string]any
	h.Do("GET", "/api/issues/"+issueID+"/comments", nil).JSON(t, &comments)
	require.NotEmpty(t, comments)
	last := comments[len(comments)-1]
	require.Equal(t, "Done by the script", last["body"])
	require.Equal(t, agentID, last["authorAgentId"])

	var run map[string]any
	sdktest.WaitFor(t, 30*time.Second, func() bool {
		var runs []map[string]any
		res := h.Do("GET", "/api/companies/"+company+"/heartbeat-runs?agentId="+agentID, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res.JSON(t, &runs)
		for _, r := range runs {
			if r["status"] == "succeeded" {
				run = r
				return true
			}
		}
		return false
	}, "a succeeded run")
	runID := run["id"].(string)

	res = h.Do("GET", "/api/heartbeat-runs/"+runID+"/log", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Contains(t, string(res.Body), "run "+runID+" of agent "+agentID+" on issue "+issueID)
	require.Contains(t, string(res.Body), "finished")

	var entries []map[string]any
	h.Do("GET", "/api/companies/"+company+"/activity?limit=200", nil).JSON(t, &entries)
	var actions []string
	for _, e := range entries {
		actions = append(actions, e["action"].(string))
	}
	trail := strings.Join(actions, " ")
	for _, want := range []string{"issue.created", "issue.checked_out", "issue.comment.created", "issue.updated"} {
		require.Contains(t, trail, want)
	}
	require.Contains(t, trail, "heartbeat.", "the run itself is in the activity trail")
}
