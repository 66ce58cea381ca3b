package board_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// TestBrowserInbox drives headless Chromium on the inbox: an approval requested through the
// API appears on the open page without a reload (the approval event stream), and a decision
// is decided by typing its input and pressing an option's button (htmx posts the button's
// value with the form); the API then shows it decided with the typed value. No CSP violation
// or script error may be logged. Like TestBrowserLiveComment it runs only with
// KEEL_BROWSER_TESTS=1 and skips when chromium is not installed.
func TestBrowserInbox(t *testing.T) {
	if os.Getenv("KEEL_BROWSER_TESTS") == "" {
		t.Skip("browser tests run with KEEL_BROWSER_TESTS=1 (they need Debian's chromium; a loaded machine makes them slow)")
	}
	exe, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed: the browser test needs Debian's headless Chromium (apt-get install -y chromium)")
	}
	h := sdktest.Start(t, sdktest.Options{Builtins: true})
	waitExtensions(t, h)
	f := newDecisionFixture(t, h, "Browser Inbox Co")
	decisionID := f.propose(t, h, "the green build")

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Flag("headless", "new"))...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelTimeout()
	var mu sync.Mutex
	var violations []string
	// Start the browser before listening to its console: a listener racing the first
	// navigation for the new tab left it at about:blank.
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)), "starting chromium")
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if strings.Contains(m.Text, "Content Security Policy") || m.Type == chromedp.ConsoleException {
				mu.Lock()
				violations = append(violations, m.Text)
				mu.Unlock()
			}
		}
	}()

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(h.URL+"/c/"+f.co+"/inbox"),
		chromedp.WaitVisible(chromedp.CSS("#inbox-list")),
		chromedp.WaitVisible(chromedp.Search(`//a[contains(., "the green build")]`)),
	))
	sdktest.WaitFor(t, time.Minute, func() bool {
		open, err := chromedp.Run(ctx, chromedp.Evaluate[int](`(function(){var n=0;document.querySelectorAll('[sse-connect]').forEach(function(e){
			var d=e['htmx-internal-data'];if(d&&d.sseEventSource&&d.sseEventSource.readyState===1){n++}});return n})()`))
		return err == nil && open == 2
	}, "the inbox's event streams to open")

	// Live: an approval requested through the API appears.
	res := h.Do("POST", "/api/companies/"+f.co+"/approvals", map[string]any{"type": "request_board_approval",
		"payload": map[string]any{"summary": "Seen live in the inbox"}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.Search(`//pre[contains(., "Seen live in the inbox")]`))))

	// Decide: type the input, press "Ship it"; the item leaves the list with the notice.
	input := "#di-inbox-" + decisionID + "-why"
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(input), "typed in the browser"),
		chromedp.Click(chromedp.CSS(`#item-decision-`+decisionID+` button[value="ship"]`)),
		chromedp.WaitVisible(chromedp.Search(`//div[contains(., "Decision recorded.")]`)),
	))
	got := h.Do("GET", "/api/decisions/"+decisionID, nil).Map(t)
	require.Equal(t, "decided", got["status"])
	require.Equal(t, "typed in the browser", got["inputValues"].(map[string]any)["why"])
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, violations, "the browser logged CSP violations or script errors")
}
