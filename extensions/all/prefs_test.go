package all_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/sdktest"
)

// prefsHost starts a host in authenticated mode with every first-party extension; the
// owner signed in through a browser session is the instance admin and owns a company.
func prefsHost(t *testing.T) (h *sdktest.Host, owner []string, company string, do func(want int, method, path string, body any, headers ...string) *sdktest.Response) {
	t.Helper()
	h = sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) { c.DeploymentMode = "authenticated" }})
	owner, _ = sessionUser(t, h, "owner@prefs.example")
	do = func(want int, method, path string, body any, headers ...string) *sdktest.Response {
		t.Helper()
		res := h.Do(method, path, body, headers...)
		require.Equal(t, want, res.Status, "%s %s: %s", method, path, res.Body)
		return res
	}
	require.Equal(t, true, do(http.StatusOK, "POST", "/api/bootstrap/claim", nil, owner...).Map(t)["claimed"])
	company = do(http.StatusCreated, "POST", "/api/companies", map[string]any{"name": "Prefs Co"}, owner...).Map(t)["id"].(string)
	return h, owner, company, do
}

// processAgent creates a process agent running command.
func processAgent(t *testing.T, do func(int, string, string, any, ...string) *sdktest.Response, owner []string, company, name, command string) string {
	t.Helper()
	return do(http.StatusCreated, "POST", "/api/companies/"+company+"/agents", map[string]any{"name": name, "role": "engineer",
		"adapterType": "process", "adapterConfig": map[string]any{"command": command}}, owner...).Map(t)["id"].(string)
}

// TestSidebarBadges reads the board's badge counts on a real host: an actionable approval
// from the work owner, an agent whose latest run failed from the agents owner, a pending
// join request from the kernel; each dismissed or snoozed item leaves the count, for the
// user who dismissed it only.
func TestSidebarBadges(t *testing.T) {
	t.Parallel()
	h, owner, company, do := prefsHost(t)
	c := "/api/companies/" + company
	badges := func(headers ...string) map[string]any {
		t.Helper()
		return do(http.StatusOK, "GET", c+"/sidebar-badges", nil, headers...).Map(t)
	}
	counts := func(inbox, approvals, failed, joins float64) map[string]any {
		return map[string]any{"inbox": inbox, "approvals": approvals, "failedRuns": failed, "joinRequests": joins}
	}
	require.Equal(t, counts(0, 0, 0, 0), badges(owner...))

	approval := do(http.StatusCreated, "POST", c+"/approvals", map[string]any{"type": "request_board_approval", "payload": map[string]any{}},
		owner...).Map(t)["id"].(string)
	failer := processAgent(t, do, owner, company, "Failer", "false")
	run := do(http.StatusAccepted, "POST", "/api/agents/"+failer+"/wakeup", map[string]any{}, owner...).Map(t)["id"].(string)
	sdktest.WaitFor(t, time.Minute, func() bool {
		return h.Do("GET", "/api/heartbeat-runs/"+run, nil, owner...).Map(t)["status"] == "failed"
	}, "the failing run ends failed")
	inv := do(http.StatusCreated, "POST", c+"/invites", map[string]any{"allowedJoinTypes": "agent"}, owner...).Map(t)
	join := do(http.StatusCreated, "POST", "/api/invites/"+inv["token"].(string)+"/accept",
		map[string]any{"requestType": "agent", "agentName": "Joiner"}).Map(t)["id"].(string)
	require.Equal(t, counts(3, 1, 1, 1), badges(owner...))

	// A second admin sees the same counts; the owner's dismissals are the owner's alone.
	adminInv := do(http.StatusCreated, "POST", c+"/invites", map[string]any{"allowedJoinTypes": "human", "membershipRole": "admin"}, owner...).Map(t)
	second, _ := sessionUser(t, h, "second@prefs.example")
	do(http.StatusCreated, "POST", "/api/invites/"+adminInv["token"].(string)+"/accept", map[string]any{}, second...)
	require.Equal(t, counts(3, 1, 1, 1), badges(second...))

	dismiss := func(body map[string]any) {
		t.Helper()
		do(http.StatusCreated, "POST", c+"/inbox-dismissals", body, owner...)
	}
	dismiss(map[string]any{"itemKey": "approval:" + approval})
	require.Equal(t, counts(2, 0, 1, 1), badges(owner...))
	dismiss(map[string]any{"itemKey": "run:" + run, "kind": "snooze", "snoozedUntil": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	dismiss(map[string]any{"itemKey": "join:" + join})
	require.Equal(t, counts(0, 0, 0, 0), badges(owner...))
	require.Equal(t, counts(3, 1, 1, 1), badges(second...))

	// Restoring brings the item back; a newer run of the agent that fails again counts anew.
	do(http.StatusNoContent, "DELETE", c+"/inbox-dismissals/approval:"+approval, nil, owner...)
	require.Equal(t, counts(1, 1, 0, 0), badges(owner...))
	run2 := do(http.StatusAccepted, "POST", "/api/agents/"+failer+"/wakeup", map[string]any{"idempotencyKey": "again"}, owner...).Map(t)["id"].(string)
	require.NotEqual(t, run, run2)
	sdktest.WaitFor(t, time.Minute, func() bool {
		return h.Do("GET", "/api/heartbeat-runs/"+run2, nil, owner...).Map(t)["status"] == "failed"
	}, "the second failing run ends failed")
	require.Equal(t, counts(2, 1, 1, 0), badges(owner...))

	// A decided approval and an approved join request are no longer in the inbox.
	do(http.StatusOK, "POST", "/api/approvals/"+approval+"/approve", map[string]any{}, owner...)
	do(http.StatusOK, "POST", c+"/join-requests/"+join+"/approve", map[string]any{}, owner...)
	require.Equal(t, counts(1, 0, 1, 0), badges(second...))
}
