package agents_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

func TestDashboardCountsMethod(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Dash Agents")
	other := h.CreateCompany("Dash Agents Other")
	outsider := h.CreateAgent(other, "Outsider", "engineer")

	// Agents made directly in the kernel (no configuration row) count too.
	h.CreateAgent(company, "Bare", "engineer")
	createAgent(t, h, company, map[string]any{"name": "Idle"})
	paused := createAgent(t, h, company, map[string]any{"name": "Paused"})["id"].(string)
	budget := createAgent(t, h, company, map[string]any{"name": "Budget"})["id"].(string)
	budgetGone := createAgent(t, h, company, map[string]any{"name": "Budget Gone"})["id"].(string)
	res := h.Do("POST", "/api/agents/"+paused+"/pause", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	for _, id := range []string{budget, budgetGone} {
		invoke(t, h, "agents.pauseForBudget", company, map[string]any{"agentId": id})
	}
	// A terminated agent keeps its last pause reason but is in no bucket.
	res = h.Do("POST", "/api/agents/"+budgetGone+"/terminate", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	call := func(companyID string, actor *extensionv1.Actor, in any) (map[string]any, *extensionv1.Error) {
		b, err := json.Marshal(in)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := h.Supervisor.Invoke(ctx, "kernel", &hostv1.InvokeRequest{Method: "agents.dashboardCounts", InputJson: b,
			CompanyId: companyID, Actor: actor})
		require.NoError(t, err)
		if res.Error != nil {
			return nil, res.Error
		}
		var out map[string]any
		require.NoError(t, json.Unmarshal(res.OutputJson, &out))
		return out, nil
	}
	system := &extensionv1.Actor{Type: "system"}
	out, e := call(company, system, map[string]any{"companyId": company})
	require.Nil(t, e, "%v", e)
	for k, v := range map[string]float64{"active": 2, "running": 0, "paused": 2, "error": 0, "pausedByBudget": 1} {
		require.Equal(t, v, out[k], k)
	}
	days := out["runActivity"].([]any)
	require.Len(t, days, 14)
	require.Equal(t, time.Now().UTC().Format(time.DateOnly), days[13].(map[string]any)["date"])
	require.Equal(t, time.Now().UTC().AddDate(0, 0, -13).Format(time.DateOnly), days[0].(map[string]any)["date"])

	// The call's company wins over the input's; the input's serves when the call has none.
	out, e = call("", system, map[string]any{"companyId": other})
	require.Nil(t, e, "%v", e)
	require.Equal(t, 1.0, out["active"])

	// Refusals: no company, an actor outside the company.
	_, e = call("", system, map[string]any{})
	require.NotNil(t, e)
	require.EqualValues(t, http.StatusBadRequest, e.Status)
	_, e = call(company, &extensionv1.Actor{Type: "agent", AgentId: outsider.ID, CompanyId: other}, map[string]any{})
	require.NotNil(t, e)
	require.EqualValues(t, http.StatusForbidden, e.Status)
}
