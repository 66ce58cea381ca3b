package decisions_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdktest"
)

// boardUser signs a user up in authenticated mode and returns a board API key of theirs and
// their user id.
func boardUser(t *testing.T, h *sdktest.Host, email string) (string, string) {
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
	return res.Map(t)["token"].(string), userID
}

// TestDecideReplayByAnotherUser checks rule 6 with two board users of one company: the
// decider's replay resumes the outcome, another user's replay is refused.
func TestDecideReplayByAnotherUser(t *testing.T) {
	h := sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) { c.DeploymentMode = "authenticated" }})
	alice, _ := boardUser(t, h, "alice@example.com")
	bob, bobID := boardUser(t, h, "bob@example.com")
	h.Token = alice
	f := newFixture(t, h, "Two Boards")
	_, err := h.Kernel.Pool.Exec(context.Background(), `INSERT INTO kernel.company_memberships
		(id, company_id, principal_type, principal_id, status, membership_role) VALUES ($1, $2, 'user', $3, 'active', 'admin')`,
		uuid.NewString(), f.co, bobID)
	require.NoError(t, err)
	asBob := []string{"Authorization", "Bearer " + bob}

	id := f.mustPropose(t, f.simple("whose call"))["id"].(string)
	res := f.decide(id, map[string]any{"optionId": "yes"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = f.decide(id, map[string]any{"optionId": "yes"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	wantErr(t, h.Do("POST", "/api/decisions/"+id+"/decide", map[string]any{"optionId": "yes"}, asBob...),
		http.StatusForbidden, "Decision replay belongs to a different user")
	wantErr(t, h.Do("POST", "/api/decisions/"+id+"/decide", map[string]any{"optionId": "no"}, asBob...),
		http.StatusConflict, "decision_already_resolved")
	res = h.Do("GET", "/api/decisions/"+id, nil, asBob...)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Len(t, res.Map(t)["executions"], 1)
}
