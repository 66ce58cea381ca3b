package kernel_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/kernel"
)

func TestAgentKeys(t *testing.T) {
	t.Parallel()
	k, base := authStartKernel(t, authLocalConfig())
	ctx := context.Background()
	companyID := authCompany(t, k, "Acme")

	t.Run("CreateShownOnceStoredHashed", func(t *testing.T) {
		t.Parallel()
		agent := authAgent(t, k, companyID, "Builder")
		r := authCall(t, base, "POST", "/api/agents/"+agent.ID+"/keys", nil)
		require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)
		created := r.JSON(t)
		authRequireSameKeys(t, "../../shared/reference-samples/agent_key_create.json", created)
		require.Equal(t, "default", created["name"])
		require.Equal(t, map[string]any{"kind": "standard"}, created["scope"])
		require.Equal(t, kernel.LocalBoardUserID, created["responsibleUserId"])
		token := created["token"].(string)
		require.Regexp(t, `^pcp_[0-9a-f]{48}$`, token)

		var row string
		require.NoError(t, k.Pool.QueryRow(ctx, `SELECT row_to_json(k)::text FROM kernel.agent_api_keys k WHERE id = $1`, created["id"]).Scan(&row))
		require.NotContains(t, row, token, "plaintext never stored")
		require.Contains(t, row, kernel.HashToken(token))

		r = authCall(t, base, "GET", "/api/agents/"+agent.ID+"/keys", nil)
		require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
		require.NotContains(t, string(r.Body), token)
		var list []map[string]any
		r.Decode(t, &list)
		require.Len(t, list, 1)
		require.ElementsMatch(t, []string{"id", "name", "scope", "lastUsedAt", "revokedAt", "createdAt"}, authKeysOf(list[0]))
		require.Equal(t, created["id"], list[0]["id"])
		require.Nil(t, list[0]["lastUsedAt"])

		who := authCall(t, base, "GET", "/api/auth-test/whoami", nil, authBearer(token)).JSON(t)
		require.Equal(t, agent.ID, who["agentId"])

		var action string
		require.NoError(t, k.Pool.QueryRow(ctx, `SELECT action FROM kernel.activity_log WHERE company_id = $1 AND entity_id = $2 AND details->>'keyId' = $3`,
			companyID, agent.ID, created["id"]).Scan(&action))
		require.Equal(t, "agent_key.created", action)
	})

	t.Run("NameAndScope", func(t *testing.T) {
		t.Parallel()
		agent := authAgent(t, k, companyID, "Scoped")
		tests := []struct {
			name   string
			body   any
			status int
			scope  string
		}{
			{"TaskBridge", map[string]any{"name": "bridge", "scope": map[string]any{"kind": "task_bridge"}}, http.StatusCreated, "task_bridge"},
			{"SkillTest", map[string]any{"scope": map[string]any{"kind": "skill_test"}}, http.StatusCreated, "skill_test"},
			{"EmptyScopeIsStandard", map[string]any{"scope": map[string]any{}}, http.StatusCreated, "standard"},
			{"UnknownKind", map[string]any{"scope": map[string]any{"kind": "root"}}, http.StatusBadRequest, ""},
			{"UnknownFieldIgnored", map[string]any{"bogus": true}, http.StatusCreated, "standard"},
			{"Malformed", "{", http.StatusBadRequest, ""},
		}
		for _, tt := range tests {
			r := authCall(t, base, "POST", "/api/agents/"+agent.ID+"/keys", tt.body)
			require.Equal(t, tt.status, r.Status, "%s: %s", tt.name, r.Body)
			if tt.status == http.StatusCreated {
				require.Equal(t, tt.scope, r.JSON(t)["scope"].(map[string]any)["kind"], tt.name)
			} else {
				require.Equal(t, "Validation error", r.JSON(t)["error"], tt.name)
			}
		}
	})

	t.Run("RefusedForUnusableAgents", func(t *testing.T) {
		t.Parallel()
		terminated := authAgent(t, k, companyID, "Gone")
		_, err := k.AgentSetStatus(ctx, terminated.ID, kernel.AgentStatusTerminated)
		require.NoError(t, err)
		pending, err := k.AgentCreate(ctx, &kernel.AgentCreateParams{CompanyID: companyID, Name: "Waiting", Status: kernel.AgentStatusPendingApproval})
		require.NoError(t, err)
		tests := []struct {
			name  string
			agent *kernel.AgentIdentity
		}{
			{"terminated", terminated},
			{"pending_approval", pending},
		}
		for _, tt := range tests {
			authCall(t, base, "POST", "/api/agents/"+tt.agent.ID+"/keys", map[string]any{}).
				requireError(t, http.StatusConflict, "Cannot create keys for an agent in status "+tt.name, "agent_status_conflict")
		}
		var n int
		require.NoError(t, k.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel.agent_api_keys WHERE agent_id IN ($1, $2)`, terminated.ID, pending.ID).Scan(&n))
		require.Zero(t, n)
	})

	t.Run("MissingAgent", func(t *testing.T) {
		t.Parallel()
		for _, id := range []string{"0190a0a0-0000-7000-8000-000000000000", "builder"} {
			authCall(t, base, "POST", "/api/agents/"+id+"/keys", map[string]any{}).requireError(t, http.StatusNotFound, "Agent not found", "")
			authCall(t, base, "GET", "/api/agents/"+id+"/keys", nil).requireError(t, http.StatusNotFound, "Agent not found", "")
		}
	})

	t.Run("Revoke", func(t *testing.T) {
		t.Parallel()
		agent := authAgent(t, k, companyID, "Revokee")
		r := authCall(t, base, "POST", "/api/agents/"+agent.ID+"/keys", map[string]any{"name": "temp"})
		require.Equal(t, http.StatusCreated, r.Status)
		created := r.JSON(t)
		token, keyID := created["token"].(string), created["id"].(string)
		require.Equal(t, http.StatusOK, authCall(t, base, "GET", "/api/auth-test/whoami", nil, authBearer(token)).Status)

		r = authCall(t, base, "DELETE", "/api/agents/"+agent.ID+"/keys/"+keyID, nil)
		require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
		require.NotNil(t, r.JSON(t)["revokedAt"])
		authCall(t, base, "GET", "/api/auth-test/whoami", nil, authBearer(token)).requireError(t, http.StatusUnauthorized, "", "agent_key_unknown")

		// Revoking again is a no-op; another agent's path does not reach the key.
		require.Equal(t, http.StatusOK, authCall(t, base, "DELETE", "/api/agents/"+agent.ID+"/keys/"+keyID, nil).Status)
		other := authAgent(t, k, companyID, "Bystander")
		authCall(t, base, "DELETE", "/api/agents/"+other.ID+"/keys/"+keyID, nil).requireError(t, http.StatusNotFound, "Agent API key not found", "")
		authCall(t, base, "DELETE", "/api/agents/"+agent.ID+"/keys/nope", nil).requireError(t, http.StatusNotFound, "Agent API key not found", "")

		var list []map[string]any
		authCall(t, base, "GET", "/api/agents/"+agent.ID+"/keys", nil).Decode(t, &list)
		require.Len(t, list, 1)
		require.NotNil(t, list[0]["revokedAt"])
		require.NotNil(t, list[0]["lastUsedAt"])

		var n int
		require.NoError(t, k.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel.activity_log WHERE action = 'agent_key.revoked' AND details->>'keyId' = $1`, keyID).Scan(&n))
		require.Equal(t, 1, n)
	})
}

// TestAgentKeysAuthorization covers who may manage an agent's keys in authenticated mode.
func TestAgentKeysAuthorization(t *testing.T) {
	t.Parallel()
	k, base := authStartKernel(t, authAuthenticatedConfig())
	companyA := authCompany(t, k, "Alpha")
	companyB := authCompany(t, k, "Beta")
	agentA := authAgent(t, k, companyA, "Builder")
	agentB := authAgent(t, k, companyB, "Builder")

	owner, ownerID := authSignUp(t, base, "owner@example.com")
	authMembership(t, k, companyA, ownerID, "owner")
	viewer, viewerID := authSignUp(t, base, "viewer@example.com")
	authMembership(t, k, companyA, viewerID, "viewer")
	agentKey := authInsertAgentKey(t, k, agentA)

	tests := []struct {
		name   string
		agent  string
		opt    authOpt
		status int
		text   string
	}{
		{"Anonymous", agentA.ID, func(*http.Request) {}, http.StatusUnauthorized, "Unauthorized"},
		{"OwnerOwnCompany", agentA.ID, authCookie(owner), http.StatusCreated, ""},
		{"OwnerOtherCompany", agentB.ID, authCookie(owner), http.StatusForbidden, "access"},
		{"ViewerLacksPermission", agentA.ID, authCookie(viewer), http.StatusForbidden, "agents:create"},
		{"AgentKey", agentA.ID, authBearer(agentKey), http.StatusForbidden, "Board access required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := authCall(t, base, "POST", "/api/agents/"+tt.agent+"/keys", map[string]any{}, tt.opt)
			if tt.status == http.StatusCreated {
				require.Equal(t, tt.status, r.Status, "body: %s", r.Body)
				require.Equal(t, ownerID, r.JSON(t)["responsibleUserId"])
				return
			}
			r.requireError(t, tt.status, tt.text, "")
		})
	}

	t.Run("ViewerMayList", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, http.StatusOK, authCall(t, base, "GET", "/api/agents/"+agentA.ID+"/keys", nil, authCookie(viewer)).Status)
		authCall(t, base, "GET", "/api/agents/"+agentB.ID+"/keys", nil, authCookie(viewer)).requireError(t, http.StatusForbidden, "", "")
	})
}

func authKeysOf(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
