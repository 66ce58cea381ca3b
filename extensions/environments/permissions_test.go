package environments_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdktest"
)

// signUp signs a user up in authenticated mode and returns bearer headers for a board API
// key of theirs, and their user id.
func signUp(t *testing.T, h *sdktest.Host, email string) ([]string, string) {
	t.Helper()
	res := h.Do("POST", "/api/auth/sign-up/email", map[string]any{"email": email, "password": "correct horse", "name": email})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	userID := res.Map(t)["user"].(map[string]any)["id"].(string)
	var session string
	for _, c := range (&http.Response{Header: res.Header}).Cookies() {
		if c.Name == kernel.SessionCookie && c.Value != "" {
			session = c.Name + "=" + c.Value
		}
	}
	res = h.Do("POST", "/api/board-api-keys", map[string]any{"name": "cli"}, "Cookie", session)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	return []string{"Authorization", "Bearer " + res.Map(t)["token"].(string)}, userID
}

// TestPermissions checks environments:manage (owner and admin hold it, an operator does
// not), reads for every member, other companies' users refused, and device logins visible
// to the user who started them only.
func TestPermissions(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) { c.DeploymentMode = "authenticated" }})
	owner, ownerID := signUp(t, h, "owner@example.com")
	// The owner also administers the instance (the adapter's instance config).
	_, err := h.Kernel.Pool.Exec(context.Background(), `INSERT INTO kernel.instance_user_roles (user_id, role) VALUES ($1, 'instance_admin')`, ownerID)
	require.NoError(t, err)
	admin, adminID := signUp(t, h, "admin@example.com")
	operator, operatorID := signUp(t, h, "operator@example.com")
	stranger, _ := signUp(t, h, "stranger@example.com")
	as := func(who []string, want int, method, path string, body any) map[string]any {
		t.Helper()
		res := h.Do(method, path, body, who...)
		require.Equal(t, want, res.Status, "%s %s: %s", method, path, res.Body)
		return res.Map(t)
	}
	co := as(owner, http.StatusCreated, "POST", "/api/companies", map[string]any{"name": "Perm Co"})["id"].(string)
	for _, m := range []struct{ user, role string }{{adminID, "admin"}, {operatorID, "operator"}} {
		_, err = h.Kernel.Pool.Exec(context.Background(), `INSERT INTO kernel.company_memberships
			(id, company_id, principal_type, principal_id, status, membership_role) VALUES ($1, $2, 'user', $3, 'active', $4)`,
			uuid.NewString(), co, m.user, m.role)
		require.NoError(t, err)
	}
	base := "/api/companies/" + co + "/environments"
	e := as(owner, http.StatusCreated, "POST", base, map[string]any{"name": "Owner's"})
	id := e["id"].(string)
	as(admin, http.StatusCreated, "POST", base, map[string]any{"name": "Admin's"})

	// An operator reads but changes nothing.
	res := h.Do("GET", base, nil, operator...)
	require.Len(t, list(t, res), 2)
	as(operator, http.StatusOK, "GET", "/api/environments/"+id, nil)
	as(operator, http.StatusOK, "GET", base+"/capabilities", nil)
	for _, w := range []struct{ method, path string }{
		{"POST", base}, {"POST", base + "/probe-config"}, {"PATCH", "/api/environments/" + id},
		{"DELETE", "/api/environments/" + id}, {"POST", "/api/environments/" + id + "/probe"},
		{"POST", "/api/companies/" + co + "/adapters/beta_local/login-sessions"},
	} {
		as(operator, http.StatusForbidden, w.method, w.path, map[string]any{"name": "Nope"})
	}
	// A user of no company of the environment's sees nothing.
	as(stranger, http.StatusForbidden, "GET", "/api/environments/"+id, nil)
	as(stranger, http.StatusForbidden, "GET", "/api/environments/"+id+"/leases", nil)
	as(stranger, http.StatusForbidden, "GET", base, nil)

	// A device login is the starting user's: another admin of the company gets 404.
	fake, err := filepath.Abs("testdata/codex-login")
	require.NoError(t, err)
	as(owner, http.StatusOK, "PATCH", "/api/adapters/beta_local", map[string]any{"config": map[string]any{"command": fake}})
	s := as(owner, http.StatusCreated, "POST", "/api/companies/"+co+"/adapters/beta_local/login-sessions", map[string]any{"environmentId": id})
	path := "/api/companies/" + co + "/adapters/beta_local/login-sessions/" + s["sessionId"].(string)
	as(admin, http.StatusNotFound, "GET", path, nil)
	as(admin, http.StatusNotFound, "POST", path+"/cancel", nil)
	as(owner, http.StatusNotFound, "GET", "/api/companies/"+co+"/adapters/alpha_local/login-sessions/"+s["sessionId"].(string), nil)
	require.Equal(t, "cancelled", as(owner, http.StatusOK, "POST", path+"/cancel", nil)["status"])
}
