package board_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// TestBoardBinbox runs the inbox, decision, approval, status card and case pages against
// one local_trusted host with the experimental flags of status cards and cases on.
func TestBoardBinbox(t *testing.T) {
	t.Parallel()
	h, co := startLocal(t)
	res := h.Do("PATCH", "/api/instance/settings/experimental", map[string]any{"enableStatusCards": true, "enableCases": true})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	for _, key := range []string{"statuscards", "cases"} {
		waitPlugin(t, h, key, "ready")
	}
	t.Run("Inbox", func(t *testing.T) { t.Parallel(); testInbox(t, h, co) })
	t.Run("Decision", func(t *testing.T) { t.Parallel(); testDecision(t, h) })
	t.Run("StatusCards", func(t *testing.T) { t.Parallel(); testStatusCards(t, h) })
	t.Run("Cases", func(t *testing.T) { t.Parallel(); testCases(t, h) })
}

// waitPlugin waits until an extension reports a status (headers authenticate the read).
func waitPlugin(t testing.TB, h *sdktest.Host, key, status string, headers ...string) {
	t.Helper()
	sdktest.WaitFor(t, 2*time.Minute, func() bool {
		res := h.Do("GET", "/api/plugins/"+key, nil, headers...)
		var m map[string]any
		return res.Status == http.StatusOK && json.Unmarshal(res.Body, &m) == nil && m["status"] == status
	}, key+" to be "+status)
}

func createApproval(t *testing.T, h *sdktest.Host, co, summary string) string {
	t.Helper()
	res := h.Do("POST", "/api/companies/"+co+"/approvals", map[string]any{"type": "request_board_approval",
		"payload": map[string]any{"summary": summary}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	return res.Map(t)["id"].(string)
}

func testInbox(t *testing.T, h *sdktest.Host, co string) {
	first := createApproval(t, h, co, "Ship the release")
	second := createApproval(t, h, co, "Hire a designer")
	third := createApproval(t, h, co, "Raise the budget")
	b := newBrowser(t, h.URL)
	inbox := "/c/" + co + "/inbox"
	p := b.get(inbox)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	requireSafePage(t, p)
	for _, want := range []string{"Ship the release", "Hire a designer", "Raise the budget", `href="/c/` + co + `/inbox"`,
		`sse-connect="/api/companies/` + co + `/events?entityType=approval&amp;since=`, `sse-connect="/api/companies/` + co + `/events?entityType=decision&amp;since=`,
		`name="decisionNote"`, `value="approve"`, `value="reject"`, `name="snooze"`, `hx-get="/c/` + co + `/inbox/badge"`} {
		require.Contains(t, p.Body, want)
	}
	tok := p.csrf(t)

	// Approve with a note, as htmx does: the fresh list comes back.
	p = b.post("/c/"+co+"/approvals/"+first+"/decide", url.Values{"action": {"approve"}, "decisionNote": {"Go ahead"}},
		"HX-Request", "true", "X-CSRF-Token", tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	require.True(t, strings.HasPrefix(p.Body, `<div id="inbox-list"`), p.Body)
	require.Contains(t, p.Body, "Approval approved.")
	require.NotContains(t, p.Body, "Ship the release")
	got := h.Do("GET", "/api/approvals/"+first, nil).Map(t)
	require.Equal(t, "approved", got["status"])
	require.Equal(t, "Go ahead", got["decisionNote"])
	// Deciding it again is refused by the API, and the page says so.
	p = b.post("/c/"+co+"/approvals/"+first+"/decide", url.Values{"_csrf": {tok}, "action": {"reject"}})
	require.Equal(t, http.StatusConflict, p.Status, p.Body)
	require.Contains(t, p.Body, "Approval is not pending")
	p = b.post("/c/"+co+"/approvals/"+first+"/decide", url.Values{"_csrf": {tok}, "action": {"bogus"}})
	require.Equal(t, http.StatusBadRequest, p.Status, p.Body)

	// Dismiss through a plain form: gone from the inbox, listed under the hidden items, restorable.
	p = b.post(inbox+"/dismiss", url.Values{"_csrf": {tok}, "itemKey": {"approval:" + second}, "kind": {"dismiss"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, inbox, p.Header.Get("Location"))
	p = b.get(inbox)
	require.NotContains(t, p.Body, "Hire a designer")
	require.Contains(t, p.Body, "Show 1 dismissed or snoozed")
	p = b.get(inbox + "?hidden=1")
	require.Contains(t, p.Body, "Hire a designer")
	require.Contains(t, p.Body, ">Restore<")
	// Snooze for an hour.
	p = b.post(inbox+"/dismiss", url.Values{"itemKey": {"approval:" + third}, "kind": {"snooze"}, "snooze": {"1h"}},
		"HX-Request", "true", "X-CSRF-Token", tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	require.Contains(t, p.Body, "Snoozed until")
	require.NotContains(t, p.Body, "Raise the budget")
	var dismissals []map[string]any
	h.Do("GET", "/api/companies/"+co+"/inbox-dismissals", nil).JSON(t, &dismissals)
	require.Len(t, dismissals, 2)
	// Restore the dismissed one.
	p = b.post(inbox+"/restore", url.Values{"_csrf": {tok}, "itemKey": {"approval:" + second}, "hidden": {"1"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, inbox+"?hidden=1", p.Header.Get("Location"))
	require.Contains(t, b.get(inbox).Body, "Hire a designer")
	// Bad inputs are clear 400s.
	for _, form := range []url.Values{
		{"_csrf": {tok}, "itemKey": {"issue:x"}},
		{"_csrf": {tok}, "itemKey": {"approval:" + third}, "kind": {"snooze"}, "snooze": {"forever"}},
	} {
		p = b.post(inbox+"/dismiss", form)
		require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
		requireSafePage(t, p)
	}
	// No CSRF token: refused, nothing dismissed.
	p = b.post(inbox+"/dismiss", url.Values{"itemKey": {"approval:" + second}})
	require.Equal(t, http.StatusForbidden, p.Status, p.Body)
	require.Contains(t, b.get(inbox).Body, "Hire a designer")

	// The badge fragment counts the visitor's inbox (the API's sidebar badges).
	p = b.get(inbox+"/badge", "HX-Request", "true")
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	require.Contains(t, p.Body, `class="nav-count">1<`)

	// The approval's detail page: request, comments, history; a comment through its form.
	detail := "/c/" + co + "/approvals/" + second
	p = b.get(detail)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	requireSafePage(t, p)
	require.Contains(t, p.Body, "Hire a designer")
	require.Contains(t, p.Body, "approval.created")
	p = b.post(detail+"/comments", url.Values{"_csrf": {tok}, "body": {"Which designer?"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	p = b.post(detail+"/decide", url.Values{"_csrf": {tok}, "action": {"request-revision"}, "from": {"detail"}, "decisionNote": {"More detail"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, detail, p.Header.Get("Location"))
	p = b.get(detail)
	require.Contains(t, p.Body, "Which designer?")
	require.Contains(t, p.Body, "revision_requested")
	require.Contains(t, p.Body, "approval.revision_requested")
	p = b.get("/c/" + co + "/approvals/00000000-0000-0000-0000-000000000000")
	require.Equal(t, http.StatusNotFound, p.Status, p.Body)
	requireSafePage(t, p)
}

// decisionFixture is a company with an agent whose issue-scoped run has ended, so the
// agent can propose decisions with that run's token.
type decisionFixture struct {
	co, origin, runID string
	inRun             []string
}

func newDecisionFixture(t *testing.T, h *sdktest.Host, name string) *decisionFixture {
	t.Helper()
	f := &decisionFixture{co: h.CreateCompany(name)}
	ag := h.CreateAgent(f.co, name+" Worker", "engineer")
	res := h.Do("POST", "/api/companies/"+f.co+"/issues", map[string]any{"title": "origin work", "assigneeAgentId": ag.ID})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	f.origin = res.Map(t)["id"].(string)
	sdktest.WaitFor(t, 60*time.Second, func() bool {
		var runs []map[string]any
		res := h.Do("GET", "/api/companies/"+f.co+"/heartbeat-runs?agentId="+ag.ID, nil)
		if res.Status != http.StatusOK || json.Unmarshal(res.Body, &runs) != nil {
			return false
		}
		for _, r := range runs {
			if c, _ := r["contextSnapshot"].(map[string]any); c != nil && c["issueId"] == f.origin {
				f.runID = r["id"].(string)
				return true
			}
		}
		return false
	}, "the origin run")
	sdktest.WaitFor(t, 2*time.Minute, func() bool {
		st, _ := h.Do("GET", "/api/heartbeat-runs/"+f.runID, nil).Map(t)["status"].(string)
		return st != "" && st != "queued" && st != "running" && st != "scheduled_retry"
	}, "the origin run to end")
	f.inRun = []string{"Authorization", "Bearer " + h.AgentJWT(ag, f.runID)}
	return f
}

// propose creates a decision with a required input and two options, as the agent.
func (f *decisionFixture) propose(t *testing.T, h *sdktest.Host, title string) string {
	t.Helper()
	res := h.Do("POST", "/api/companies/"+f.co+"/decisions", map[string]any{
		"title": title, "body": "Should we ship " + title + "?",
		"inputs": []map[string]any{{"id": "why", "label": "Why this choice", "required": true, "maxLength": 500}},
		"options": []map[string]any{
			{"id": "ship", "label": "Ship it", "style": "primary", "effects": []map[string]any{
				{"type": "comment_on_issue", "targetIssueId": f.origin, "bodyMarkdown": "Shipping: {{input.why}}"}}},
			{"id": "wait", "label": "Wait", "effects": []map[string]any{}},
		},
	}, f.inRun...)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	return res.Map(t)["id"].(string)
}

func testDecision(t *testing.T, h *sdktest.Host) {
	f := newDecisionFixture(t, h, "Decision Co")
	first := f.propose(t, h, "the blue build")
	second := f.propose(t, h, "the red build")
	b := newBrowser(t, h.URL)
	inbox := "/c/" + f.co + "/inbox"
	p := b.get(inbox)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	requireSafePage(t, p)
	for _, want := range []string{"the blue build", "the red build", "Why this choice", `name="input.why"`, `name="optionId" value="ship"`,
		"Ship it", "Dismiss decision", `name="itemKey" value="attention:decision:` + first + `"`} {
		require.Contains(t, p.Body, want)
	}
	tok := p.csrf(t)

	// Decide from the detail page with the input: the API shows it decided and the effect ran.
	detail := "/c/" + f.co + "/decisions/" + first
	p = b.get(detail)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	requireSafePage(t, p)
	require.Contains(t, p.Body, "Should we ship the blue build?")
	require.Contains(t, p.Body, "decision.created")
	// A missing required input is the API's refusal, on the page.
	p = b.post(detail+"/decide", url.Values{"_csrf": {tok}, "from": {"detail"}, "optionId": {"ship"}})
	require.GreaterOrEqual(t, p.Status, 400, p.Body)
	require.Less(t, p.Status, 500, p.Body)
	require.Contains(t, p.Body, "The change was refused")
	p = b.post(detail+"/decide", url.Values{"_csrf": {tok}, "from": {"detail"}, "optionId": {"ship"}, "input.why": {"tests are green"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, detail, p.Header.Get("Location"))
	got := h.Do("GET", "/api/decisions/"+first, nil).Map(t)
	require.Equal(t, "decided", got["status"])
	require.Equal(t, "ship", got["chosenOptionId"])
	require.Equal(t, "tests are green", got["inputValues"].(map[string]any)["why"])
	var comments []map[string]any
	h.Do("GET", "/api/issues/"+f.origin+"/comments", nil).JSON(t, &comments)
	found := false
	for _, c := range comments {
		found = found || c["body"] == "Shipping: tests are green"
	}
	require.True(t, found, "the effect's comment carries the input: %v", comments)
	p = b.get(detail)
	require.Contains(t, p.Body, `id="decision-status">decided<`)
	require.Contains(t, p.Body, `id="decision-chosen">Ship it<`)
	require.Contains(t, p.Body, "decision.decided")
	require.NotContains(t, p.Body, `name="optionId"`)

	// Dismiss the other from the inbox, as htmx does.
	p = b.post("/c/"+f.co+"/decisions/"+second+"/dismiss", url.Values{}, "HX-Request", "true", "X-CSRF-Token", tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	require.Contains(t, p.Body, "Decision dismissed.")
	require.NotContains(t, p.Body, "the red build")
	require.Equal(t, "decided", h.Do("GET", "/api/decisions/"+second, nil).Map(t)["status"])
	p = b.get(inbox)
	require.Contains(t, p.Body, "Nothing needs you")
}
