package agents_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAgentPermissions(t *testing.T) {
	t.Parallel()
	h := startAgents(t)
	company := h.CreateCompany("Permissions")
	ceo, worker := orgChart(t, h, company)
	wid := worker["id"].(string)
	path := "/api/agents/" + wid + "/permissions"

	res := h.Do("PATCH", path, map[string]any{"canAssignTasks": true})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	got := res.Map(t)
	require.Equal(t, map[string]any{"canCreateAgents": false, "canAssignTasks": true}, got["permissions"], "both flags as stored")
	require.Contains(t, got, "chainOfCommand")
	require.Equal(t, true, got["access"].(map[string]any)["canAssignTasks"])
	grant := func() bool {
		var n int
		require.NoError(t, h.Kernel.Pool.QueryRow(t.Context(), `SELECT count(*) FROM kernel.principal_permission_grants
			WHERE principal_type = 'agent' AND principal_id = $1 AND permission_key = 'tasks:assign'`, wid).Scan(&n))
		return n == 1
	}
	require.True(t, grant(), "canAssignTasks is the kernel's tasks:assign grant")

	res = h.Do("PATCH", path, map[string]any{"canAssignTasks": false, "canCreateAgents": true}, agentKey(t, h, ceo["id"].(string))...)
	require.Equal(t, http.StatusOK, res.Status, "the CEO agent may change permissions: %s", res.Body)
	got = res.Map(t)
	require.Equal(t, map[string]any{"canCreateAgents": true, "canAssignTasks": false}, got["permissions"])
	require.Equal(t, "agent_creator", got["access"].(map[string]any)["taskAssignSource"])
	require.False(t, grant(), "and clearing it revokes the grant")

	res = h.Do("PATCH", path, map[string]any{"canCreateAgents": false})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, false, res.Map(t)["access"].(map[string]any)["canAssignTasks"])

	res = h.Do("PATCH", "/api/agents/"+ceo["id"].(string)+"/permissions", map[string]any{"canCreateAgents": false}, agentKey(t, h, wid)...)
	require.Equal(t, http.StatusForbidden, res.Status, "a non-CEO agent may not: %s", res.Body)

	res = h.Do("PATCH", path, map[string]any{"canCreateAgents": "yes"})
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	res = h.Do("PATCH", path, map[string]any{"canFly": true})
	require.Equal(t, http.StatusOK, res.Status, "unknown fields are ignored: %s", res.Body)
	require.Equal(t, map[string]any{"canCreateAgents": false, "canAssignTasks": false}, res.Map(t)["permissions"])
	res = h.Do("PATCH", "/api/agents/00000000-0000-4000-8000-000000000000/permissions", map[string]any{"canCreateAgents": true})
	require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
}
