package work_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

// TestCheckoutForRun checks issues out for runs through work.issues.checkoutForRun, the
// call the heartbeat engine makes as a run starts.
func TestCheckoutForRun(t *testing.T) {
	t.Parallel()
	h := issStart(t)
	company := h.CreateCompany("Run Checkout Co")
	other := h.CreateCompany("Other Run Co")
	agent := h.CreateAgent(company, "Runner", "engineer")
	rival := h.CreateAgent(company, "Rival", "engineer")
	system := &extensionv1.Actor{Type: "system"}
	statuses := []string{"backlog", "todo", "in_progress"}

	t.Run("ChecksOutForTheRun", func(t *testing.T) {
		t.Parallel()
		iss := issCreate(t, h, company, map[string]any{"title": "Take me", "status": "todo"})
		runID := uuid.NewString()
		out, perr := issCall(t, h, "issues.checkoutForRun", company, system,
			map[string]any{"id": iss["identifier"], "agentId": agent.ID, "runId": runID, "expectedStatuses": statuses})
		require.Nil(t, perr, "%v", perr)
		var got map[string]any
		require.NoError(t, json.Unmarshal(out, &got))
		require.Equal(t, "in_progress", got["status"])
		require.Equal(t, runID, got["checkoutRunId"])
		require.Equal(t, runID, got["executionRunId"])
		view := h.Do("GET", "/api/issues/"+iss["id"].(string), nil).Map(t)
		require.Equal(t, agent.ID, view["assigneeAgentId"])
		require.NotNil(t, view["startedAt"])

		// The same run again is idempotent; another agent's run is a conflict.
		_, perr = issCall(t, h, "issues.checkoutForRun", company, system,
			map[string]any{"id": iss["id"], "agentId": agent.ID, "runId": runID, "expectedStatuses": statuses})
		require.Nil(t, perr, "%v", perr)
		_, perr = issCall(t, h, "issues.checkoutForRun", company, system,
			map[string]any{"id": iss["id"], "agentId": rival.ID, "runId": uuid.NewString(), "expectedStatuses": statuses})
		require.NotNil(t, perr)
		require.EqualValues(t, http.StatusConflict, perr.Status)
		require.Equal(t, "Issue checkout conflict", perr.Message)
	})

	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		iss := issCreate(t, h, company, map[string]any{"title": "Guarded", "status": "todo"})
		for name, tc := range map[string]struct {
			company string
			actor   *extensionv1.Actor
			in      map[string]any
			status  int32
		}{
			"BadRunID": {company, system, map[string]any{"id": iss["id"], "agentId": agent.ID, "runId": "nope", "expectedStatuses": statuses}, http.StatusBadRequest},
			"NotSystem": {company, issBoard, map[string]any{"id": iss["id"], "agentId": agent.ID, "runId": uuid.NewString(),
				"expectedStatuses": statuses}, http.StatusForbidden},
			"OtherCompany": {other, system, map[string]any{"id": iss["id"], "agentId": agent.ID, "runId": uuid.NewString(),
				"expectedStatuses": statuses}, http.StatusNotFound},
			"UnknownField": {company, system, map[string]any{"id": iss["id"], "bogus": 1}, http.StatusBadRequest},
		} {
			_, perr := issCall(t, h, "issues.checkoutForRun", tc.company, tc.actor, tc.in)
			require.NotNil(t, perr, name)
			require.EqualValues(t, tc.status, perr.Status, "%s: %v", name, perr)
		}
	})
}
