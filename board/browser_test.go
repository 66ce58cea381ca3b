package board_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// TestBrowserLiveComment drives Debian's headless Chromium: sign in on the board, open an
// issue, and see a comment posted through the API appear on the open page without a reload
// (htmx's SSE extension re-fetching the issue on the company event stream), with no Content
// Security Policy violation logged. It runs only with KEEL_BROWSER_TESTS=1 and skips when
// chromium is not installed (`apt-get install -y chromium`).
//
// Browser tests run one at a time: two headless Chromiums signing in at once on a loaded
// 2-core machine missed every deadline.
func TestBrowserLiveComment(t *testing.T) {
	b := newChrome(t)
	co := b.call("POST", "/api/companies", map[string]any{"name": "Browser Co"})["id"].(string)
	issueID := b.call("POST", "/api/companies/"+co+"/issues", map[string]any{"title": "Watch me live"})["id"].(string)
	ctx := b.ctx

	issuePath := "/c/" + co + "/issues/" + issueID
	b.open(issuePath, "#issue-live")
	// Wait for the page's event stream to be open, then post through the API.
	sdktest.WaitFor(t, time.Minute, func() bool {
		state, err := chromedp.Run(ctx, chromedp.Evaluate[int](`(function(){var e=document.querySelector('[sse-connect]');
			var d=e&&e['htmx-internal-data'];return d&&d.sseEventSource?d.sseEventSource.readyState:-1})()`))
		return err == nil && state == 1
	}, "the issue page's event stream to open")
	b.call("POST", "/api/issues/"+issueID+"/comments", map[string]any{"body": "Posted by the API, seen live"})
	require.NoError(t, chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.Search(`//li[contains(., "Posted by the API, seen live")]`)),
	))

	// The board's own comment form (htmx, CSRF header from board.js) works in the browser too.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS("#comment-body"), "Typed on the board"),
		chromedp.Click(chromedp.CSS("#comment-form button")),
		chromedp.WaitVisible(chromedp.Search(`//li[contains(., "Typed on the board")]`)),
	))
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#comments")))
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(text, "Posted by the API, seen live"), text)
}

// TestBrowserPages opens every main page in Chromium at 1280×800 with a small company (two
// agents, three issues, a comment, a routine, a finished run), runs axe-core's WCAG 2 A/AA
// rules over each, and writes each page's screenshot for the README (docs/screenshots).
func TestBrowserPages(t *testing.T) {
	b := newChrome(t)
	co := b.call("POST", "/api/companies", map[string]any{"name": "Acme Robotics"})["id"].(string)
	ceo := b.call("POST", "/api/companies/"+co+"/agents", map[string]any{"name": "Ada", "role": "ceo", "title": "Chief executive",
		"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/echo", "args": []string{"planning the week"}}})["id"].(string)
	b.call("POST", "/api/companies/"+co+"/agents", map[string]any{"name": "Linus", "role": "engineer", "reportsTo": ceo,
		"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/echo", "args": []string{"on it"}}})
	issueID := b.call("POST", "/api/companies/"+co+"/issues", map[string]any{"title": "Ship the arm controller",
		"description": "The controller needs its safety interlock before the demo.", "status": "in_progress", "assigneeAgentId": ceo})["id"].(string)
	b.call("POST", "/api/companies/"+co+"/issues", map[string]any{"title": "Order servo motors", "status": "todo"})
	b.call("POST", "/api/companies/"+co+"/issues", map[string]any{"title": "Calibrate the gripper", "status": "backlog"})
	b.call("POST", "/api/issues/"+issueID+"/comments", map[string]any{"body": "Interlock wiring is done; firmware next."})
	b.call("POST", "/api/companies/"+co+"/routines", map[string]any{"title": "Weekly planning", "assigneeAgentId": ceo})
	run := b.call("POST", "/api/agents/"+ceo+"/heartbeat/invoke", map[string]any{})["id"].(string)
	sdktest.WaitFor(t, 2*time.Minute, func() bool {
		var r map[string]any
		b.callStatus("GET", "/api/heartbeat-runs/"+run, nil, &r)
		return r["status"] == "succeeded"
	}, "the CEO's run to succeed")
	for _, p := range []struct{ name, path, ready string }{
		{"companies", "/companies", "main h1"},
		{"dashboard", "/c/" + co, "main h1"},
		{"inbox", "/c/" + co + "/inbox", "main h1"},
		{"issues", "/c/" + co + "/issues", "main h1"},
		{"issue-board", "/c/" + co + "/issues/board", "main h1"},
		{"issue", "/c/" + co + "/issues/" + issueID, "#issue-live"},
		{"agents", "/c/" + co + "/agents", "main h1"},
		{"agent", "/c/" + co + "/agents/" + ceo, "main h1"},
		{"runs", "/c/" + co + "/runs", "main h1"},
		{"run", "/c/" + co + "/runs/" + run, "main h1"},
		{"routines", "/c/" + co + "/routines", "main h1"},
		{"costs", "/c/" + co + "/costs", "main h1"},
		{"cases", "/c/" + co + "/cases", "main h1"},
		{"status-cards", "/c/" + co + "/status-cards", "main h1"},
		{"skills", "/c/" + co + "/skills", "main h1"},
		{"folders", "/c/" + co + "/folders", "main h1"},
		{"members", "/c/" + co + "/members", "main h1"},
		{"activity", "/c/" + co + "/activity", "main h1"},
		{"plugins", "/instance/plugins", "main h1"},
		{"adapters", "/instance/adapters", "main h1"},
		{"instance-settings", "/instance/settings", "main h1"},
	} {
		b.open(p.path, p.ready)
		b.checkAccessibility(p.name)
		b.screenshot(p.name)
	}
}
