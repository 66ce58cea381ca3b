package agents_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestConfigRevisionsAndRollback(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Revisions")
	ag := createAgent(t, h, company, map[string]any{"name": "Reviser", "adapterConfig": map[string]any{"model": "a"}})
	id := ag["id"].(string)

	res := h.Do("PATCH", "/api/agents/"+id, map[string]any{"adapterConfig": map[string]any{"model": "b"}, "capabilities": "v2"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = h.Do("PATCH", "/api/agents/"+id, map[string]any{"adapterConfig": map[string]any{"model": "c"}})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = h.Do("PATCH", "/api/agents/"+id, map[string]any{"status": "paused"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	res = h.Do("GET", "/api/agents/"+id+"/config-revisions", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var revs []map[string]any
	res.JSON(t, &revs)
	require.Len(t, revs, 2, "a status-only patch records no revision")
	require.Equal(t, []any{"adapterConfig"}, revs[0]["changedKeys"])
	require.Equal(t, []any{"capabilities", "adapterConfig"}, revs[1]["changedKeys"])
	require.Equal(t, "patch", revs[1]["source"])
	require.Equal(t, map[string]any{"model": "a"}, revs[1]["beforeConfig"].(map[string]any)["adapterConfig"])

	res = h.Do("POST", "/api/agents/"+id+"/config-revisions/"+revs[1]["id"].(string)+"/rollback", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	got := res.Map(t)
	require.Equal(t, map[string]any{"model": "b"}, got["adapterConfig"])
	require.Equal(t, "v2", got["capabilities"])

	res = h.Do("GET", "/api/agents/"+id+"/config-revisions", nil)
	res.JSON(t, &revs)
	require.Len(t, revs, 3)
	require.Equal(t, "rollback", revs[0]["source"])

	res = h.Do("POST", "/api/agents/"+id+"/config-revisions/00000000-0000-4000-8000-000000000000/rollback", nil)
	require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)

	t.Run("peers without agents:create cannot read or roll back", func(t *testing.T) {
		peer := createAgent(t, h, company, map[string]any{"name": "Peer"})
		key := agentKey(t, h, peer["id"].(string))
		res := h.Do("GET", "/api/agents/"+id+"/config-revisions", nil, key...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		res = h.Do("POST", "/api/agents/"+id+"/config-revisions/"+revs[0]["id"].(string)+"/rollback", nil, key...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	})
}

func TestSkillsSync(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Skills")
	ag := createAgent(t, h, company, map[string]any{"name": "Skilled", "desiredSkills": []string{"old"}})
	id := ag["id"].(string)
	require.Equal(t, []any{"old"}, ag["desiredSkills"])

	res := h.Do("POST", "/api/agents/"+id+"/skills/sync", map[string]any{"desiredSkills": "a, b,a,,c"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, []any{"a", "b", "c"}, res.Map(t)["desiredSkills"])

	res = h.Do("POST", "/api/agents/"+id+"/skills/sync", map[string]any{"desiredSkills": []string{"z"}}, agentKey(t, h, id)...)
	require.Equal(t, http.StatusOK, res.Status, "an agent syncs its own skills: %s", res.Body)
	res = h.Do("GET", "/api/agents/"+id, nil)
	require.Equal(t, []any{"z"}, res.Map(t)["desiredSkills"])

	res = h.Do("POST", "/api/agents/"+id+"/skills/sync", map[string]any{"desiredSkills": 3})
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	res = h.Do("POST", "/api/agents/"+id+"/skills/sync", map[string]any{})
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)

	res = h.Do("GET", "/api/agents/"+id+"/config-revisions", nil)
	var revs []map[string]any
	res.JSON(t, &revs)
	require.Len(t, revs, 2)
	require.Equal(t, "skills_sync", revs[0]["source"])
}
