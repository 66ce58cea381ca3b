package kernel_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/kernel"
)

// memberByPrincipal finds a principal's membership in a members list.
func memberByPrincipal(t *testing.T, list []map[string]any, principalID string) map[string]any {
	t.Helper()
	for _, m := range list {
		if m["principalId"] == principalID {
			return m
		}
	}
	t.Fatalf("no member %s in %v", principalID, list)
	return nil
}

func grantKeys(m map[string]any) []string {
	out := []string{}
	for _, g := range m["grants"].([]any) {
		out = append(out, g.(map[string]any)["permissionKey"].(string))
	}
	return out
}

func TestMembers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := ktStart(t, ktAuthenticated())
	ownerID, owner := env.User(t, "Owner", false)
	opID, operator := env.User(t, "Operator", false)
	company := env.Company(t, map[string]any{"name": "Members Co"}, ktSession(owner))["id"].(string)
	base := "/api/companies/" + company + "/members"
	require.NoError(t, env.K.MembershipEnsure(ctx, company, "user", opID, "member"))
	require.NoError(t, env.K.MembershipEnsure(ctx, company, "user", opID, "member"), "ensure is idempotent")
	agentID, agentKey := env.Agent(t, company, "Helper")
	require.NoError(t, env.K.MembershipEnsure(ctx, company, "agent", agentID, "member"))
	require.Error(t, env.K.MembershipEnsure(ctx, company, "robot", "x", "member"))
	require.Error(t, env.K.MembershipEnsure(ctx, company, "user", opID, "emperor"))

	list := env.Do(t, "GET", base, nil, ktSession(owner)).RequireStatus(t, http.StatusOK).List(t)
	require.Len(t, list, 3)
	require.Equal(t, ownerID, list[0]["principalId"], "owners first")
	om := memberByPrincipal(t, list, ownerID)
	require.Equal(t, "owner", om["membershipRole"])
	require.Equal(t, "active", om["status"])
	require.Equal(t, "user", om["principalType"])
	require.Equal(t, "Owner", om["user"].(map[string]any)["name"])
	require.Equal(t, []string{}, grantKeys(om))
	opm := memberByPrincipal(t, list, opID)
	require.Equal(t, "operator", opm["membershipRole"], "member is normalised to operator for users")
	am := memberByPrincipal(t, list, agentID)
	require.Equal(t, "member", am["membershipRole"])
	require.Equal(t, "Helper", am["agent"].(map[string]any)["name"])
	opMember := opm["id"].(string)
	ownerMember := om["id"].(string)

	agents := env.Do(t, "GET", base+"?principalType=agent", nil, ktSession(owner)).RequireStatus(t, http.StatusOK).List(t)
	require.Len(t, agents, 1)
	env.Do(t, "GET", base+"?principalType=robot", nil, ktSession(owner)).RequireValidation(t, "principalType")
	env.Do(t, "GET", base, nil, ktBearer(agentKey)).RequireStatus(t, http.StatusForbidden)

	t.Run("UpdateRole", func(t *testing.T) {
		m := env.Do(t, "PATCH", base+"/"+opMember, map[string]any{"membershipRole": "viewer"}, ktSession(owner)).RequireStatus(t, http.StatusOK).Object(t)
		require.Equal(t, "viewer", m["membershipRole"])
		require.Equal(t, "member.updated", env.Actions(t, company)[0])
		m = env.Do(t, "PATCH", base+"/"+opMember, map[string]any{"membershipRole": "member"}, ktSession(owner)).RequireStatus(t, http.StatusOK).Object(t)
		require.Equal(t, "operator", m["membershipRole"])
		env.Do(t, "PATCH", base+"/"+opMember, map[string]any{"membershipRole": "emperor"}, ktSession(owner)).RequireValidation(t, "membershipRole")
		env.Do(t, "PATCH", base+"/"+opMember, map[string]any{"status": "gone"}, ktSession(owner)).RequireValidation(t, "status")
		// Fields of other routes are ignored like any unknown field, as the reference product does.
		env.Do(t, "PATCH", base+"/"+opMember, map[string]any{"grants": []any{}}, ktSession(owner)).RequireStatus(t, http.StatusOK)
		env.Do(t, "PATCH", base+"/"+uuid.NewString(), map[string]any{"status": "active"}, ktSession(owner)).RequireError(t, http.StatusNotFound, "Member not found")
		env.Do(t, "PATCH", base+"/not-a-uuid", map[string]any{"status": "active"}, ktSession(owner)).RequireError(t, http.StatusNotFound, "Member not found")
	})

	t.Run("NeedsManagePermissions", func(t *testing.T) {
		r := env.Do(t, "PATCH", base+"/"+ownerMember, map[string]any{"membershipRole": "viewer"}, ktSession(operator))
		m := r.RequireError(t, http.StatusForbidden, "Missing permission users:manage_permissions for this company")
		require.Equal(t, "permission_denied", m["code"])
		env.Do(t, "PATCH", base+"/"+opMember+"/permissions", map[string]any{"grants": []any{}}, ktSession(operator)).RequireStatus(t, http.StatusForbidden)
		env.Do(t, "POST", base+"/"+ownerMember+"/archive", nil, ktSession(operator)).RequireStatus(t, http.StatusForbidden)
	})

	t.Run("ReplaceGrants", func(t *testing.T) {
		path := base + "/" + opMember + "/permissions"
		m := env.Do(t, "PATCH", path, map[string]any{"grants": []any{
			map[string]any{"permissionKey": "users:manage_permissions"},
			map[string]any{"permissionKey": "tasks:assign_scope", "scope": map[string]any{"projectIds": []string{"p1"}}},
		}}, ktSession(owner)).RequireStatus(t, http.StatusOK).Object(t)
		require.ElementsMatch(t, []string{"users:manage_permissions", "tasks:assign_scope"}, grantKeys(m))
		for _, g := range m["grants"].([]any) {
			g := g.(map[string]any)
			require.Equal(t, ownerID, g["grantedByUserId"])
			if g["permissionKey"] == "tasks:assign_scope" {
				require.Equal(t, map[string]any{"projectIds": []any{"p1"}}, g["scope"])
			}
		}
		require.Equal(t, "member.permissions_updated", env.Actions(t, company)[0])

		// The explicit grant now lets the operator manage members.
		env.Do(t, "PATCH", base+"/"+opMember, map[string]any{"status": "active"}, ktSession(operator)).RequireStatus(t, http.StatusOK)

		m = env.Do(t, "PATCH", path, map[string]any{"grants": []any{map[string]any{"permissionKey": "tasks:assign"}}}, ktSession(owner)).
			RequireStatus(t, http.StatusOK).Object(t)
		require.Equal(t, []string{"tasks:assign"}, grantKeys(m))
		m = env.Do(t, "PATCH", path, map[string]any{"grants": []any{}}, ktSession(owner)).RequireStatus(t, http.StatusOK).Object(t)
		require.Empty(t, grantKeys(m))
		env.Do(t, "PATCH", base+"/"+opMember, map[string]any{"status": "active"}, ktSession(operator)).RequireStatus(t, http.StatusForbidden)

		env.Do(t, "PATCH", path, map[string]any{"grants": []any{map[string]any{"permissionKey": "tasks:assign"}, map[string]any{"permissionKey": "launch:missiles"}}},
			ktSession(owner)).RequireValidation(t, "grants[1].permissionKey")
		env.Do(t, "PATCH", path, map[string]any{"grants": []any{map[string]any{"permissionKey": "tasks:assign", "scope": "all"}}},
			ktSession(owner)).RequireValidation(t, "grants[0].scope")
		env.Do(t, "PATCH", path, map[string]any{}, ktSession(owner)).RequireValidation(t, "grants")

		m = env.Do(t, "PATCH", base+"/"+opMember+"/role-and-grants", map[string]any{"membershipRole": "admin",
			"grants": []any{map[string]any{"permissionKey": "pipelines:write"}}}, ktSession(owner)).RequireStatus(t, http.StatusOK).Object(t)
		require.Equal(t, "admin", m["membershipRole"])
		require.Equal(t, []string{"pipelines:write"}, grantKeys(m))
	})

	t.Run("AgentGrants", func(t *testing.T) {
		path := base + "/" + am["id"].(string) + "/permissions"
		m := env.Do(t, "PATCH", path, map[string]any{"grants": []any{map[string]any{"permissionKey": "tasks:assign"}}}, ktSession(owner)).
			RequireStatus(t, http.StatusOK).Object(t)
		require.Equal(t, []string{"tasks:assign"}, grantKeys(m))
		ok, err := env.K.HasPermission(ctx, &kernel.Actor{Type: kernel.ActorAgent, AgentID: agentID, CompanyID: company}, company, "tasks:assign")
		require.NoError(t, err)
		require.True(t, ok)
	})

	t.Run("LastOwnerIsKept", func(t *testing.T) {
		env.Do(t, "PATCH", base+"/"+ownerMember, map[string]any{"membershipRole": "admin"}, ktSession(owner)).
			RequireError(t, http.StatusConflict, "Company must keep at least one active owner")
		env.Do(t, "POST", base+"/"+ownerMember+"/archive", nil, ktSession(owner)).
			RequireError(t, http.StatusConflict, "Company must keep at least one active owner")
	})

	t.Run("OnlyOwnersTouchOwners", func(t *testing.T) {
		// The operator is an admin now; admins hold no users:manage_permissions by default.
		_, err := env.K.Pool.Exec(ctx, `INSERT INTO kernel.principal_permission_grants (id, company_id, principal_type, principal_id, permission_key)
			VALUES ($1, $2, 'user', $3, 'users:manage_permissions')`, uuid.NewString(), company, opID)
		require.NoError(t, err)
		env.Do(t, "PATCH", base+"/"+opMember, map[string]any{"membershipRole": "owner"}, ktSession(operator)).
			RequireError(t, http.StatusForbidden, "Only company owners can change owner memberships")
		env.Do(t, "PATCH", base+"/"+ownerMember, map[string]any{"status": "suspended"}, ktSession(operator)).
			RequireError(t, http.StatusForbidden, "Only company owners can change owner memberships")
		// An owner may promote, and then the first owner may step down.
		env.Do(t, "PATCH", base+"/"+opMember, map[string]any{"membershipRole": "owner"}, ktSession(owner)).RequireStatus(t, http.StatusOK)
		env.Do(t, "PATCH", base+"/"+ownerMember, map[string]any{"membershipRole": "admin"}, ktSession(owner)).RequireStatus(t, http.StatusOK)
	})

	t.Run("ArchiveRemovesAccess", func(t *testing.T) {
		m := env.Do(t, "POST", base+"/"+ownerMember+"/archive", nil, ktSession(operator)).RequireStatus(t, http.StatusOK).Object(t)
		require.Equal(t, "archived", m["status"])
		require.Equal(t, "member.archived", env.Actions(t, company)[0])
		env.Do(t, "GET", "/api/companies/"+company, nil, ktSession(owner)).RequireStatus(t, http.StatusForbidden)
		env.Do(t, "POST", base+"/"+ownerMember+"/archive", nil, ktSession(operator)).RequireStatus(t, http.StatusOK)
		// MembershipEnsure reactivates, keeping the role.
		require.NoError(t, env.K.MembershipEnsure(ctx, company, "user", ownerID, "viewer"))
		env.Do(t, "GET", "/api/companies/"+company, nil, ktSession(owner)).RequireStatus(t, http.StatusOK)
		m = memberByPrincipal(t, env.Do(t, "GET", base, nil, ktSession(operator)).List(t), ownerID)
		require.Equal(t, "active", m["status"])
		require.Equal(t, "admin", m["membershipRole"])
	})
}

func TestGrantAndRevokePermission(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := ktStart(t, ktLocal())
	company := env.Company(t, map[string]any{"name": "Grants Co"})["id"].(string)
	agentID, _ := env.Agent(t, company, "Grantee")
	agent := &kernel.Actor{Type: kernel.ActorAgent, AgentID: agentID, CompanyID: company}

	has := func() bool {
		ok, err := env.K.HasPermission(ctx, agent, company, "agents:create")
		require.NoError(t, err)
		return ok
	}
	require.False(t, has())
	require.NoError(t, env.K.GrantPermission(ctx, company, "agent", agentID, "agents:create", kernel.LocalBoardUserID))
	require.NoError(t, env.K.GrantPermission(ctx, company, "agent", agentID, "agents:create", kernel.LocalBoardUserID))
	require.True(t, has())
	require.Equal(t, "permission.granted", env.Actions(t, company)[0])
	require.Error(t, env.K.GrantPermission(ctx, company, "agent", agentID, "agents:destroy", ""))

	require.NoError(t, env.K.RevokePermission(ctx, company, "agent", agentID, "agents:create", ""))
	require.NoError(t, env.K.RevokePermission(ctx, company, "agent", agentID, "agents:create", ""))
	require.False(t, has())
	actions := env.Actions(t, company)
	require.Equal(t, []string{"permission.revoked", "permission.granted", "company.created"}, actions)
}
