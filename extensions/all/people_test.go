package all_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdktest"
)

// sessionUser signs a user up in authenticated mode and returns the Cookie header pair of
// the browser session and the user id.
func sessionUser(t *testing.T, h *sdktest.Host, email string) ([]string, string) {
	t.Helper()
	res := h.Do("POST", "/api/auth/sign-up/email", map[string]any{"email": email, "password": "correct horse", "name": email})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	userID := res.Map(t)["user"].(map[string]any)["id"].(string)
	for _, c := range (&http.Response{Header: res.Header}).Cookies() {
		if c.Name == kernel.SessionCookie && c.Value != "" {
			return []string{"Cookie", c.Name + "=" + c.Value}, userID
		}
	}
	t.Fatalf("no session cookie for %s", email)
	return nil, ""
}

// TestPeopleJoinThroughInvites runs the human side of a company on a real host in
// authenticated mode with browser sessions: a second person joins through an invite, an
// outside agent joins through another, its join request is approved (the agents extension
// creates the agent with the configuration the agent asked for) and its API key is claimed
// exactly once and works; the instance admin sees the agent's timer heartbeat.
func TestPeopleJoinThroughInvites(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) { c.DeploymentMode = "authenticated" }})
	owner, ownerID := sessionUser(t, h, "owner@people.example")
	do := func(want int, method, path string, body any, headers ...string) *sdktest.Response {
		t.Helper()
		res := h.Do(method, path, body, headers...)
		require.Equal(t, want, res.Status, "%s %s: %s", method, path, res.Body)
		return res
	}
	session := do(http.StatusOK, "GET", "/api/auth/get-session", nil, owner...).Map(t)
	require.Equal(t, ownerID, session["user"].(map[string]any)["id"])
	require.Equal(t, "null", string(do(http.StatusOK, "GET", "/api/auth/get-session", nil).Body))
	require.Equal(t, true, do(http.StatusOK, "POST", "/api/bootstrap/claim", nil, owner...).Map(t)["claimed"])
	company := do(http.StatusCreated, "POST", "/api/companies", map[string]any{"name": "Invite Co"}, owner...).Map(t)["id"].(string)
	c := "/api/companies/" + company

	// A person joins.
	inv := do(http.StatusCreated, "POST", c+"/invites", map[string]any{"allowedJoinTypes": "human"}, owner...).Map(t)
	second, secondID := sessionUser(t, h, "second@people.example")
	do(http.StatusForbidden, "GET", c, nil, second...)
	joined := do(http.StatusCreated, "POST", "/api/invites/"+inv["token"].(string)+"/accept", map[string]any{}, second...).Map(t)
	require.Equal(t, "operator", joined["membership"].(map[string]any)["membershipRole"])
	do(http.StatusOK, "GET", c, nil, second...)
	dir := do(http.StatusOK, "GET", c+"/user-directory", nil, second...)
	require.Contains(t, string(dir.Body), secondID)
	// A member without users:invite cannot invite, nor approve joins.
	do(http.StatusForbidden, "POST", c+"/invites", map[string]any{}, second...)

	// An outside agent joins: it reads the instructions, accepts, waits, claims its key.
	agentInv := do(http.StatusCreated, "POST", c+"/invites", map[string]any{"allowedJoinTypes": "agent", "agentMessage": "Hi"}, owner...).Map(t)
	token := agentInv["token"].(string)
	txt := do(http.StatusOK, "GET", "/api/invites/"+token+"/onboarding.txt", nil)
	require.Contains(t, string(txt.Body), h.URL+"/api/invites/"+token+"/accept")
	accepted := do(http.StatusCreated, "POST", "/api/invites/"+token+"/accept", map[string]any{
		"requestType": "agent", "agentName": "Remote Bot", "adapterType": "http", "capabilities": "Answers questions",
		"agentDefaultsPayload": map[string]any{
			"adapterConfig": map[string]any{"url": "http://127.0.0.1:9/hook"},
			"runtimeConfig": map[string]any{"heartbeat": map[string]any{"enabled": true, "intervalSec": 3600}},
		},
	}).Map(t)
	requestID, secret := accepted["id"].(string), accepted["claimSecret"].(string)
	claim := "/api/join-requests/" + requestID + "/claim-api-key"
	require.Equal(t, "join_request_pending", do(http.StatusConflict, "POST", claim, map[string]any{"claimSecret": secret}).Map(t)["code"])
	do(http.StatusNotFound, "POST", "/api/invites/"+token+"/accept", map[string]any{"agentName": "Again"})

	pending := do(http.StatusOK, "GET", c+"/join-requests?status=pending&requestType=agent", nil, owner...)
	require.Contains(t, string(pending.Body), requestID)
	require.NotContains(t, string(pending.Body), secret)
	do(http.StatusForbidden, "POST", c+"/join-requests/"+requestID+"/approve", nil, second...)
	approved := do(http.StatusOK, "POST", c+"/join-requests/"+requestID+"/approve", map[string]any{}, owner...).Map(t)
	agentID := approved["createdAgentId"].(string)

	// The agents extension created the agent with the configuration it asked for.
	agent := do(http.StatusOK, "GET", "/api/agents/"+agentID, nil, owner...).Map(t)
	require.Equal(t, "Remote Bot", agent["name"])
	require.Equal(t, "http", agent["adapterType"])
	require.Equal(t, "idle", agent["status"])
	require.Equal(t, "Answers questions", agent["capabilities"])
	require.Equal(t, requestID, agent["metadata"].(map[string]any)["joinRequestId"])

	key := do(http.StatusCreated, "POST", claim, map[string]any{"claimSecret": secret}).Map(t)
	bearer := []string{"Authorization", "Bearer " + key["token"].(string)}
	require.True(t, strings.HasPrefix(key["token"].(string), kernel.AgentKeyPrefix))
	me := do(http.StatusOK, "GET", "/api/agents/me", nil, bearer...).Map(t)
	require.Equal(t, agentID, me["id"])
	require.Equal(t, "api_key_already_claimed", do(http.StatusConflict, "POST", claim, map[string]any{"claimSecret": secret}).Map(t)["code"])

	// The instance admin sees the agent's timer heartbeat; others may not look.
	beats := do(http.StatusOK, "GET", "/api/instance/scheduler-heartbeats", nil, owner...)
	var list []map[string]any
	beats.JSON(t, &list)
	var beat map[string]any
	for _, b := range list {
		if b["id"] == agentID {
			beat = b
		}
	}
	require.NotNil(t, beat, "%s", beats.Body)
	require.Equal(t, "Invite Co", beat["companyName"])
	require.Equal(t, float64(3600), beat["intervalSec"])
	require.Equal(t, true, beat["schedulerActive"])
	do(http.StatusForbidden, "GET", "/api/instance/scheduler-heartbeats", nil, second...)
	do(http.StatusForbidden, "GET", "/api/instance/scheduler-heartbeats", nil, bearer...)
}
