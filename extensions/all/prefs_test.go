package all_test

import (
	"net/http"
	"slices"
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

	// Measured, never asserted: one read asks the kernel, the work and the agents owners.
	took := make([]time.Duration, 0, 50)
	for range 50 {
		start := time.Now()
		badges(owner...)
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	t.Logf("sidebar-badges over HTTP, 50 reads: p50 %v, p90 %v", took[25], took[45])
}

// TestIssueGraphLiveness runs the liveness recovery on a real host: one issue of each stuck
// kind (in_progress with a run that ended, in_progress with no run, blocked with every
// blocker done, assigned to a terminated agent) is listed by the preview with its change,
// which changes nothing; the run applies exactly those changes with one activity entry per
// issue, and a second run finds nothing left of them. Only instance admins may call it.
func TestIssueGraphLiveness(t *testing.T) {
	t.Parallel()
	h, owner, company, do := prefsHost(t)
	c := "/api/companies/" + company
	issue := func(body map[string]any) string {
		t.Helper()
		return do(http.StatusCreated, "POST", c+"/issues", body, owner...).Map(t)["id"].(string)
	}
	get := func(id string) map[string]any {
		t.Helper()
		return do(http.StatusOK, "GET", "/api/issues/"+id, nil, owner...).Map(t)
	}

	// In progress, its run over: a process agent that exits at once.
	doer := processAgent(t, do, owner, company, "Doer", "true")
	deadRun := issue(map[string]any{"title": "Run ended", "assigneeAgentId": doer})
	var runID string
	sdktest.WaitFor(t, time.Minute, func() bool {
		iss := get(deadRun)
		id, _ := iss["checkoutRunId"].(string)
		if iss["status"] != "in_progress" || id == "" {
			return false
		}
		runID = id
		return h.Do("GET", "/api/heartbeat-runs/"+id, nil, owner...).Map(t)["status"] == "succeeded"
	}, "the doer's run checks the issue out and ends")

	// In progress with no run: the agent is paused, so its wake is suppressed.
	sleeper := processAgent(t, do, owner, company, "Sleeper", "true")
	do(http.StatusOK, "POST", "/api/agents/"+sleeper+"/pause", map[string]any{}, owner...)
	missingRun := issue(map[string]any{"title": "No run", "assigneeAgentId": sleeper, "status": "in_progress"})

	// Blocked while its only blocker is done.
	blocker := issue(map[string]any{"title": "Blocker"})
	blocked := issue(map[string]any{"title": "Waiting", "status": "blocked", "blockedByIssueIds": []string{blocker}})
	do(http.StatusOK, "PATCH", "/api/issues/"+blocker, map[string]any{"status": "done"}, owner...)
	// Blocked by an open issue: not stuck.
	open := issue(map[string]any{"title": "Open blocker"})
	stillBlocked := issue(map[string]any{"title": "Rightly waiting", "status": "blocked", "blockedByIssueIds": []string{open}})

	// Assigned to an agent that was terminated since.
	gone := processAgent(t, do, owner, company, "Gone", "true")
	do(http.StatusOK, "POST", "/api/agents/"+gone+"/pause", map[string]any{}, owner...)
	orphan := issue(map[string]any{"title": "Orphan", "assigneeAgentId": gone})
	do(http.StatusOK, "POST", "/api/agents/"+gone+"/terminate", map[string]any{}, owner...)

	base := "/api/instance/settings/experimental/issue-graph-liveness-auto-recovery/"
	scan := map[string]any{"companyId": company, "staleAfterSeconds": 0}

	// Who may call: instance admins only.
	member, _ := sessionUser(t, h, "member@prefs.example")
	inv := do(http.StatusCreated, "POST", c+"/invites", map[string]any{"allowedJoinTypes": "human", "membershipRole": "owner"}, owner...).Map(t)
	do(http.StatusCreated, "POST", "/api/invites/"+inv["token"].(string)+"/accept", map[string]any{}, member...)
	for _, path := range []string{base + "preview", base + "run"} {
		do(http.StatusForbidden, "POST", path, scan, member...)
		do(http.StatusUnauthorized, "POST", path, scan)
	}
	// Validation.
	for _, bad := range []map[string]any{{"companyId": "nope"}, {"staleAfterSeconds": -1}, {"limit": 0}, {"issueIds": []string{"x"}}} {
		require.Equal(t, "Validation error", do(http.StatusBadRequest, "POST", base+"preview", bad, owner...).Map(t)["error"])
	}
	// By default only issues unchanged for five minutes count: these are all fresh.
	fresh := do(http.StatusOK, "POST", base+"preview", map[string]any{"companyId": company}, owner...).Map(t)
	require.Empty(t, fresh["findings"], "%v", fresh)

	preview := do(http.StatusOK, "POST", base+"preview", scan, owner...).Map(t)
	require.Equal(t, true, preview["dryRun"])
	require.Equal(t, true, preview["runStatusesKnown"])
	byIssue := map[string]map[string]any{}
	for _, f := range preview["findings"].([]any) {
		m := f.(map[string]any)
		byIssue[m["issueId"].(string)] = m
	}
	require.Len(t, byIssue, 4, "%v", preview)
	require.NotContains(t, byIssue, stillBlocked)
	require.Equal(t, map[string]any{"dead_run": float64(1), "missing_run": float64(1), "blockers_resolved": float64(1),
		"terminated_assignee": float64(1)}, preview["counts"])

	f := byIssue[deadRun]
	require.Equal(t, "dead_run", f["kind"])
	require.Equal(t, "succeeded", f["runStatus"])
	require.Equal(t, runID, f["checkoutRunId"])
	require.Equal(t, map[string]any{"status": map[string]any{"from": "in_progress", "to": "todo"}, "clearExecution": true, "wakeAssignee": true}, f["change"])
	f = byIssue[missingRun]
	require.Equal(t, "missing_run", f["kind"])
	require.Equal(t, map[string]any{"status": map[string]any{"from": "in_progress", "to": "todo"}, "clearExecution": true, "wakeAssignee": true}, f["change"])
	f = byIssue[blocked]
	require.Equal(t, "blockers_resolved", f["kind"])
	require.Equal(t, map[string]any{"status": map[string]any{"from": "blocked", "to": "todo"}, "clearExecution": false, "wakeAssignee": false}, f["change"])
	f = byIssue[orphan]
	require.Equal(t, "terminated_assignee", f["kind"])
	require.Equal(t, map[string]any{"status": map[string]any{"from": "todo", "to": "todo"},
		"assigneeAgentId": map[string]any{"from": gone, "to": nil}, "clearExecution": true, "wakeAssignee": false}, f["change"])

	// The preview changed nothing.
	require.Equal(t, "in_progress", get(deadRun)["status"])
	require.Equal(t, "in_progress", get(missingRun)["status"])
	require.Equal(t, "blocked", get(blocked)["status"])
	require.Equal(t, gone, get(orphan)["assigneeAgentId"])

	// The run applies exactly the previewed changes (the preview's issues, nothing else).
	ids := []string{deadRun, missingRun, blocked, orphan}
	res := do(http.StatusOK, "POST", base+"run", map[string]any{"companyId": company, "staleAfterSeconds": 0, "issueIds": ids}, owner...).Map(t)
	require.Equal(t, false, res["dryRun"])
	require.Equal(t, float64(4), res["applied"], "%v", res)
	require.Equal(t, float64(0), res["skipped"])
	for _, f := range res["findings"].([]any) {
		require.Equal(t, "applied", f.(map[string]any)["outcome"])
	}
	// The dead run's issue may be checked out again at once by the doer's new run, so only
	// the activity entry is certain for it; the others stay where recovery put them.
	iss := get(missingRun)
	require.Equal(t, "todo", iss["status"])
	require.Equal(t, sleeper, iss["assigneeAgentId"])
	require.Nil(t, iss["checkoutRunId"])
	require.Nil(t, iss["executionRunId"])
	require.Equal(t, "todo", get(blocked)["status"])
	iss = get(orphan)
	require.Nil(t, iss["assigneeAgentId"])
	require.Equal(t, "todo", iss["status"])
	require.Equal(t, "blocked", get(stillBlocked)["status"])

	var entries []map[string]any
	do(http.StatusOK, "GET", c+"/activity?action=issue.liveness_recovered&limit=50", nil, owner...).JSON(t, &entries)
	var recovered []string
	for _, e := range entries {
		recovered = append(recovered, e["entityId"].(string))
		require.Equal(t, "issue", e["entityType"])
	}
	require.ElementsMatch(t, ids, recovered)

	// Nothing is left to do for the three that stay put.
	again := do(http.StatusOK, "POST", base+"run", map[string]any{"companyId": company, "staleAfterSeconds": 0,
		"issueIds": []string{missingRun, blocked, orphan}}, owner...).Map(t)
	require.Empty(t, again["findings"], "%v", again)
	require.Equal(t, float64(0), again["applied"])
}
