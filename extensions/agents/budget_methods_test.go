package agents_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

func TestBudgetMethods(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Budget Methods Co")
	ag := createAgent(t, h, company, map[string]any{"name": "Spender", "role": "engineer",
		"adapterConfig": map[string]any{"command": "sh", "args": []string{"-c", "sleep 30"}}})
	id := ag["id"].(string)
	get := func() map[string]any {
		res := h.Do("GET", "/api/agents/"+id, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		return res.Map(t)
	}
	callErr := func(method, companyID string, in any) *sdk.Error {
		b, err := json.Marshal(in)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := h.Supervisor.Invoke(ctx, "kernel", &hostv1.InvokeRequest{Method: method, InputJson: b, CompanyId: companyID})
		require.NoError(t, err)
		require.NotNil(t, res.Error, "%s should fail", method)
		return sdk.FromProtoError(res.Error).(*sdk.Error)
	}

	t.Run("SetBudget", func(t *testing.T) {
		out := invoke(t, h, "agents.setBudget", company, map[string]any{"agentId": id, "budgetMonthlyCents": 500, "spentMonthlyCents": 20})
		require.EqualValues(t, 500, out["budgetMonthlyCents"])
		require.EqualValues(t, 20, out["spentMonthlyCents"])
		require.NotNil(t, out["orgChainHealth"])
		out = invoke(t, h, "agents.setBudget", company, map[string]any{"agentId": id, "spentMonthlyCents": 35})
		require.EqualValues(t, 500, out["budgetMonthlyCents"], "absent fields are left alone")
		got := get()
		require.EqualValues(t, 500, got["budgetMonthlyCents"])
		require.EqualValues(t, 35, got["spentMonthlyCents"])
		require.Equal(t, http.StatusBadRequest, callErr("agents.setBudget", company, map[string]any{"agentId": id, "spentMonthlyCents": -1}).Status)
		require.Equal(t, http.StatusNotFound, callErr("agents.setBudget", h.CreateCompany("Elsewhere"), map[string]any{"agentId": id, "spentMonthlyCents": 1}).Status)

		// An identity without a configuration row gets one.
		bare := h.CreateAgent(company, "Bare", "general")
		out = invoke(t, h, "agents.setBudget", company, map[string]any{"agentId": bare.ID, "spentMonthlyCents": 7})
		require.EqualValues(t, 7, out["spentMonthlyCents"])
	})

	t.Run("SetSpend", func(t *testing.T) {
		bare := h.CreateAgent(company, "Bare Spender", "general") // no configuration row yet
		stranger := h.CreateAgent(h.CreateCompany("Stranger Co"), "Stranger", "general")
		out := invoke(t, h, "agents.setSpend", company, map[string]any{"spent": map[string]any{id: 120, bare.ID: 9, stranger.ID: 5}})
		require.Equal(t, map[string]any{id: float64(500), bare.ID: float64(0)}, out["agents"],
			"the budgets of the company's agents; another company's agent is left out")
		require.EqualValues(t, 120, get()["spentMonthlyCents"])
		res := h.Do("GET", "/api/agents/"+bare.ID, nil)
		require.EqualValues(t, 9, res.Map(t)["spentMonthlyCents"])
		res = h.Do("GET", "/api/agents/"+stranger.ID, nil)
		require.EqualValues(t, 0, res.Map(t)["spentMonthlyCents"], "untouched")
		require.Equal(t, http.StatusBadRequest, callErr("agents.setSpend", company, map[string]any{"spent": map[string]any{id: -1}}).Status)
		require.Equal(t, http.StatusBadRequest, callErr("agents.setSpend", company, map[string]any{"spent": map[string]any{"nope": 1}}).Status)
	})

	t.Run("PauseAndResume", func(t *testing.T) {
		run := wake(t, h, id, nil)
		waitRun(t, h, run["id"].(string), 20*time.Second, "running")
		out := invoke(t, h, "agents.pauseForBudget", company, map[string]any{"agentId": id})
		require.Equal(t, "paused", out["status"])
		require.Equal(t, "budget", out["pauseReason"])
		waitRun(t, h, run["id"].(string), 20*time.Second, "cancelled")
		out = invoke(t, h, "agents.resumeFromBudget", company, map[string]any{"agentId": id})
		require.Equal(t, "idle", out["status"])
		require.Nil(t, out["pauseReason"])

		// A manual pause is neither overwritten nor lifted by budget enforcement.
		res := h.Do("POST", "/api/agents/"+id+"/pause", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "manual", invoke(t, h, "agents.pauseForBudget", company, map[string]any{"agentId": id})["pauseReason"])
		out = invoke(t, h, "agents.resumeFromBudget", company, map[string]any{"agentId": id})
		require.Equal(t, "paused", out["status"])
		require.Equal(t, "manual", out["pauseReason"])
		res = h.Do("POST", "/api/agents/"+id+"/resume", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	})

	t.Run("CancelRuns", func(t *testing.T) {
		issue, other := uuid.NewString(), uuid.NewString()
		run := wake(t, h, id, map[string]any{"payload": map[string]any{"issueId": issue}})
		waitRun(t, h, run["id"].(string), 20*time.Second, "running")
		require.EqualValues(t, 0, invoke(t, h, "agents.cancelRuns", company, map[string]any{"companyId": company, "issueIds": []string{other}})["cancelled"])
		require.EqualValues(t, 0, invoke(t, h, "agents.cancelRuns", company, map[string]any{"companyId": company, "issueIds": []string{}})["cancelled"])
		require.Equal(t, "running", getRun(t, h, run["id"].(string))["status"])
		require.EqualValues(t, 1, invoke(t, h, "agents.cancelRuns", company, map[string]any{"companyId": company, "issueIds": []string{issue}})["cancelled"])
		waitRun(t, h, run["id"].(string), 20*time.Second, "cancelled")

		run = wake(t, h, id, nil)
		waitRun(t, h, run["id"].(string), 20*time.Second, "running")
		require.EqualValues(t, 1, invoke(t, h, "agents.cancelRuns", company, map[string]any{"companyId": company})["cancelled"])
		waitRun(t, h, run["id"].(string), 20*time.Second, "cancelled")
	})
}
