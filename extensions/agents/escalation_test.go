package agents_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAgentsCannotPassTheBoard performs the escalations an agent with configuration
// rights could try through PATCH /api/agents/{agentId} and sees each refused, while the
// board may make the same changes.
func TestAgentsCannotPassTheBoard(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Escalation Co")
	ceo := createAgent(t, h, company, map[string]any{"name": "Boss", "role": "ceo"})
	creator := createAgent(t, h, company, map[string]any{"name": "Creator", "role": "engineer"})
	worker := createAgent(t, h, company, map[string]any{"name": "Worker", "role": "engineer"})
	res := h.Do("PATCH", "/api/agents/"+creator["id"].(string)+"/permissions", map[string]any{"canCreateAgents": true})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	creatorKey := agentKey(t, h, creator["id"].(string))
	ceoKey := agentKey(t, h, ceo["id"].(string))
	res = h.Do("POST", "/api/agents/"+creator["id"].(string)+"/pause", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	for _, tc := range []struct {
		name, target string
		body         map[string]any
		key          []string
		want         string
	}{
		{"PausedAgentUnpausesItself", creator["id"].(string), map[string]any{"status": "idle"}, creatorKey,
			"Agents cannot change an agent's status; use the lifecycle routes"},
		{"AgentPausesAnother", worker["id"].(string), map[string]any{"status": "paused"}, creatorKey,
			"Agents cannot change an agent's status; use the lifecycle routes"},
		{"AgentMakesItselfCEO", creator["id"].(string), map[string]any{"role": "ceo"}, creatorKey, "Only the board can make an agent the CEO"},
		{"CEOMakesAnotherCEO", worker["id"].(string), map[string]any{"role": "ceo"}, ceoKey, "Only the board can make an agent the CEO"},
		{"AgentChangesItsOwnRole", creator["id"].(string), map[string]any{"role": "cto"}, creatorKey, "Agents cannot change their own role"},
		{"AgentRaisesItsOwnBudget", ceo["id"].(string), map[string]any{"budgetMonthlyCents": 1_000_000}, ceoKey, "Agents cannot change their own budget"},
	} {
		res := h.Do("PATCH", "/api/agents/"+tc.target, tc.body, tc.key...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s: %s", tc.name, res.Body)
		require.Equal(t, tc.want, res.Map(t)["error"], tc.name)
	}
	got := h.Do("GET", "/api/agents/"+creator["id"].(string), nil).Map(t)
	require.Equal(t, "paused", got["status"])
	require.Equal(t, "engineer", got["role"])

	// The CEO may still configure others within its rights; the board may do all of it.
	res = h.Do("PATCH", "/api/agents/"+worker["id"].(string), map[string]any{"title": "Builder", "role": "qa"}, ceoKey...)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = h.Do("PATCH", "/api/agents/"+creator["id"].(string), map[string]any{"role": "ceo", "status": "idle"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, "ceo", res.Map(t)["role"])
}

// TestAgentsCannotReachUnboundSecretsThroughConfig shows a CEO agent refused when it points
// an agent's env (its own, another's, or a hire's) at a company secret the board has not
// bound to that agent; a board binding, or the board itself, makes the reference fine.
func TestAgentsCannotReachUnboundSecretsThroughConfig(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Secret Ref Co")
	ceo := createAgent(t, h, company, map[string]any{"name": "Boss", "role": "ceo"})
	worker := createAgent(t, h, company, map[string]any{"name": "Worker", "role": "engineer"})
	ceoKey := agentKey(t, h, ceo["id"].(string))
	res := h.Do("POST", "/api/companies/"+company+"/secrets", map[string]any{"name": "Payroll key", "key": "PAYROLL", "value": "top-secret"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	secretID := res.Map(t)["id"].(string)
	ref := map[string]any{"adapterConfig": map[string]any{"env": map[string]any{"PAYROLL": map[string]any{"type": "secret_ref", "secretId": secretID}}}}

	for _, target := range []string{ceo["id"].(string), worker["id"].(string)} {
		res := h.Do("PATCH", "/api/agents/"+target, ref, ceoKey...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		require.Equal(t, "Agents can only reference secrets the board has bound to the agent", res.Map(t)["error"])
	}
	hire := map[string]any{"name": "Sneaky", "role": "engineer", "adapterConfig": ref["adapterConfig"]}
	res = h.Do("POST", "/api/companies/"+company+"/agent-hires", hire, ceoKey...)
	require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)

	// Once the board binds the secret to the worker, the CEO may wire it into the worker's env.
	res = h.Do("POST", "/api/secrets/"+secretID+"/bindings", map[string]any{"targetType": "agent", "targetId": worker["id"]})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	res = h.Do("PATCH", "/api/agents/"+worker["id"].(string), ref, ceoKey...)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	// Still not into its own.
	res = h.Do("PATCH", "/api/agents/"+ceo["id"].(string), ref, ceoKey...)
	require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	// The board may reference any company secret.
	res = h.Do("PATCH", "/api/agents/"+ceo["id"].(string), ref)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	// A reference the configuration already holds may stay in a later agent patch.
	res = h.Do("PATCH", "/api/agents/"+ceo["id"].(string), map[string]any{"title": "Chief", "adapterConfig": ref["adapterConfig"]}, ceoKey...)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
}
