package agents_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMe(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Me")
	ceo, worker := orgChart(t, h, company)
	wid := worker["id"].(string)
	key := agentKey(t, h, wid)

	res := h.Do("GET", "/api/agents/me", nil, key...)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	got := res.Map(t)
	require.Equal(t, wid, got["id"])
	require.Equal(t, worker["adapterConfig"], got["adapterConfig"])
	require.Len(t, got["chainOfCommand"], 1)
	require.NotNil(t, got["access"])

	res = h.Do("GET", "/api/agents/me", nil)
	require.Equal(t, http.StatusUnauthorized, res.Status, "%s", res.Body)
	require.Equal(t, "Agent authentication required", res.Map(t)["error"])
	res = h.Do("GET", "/api/agents/me", nil, "Authorization", "Bearer not-a-key")
	require.Equal(t, http.StatusUnauthorized, res.Status, "%s", res.Body)

	t.Run("inbox-lite", func(t *testing.T) {
		blocker := h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "Blocker", "status": "todo"})
		require.Equal(t, http.StatusCreated, blocker.Status, "%s", blocker.Body)
		bid := blocker.Map(t)["id"].(string)
		res := h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "Assigned", "status": "todo",
			"assigneeAgentId": wid, "blockedByIssueIds": []string{bid}})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		iid := res.Map(t)["id"].(string)
		res = h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "Someone else's", "assigneeAgentId": ceo["id"], "status": "todo"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)

		res = h.Do("GET", "/api/agents/me/inbox-lite", nil, key...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var items []map[string]any
		res.JSON(t, &items)
		require.Len(t, items, 1, "%s", res.Body)
		it := items[0]
		require.Equal(t, iid, it["id"])
		require.Equal(t, "Assigned", it["title"])
		require.NotEmpty(t, it["identifier"])
		require.Equal(t, false, it["dependencyReady"])
		require.EqualValues(t, 1, it["unresolvedBlockerCount"])
		require.Equal(t, []any{bid}, it["unresolvedBlockerIssueIds"])
		require.Contains(t, it, "activeRun")

		res = h.Do("GET", "/api/agents/me/inbox-lite", nil)
		require.Equal(t, http.StatusUnauthorized, res.Status, "%s", res.Body)
	})

	t.Run("secrets", func(t *testing.T) {
		res := h.Do("GET", "/api/agents/me/secrets", nil, key...)
		require.Equal(t, http.StatusForbidden, res.Status, "a run context is required: %s", res.Body)
		require.Equal(t, "Agent run context required", res.Map(t)["error"])
		withRun := append(append([]string{}, key...), "X-Service-Run-Id", "00000000-0000-4000-8000-00000000beef")
		res = h.Do("GET", "/api/agents/me/secrets", nil, withRun...)
		require.Equal(t, http.StatusForbidden, res.Status, "a run id that is not a live run of the agent: %s", res.Body)
		res = h.Do("POST", "/api/agents/me/secrets/API_KEY/value", nil, key...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		res = h.Do("GET", "/api/agents/me/secrets", nil)
		require.Equal(t, http.StatusUnauthorized, res.Status, "%s", res.Body)
	})
}
