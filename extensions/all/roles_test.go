package all_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdktest"
)

// roleUser signs a user up in authenticated mode and returns bearer headers for a board
// API key of theirs, and their user id.
func roleUser(t *testing.T, h *sdktest.Host, email string) ([]string, string) {
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

// notCompanyScoped are write routes that act on the caller's own account or the instance,
// not on a company's data.
// The plugin routes take their company from the body (checked below) or act on the instance.
var notCompanyScoped = regexp.MustCompile(`^/api/(auth/|board-api-keys|cli-auth/|bootstrap/|agents/me/|companies$|instance/|plugins/)`)

// flagOff are the answers of experimental areas whose flag is off in these tests (404 by the spec).
var flagOff = map[string]bool{"Status cards are not enabled": true}

// TestViewersChangeNothing walks every write route of the live route table (kernel and
// every first-party extension) as a viewer of a company, with the ids of that company's
// real resources, and sees each refused with 403; an operator may work issues but not
// manage secrets, approvals or agents.
func TestViewersChangeNothing(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) {
		c.DeploymentMode = "authenticated"
		c.EnableCompanyDeletion = true
	}})
	owner, _ := roleUser(t, h, "owner@example.com")
	viewer, viewerID := roleUser(t, h, "viewer@example.com")
	operator, operatorID := roleUser(t, h, "operator@example.com")
	do := func(want int, method, path string, body any) map[string]any {
		t.Helper()
		res := h.Do(method, path, body, owner...)
		require.Equal(t, want, res.Status, "%s %s: %s", method, path, res.Body)
		return res.Map(t)
	}
	company := do(http.StatusCreated, "POST", "/api/companies", map[string]any{"name": "Roles Co"})["id"].(string)
	for _, m := range []struct{ user, role string }{{viewerID, "viewer"}, {operatorID, "operator"}} {
		_, err := h.Kernel.Pool.Exec(context.Background(), `INSERT INTO kernel.company_memberships
			(id, company_id, principal_type, principal_id, status, membership_role) VALUES ($1, $2, 'user', $3, 'active', $4)`,
			uuid.NewString(), company, m.user, m.role)
		require.NoError(t, err)
	}
	c := "/api/companies/" + company
	agent := do(http.StatusCreated, "POST", c+"/agents", map[string]any{"name": "Worker", "role": "engineer"})["id"].(string)
	issue := do(http.StatusCreated, "POST", c+"/issues", map[string]any{"title": "Keep me"})["id"].(string)
	do(http.StatusCreated, "PUT", "/api/issues/"+issue+"/documents/plan", map[string]any{"title": "Plan", "format": "markdown", "body": "x"})
	ids := map[string]string{
		"companyId": company, "agentId": agent, "issueId": issue, "key": "plan",
		"goalId":     do(http.StatusCreated, "POST", c+"/goals", map[string]any{"title": "Grow"})["id"].(string),
		"projectId":  do(http.StatusCreated, "POST", c+"/projects", map[string]any{"name": "Ops"})["id"].(string),
		"labelId":    do(http.StatusCreated, "POST", c+"/labels", map[string]any{"name": "bug", "color": "#ff0000"})["id"].(string),
		"secretId":   do(http.StatusCreated, "POST", c+"/secrets", map[string]any{"name": "Token", "value": "v"})["id"].(string),
		"approvalId": do(http.StatusCreated, "POST", c+"/approvals", map[string]any{"type": "request_board_approval", "payload": map[string]any{}})["id"].(string),
		"routineId":  do(http.StatusCreated, "POST", c+"/routines", map[string]any{"title": "Daily", "assigneeAgentId": agent})["id"].(string),
	}
	// {id} means the resource the path's first segment names.
	idFor := map[string]string{"issues": "issueId", "goals": "goalId", "projects": "projectId", "secrets": "secretId", "approvals": "approvalId"}
	param := regexp.MustCompile(`\{([A-Za-z]+)\}`)

	checked := 0
	for _, r := range h.Kernel.Routes.Routes() {
		// Personal routes (sidebar order, inbox dismissals) write only the viewer's own data.
		if !kernel.IsWriteMethod(r.Method) || r.Access == kernel.AccessPublic || r.Access == kernel.AccessInstanceAdmin ||
			r.Access == kernel.AccessAgent || r.Personal || notCompanyScoped.MatchString(r.Pattern) {
			continue
		}
		guessed := false
		path := param.ReplaceAllStringFunc(r.Pattern, func(m string) string {
			name := m[1 : len(m)-1]
			if name == "id" {
				name = idFor[strings.Split(r.Pattern, "/")[2]]
			}
			if v, ok := ids[name]; ok {
				return v
			}
			guessed = true
			return uuid.NewString()
		})
		res := h.Do(r.Method, path, map[string]any{}, viewer...)
		if res.Status == http.StatusNotFound && flagOff[res.Map(t)["error"].(string)] {
			// An experimental area whose flag is off refuses everything, before anything else.
			checked++
			continue
		}
		if guessed {
			require.Contains(t, []int{http.StatusForbidden, http.StatusNotFound}, res.Status, "%s %s: %s", r.Method, r.Pattern, res.Body)
		} else {
			require.Equal(t, http.StatusForbidden, res.Status, "%s %s: %s", r.Method, r.Pattern, res.Body)
		}
		checked++
	}
	require.Greater(t, checked, 60, "every company write route is covered")
	// A plugin tool may write: a viewer of the company may not run one.
	res := h.Do("POST", "/api/plugins/tools/execute", map[string]any{"tool": "any:tool", "runContext": map[string]any{"companyId": company}}, viewer...)
	require.Equal(t, http.StatusForbidden, res.Status, "tools/execute: %s", res.Body)

	// The resources are all still there, unchanged.
	require.Equal(t, "Keep me", do(http.StatusOK, "GET", "/api/issues/"+issue, nil)["title"])
	require.Equal(t, "idle", do(http.StatusOK, "GET", "/api/agents/"+agent, nil)["status"])

	// An operator works issues, but manages neither agents, secrets nor approvals.
	res = h.Do("POST", c+"/issues", map[string]any{"title": "Operator's"}, operator...)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	for _, attack := range []struct{ method, path string }{
		{"POST", "/api/agents/" + agent + "/terminate"},
		{"POST", "/api/agents/" + agent + "/pause"},
		{"DELETE", "/api/secrets/" + ids["secretId"]},
		{"POST", c + "/secrets"},
		{"POST", "/api/approvals/" + ids["approvalId"] + "/approve"},
	} {
		res := h.Do(attack.method, attack.path, map[string]any{"name": "X", "value": "v"}, operator...)
		require.Equal(t, http.StatusForbidden, res.Status, "operator %s %s: %s", attack.method, attack.path, res.Body)
	}
}
