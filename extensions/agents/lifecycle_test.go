package agents_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAgentLifecycle(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Lifecycle")
	ag := createAgent(t, h, company, map[string]any{"name": "Cycler", "role": "engineer"})
	id := ag["id"].(string)
	key := agentKey(t, h, id)

	post := func(action string) map[string]any {
		t.Helper()
		res := h.Do("POST", "/api/agents/"+id+"/"+action, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s: %s", action, res.Body)
		return res.Map(t)
	}
	got := post("pause")
	require.Equal(t, "paused", got["status"])
	require.Equal(t, "manual", got["pauseReason"])
	require.NotNil(t, got["pausedAt"])
	got = post("resume")
	require.Equal(t, "idle", got["status"])
	require.Nil(t, got["pauseReason"])
	got = post("clear-error")
	require.Equal(t, "idle", got["status"])

	res := h.Do("POST", "/api/agents/"+id+"/approve", nil)
	require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	require.Equal(t, "Agent is not pending approval", res.Map(t)["error"])

	res = h.Do("POST", "/api/agents/"+id+"/pause", nil, key...)
	require.Equal(t, http.StatusForbidden, res.Status, "lifecycle routes are board only: %s", res.Body)

	res = h.Do("GET", "/api/agents/me", nil, key...)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	got = post("terminate")
	require.Equal(t, "terminated", got["status"])
	res = h.Do("GET", "/api/agents/me", nil, key...)
	require.Equal(t, http.StatusUnauthorized, res.Status, "a terminated agent's key stops working: %s", res.Body)

	res = h.Do("POST", "/api/agents/"+id+"/resume", nil)
	require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	res = h.Do("POST", "/api/agents/"+id+"/pause", nil)
	require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)

	res = h.Do("POST", "/api/agents/00000000-0000-4000-8000-000000000000/pause", nil)
	require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)

	t.Run("approve a pending agent", func(t *testing.T) {
		res := h.Do("PATCH", "/api/companies/"+company, map[string]any{"requireBoardApprovalForNewAgents": true})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = h.Do("POST", "/api/companies/"+company+"/agent-hires", map[string]any{"name": "Waiting"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		pid := res.Map(t)["agent"].(map[string]any)["id"].(string)
		res = h.Do("POST", "/api/agents/"+pid+"/pause", nil)
		require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
		res = h.Do("POST", "/api/agents/"+pid+"/approve", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "idle", res.Map(t)["status"])
	})

	t.Run("delete", func(t *testing.T) {
		victim := createAgent(t, h, company, map[string]any{"name": "Victim"})
		vid := victim["id"].(string)
		vkey := agentKey(t, h, vid)
		res := h.Do("DELETE", "/api/agents/"+vid, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = h.Do("GET", "/api/agents/me", nil, vkey...)
		require.Equal(t, http.StatusUnauthorized, res.Status, "%s", res.Body)
		res = h.Do("GET", "/api/companies/"+company+"/agents", nil)
		var list []map[string]any
		res.JSON(t, &list)
		for _, a := range list {
			require.NotEqual(t, vid, a["id"])
		}
	})
}
