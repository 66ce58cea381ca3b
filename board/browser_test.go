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

// TestBrowserPages opens each main page in Chromium at 1280×800 with a company that has an
// issue and a comment, runs axe-core's WCAG 2 A/AA rules over it, and writes its screenshot
// for the README (docs/screenshots).
func TestBrowserPages(t *testing.T) {
	b := newChrome(t)
	co := b.call("POST", "/api/companies", map[string]any{"name": "Acme Robotics"})["id"].(string)
	issueID := b.call("POST", "/api/companies/"+co+"/issues", map[string]any{"title": "Ship the arm controller",
		"description": "The controller needs its safety interlock before the demo."})["id"].(string)
	b.call("POST", "/api/companies/"+co+"/issues", map[string]any{"title": "Order servo motors", "status": "todo"})
	b.call("POST", "/api/issues/"+issueID+"/comments", map[string]any{"body": "Interlock wiring is done; firmware next."})
	for _, p := range []struct{ name, path, ready string }{
		{"companies", "/companies", "main h1"},
		{"dashboard", "/c/" + co, "main h1"},
		{"issues", "/c/" + co + "/issues", "main h1"},
		{"issue", "/c/" + co + "/issues/" + issueID, "#issue-live"},
	} {
		b.open(p.path, p.ready)
		b.checkAccessibility(p.name)
		b.screenshot(p.name)
	}
}
