package board_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/sdktest"
)

// TestBrowserLiveComment drives Debian's headless Chromium: sign in on the board, open an
// issue, and see a comment posted through the API appear on the open page without a reload
// (htmx's SSE extension re-fetching the issue on the company event stream), with no Content
// Security Policy violation logged. It runs only with KEEL_BROWSER_TESTS=1 and skips when
// chromium is not installed (`apt-get install -y chromium`).
func TestBrowserLiveComment(t *testing.T) {
	t.Parallel()
	if os.Getenv("KEEL_BROWSER_TESTS") == "" {
		t.Skip("browser tests run with KEEL_BROWSER_TESTS=1 (they need Debian's chromium; a loaded machine makes them slow)")
	}
	exe, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed: the browser test needs Debian's headless Chromium (apt-get install -y chromium)")
	}
	h := sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) {
		c.DeploymentMode, c.DeploymentExposure = "authenticated", "private"
	}})
	waitExtensions(t, h)

	// An API client with its own session: sign up, claim the instance, make a company and an
	// issue.
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	api := &http.Client{Jar: jar}
	call := func(method, path string, body any) map[string]any {
		t.Helper()
		b, err := json.Marshal(body)
		require.NoError(t, err)
		req, err := http.NewRequest(method, h.URL+path, bytes.NewReader(b))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		res, err := api.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(res.Body).Decode(&out)
		require.Less(t, res.StatusCode, 300, "%s %s: %d %v", method, path, res.StatusCode, out)
		return out
	}
	const email, password = "grace@example.test", "a long enough password"
	call("POST", "/api/auth/sign-up/email", map[string]any{"name": "Grace", "email": email, "password": password})
	call("POST", "/api/bootstrap/claim", map[string]any{})
	co := call("POST", "/api/companies", map[string]any{"name": "Browser Co"})["id"].(string)
	issueID := call("POST", "/api/companies/"+co+"/issues", map[string]any{"title": "Watch me live"})["id"].(string)

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Flag("headless", "new"))...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelTimeout()
	var mu sync.Mutex
	var violations []string
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

	issuePath := "/c/" + co + "/issues/" + issueID
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(h.URL+"/signin"),
		chromedp.WaitVisible(chromedp.CSS("#email")),
		chromedp.SendKeys(chromedp.CSS("#email"), email),
		chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.Submit(chromedp.CSS("#password")),
		chromedp.WaitVisible(chromedp.Search(`//strong[text()="Grace"]`)),
		chromedp.Navigate(h.URL+issuePath),
		chromedp.WaitVisible(chromedp.CSS("#issue-live")),
	))
	// Wait for the page's event stream to be open, then post through the API.
	sdktest.WaitFor(t, time.Minute, func() bool {
		state, err := chromedp.Run(ctx, chromedp.Evaluate[int](`(function(){var e=document.querySelector('[sse-connect]');
			var d=e&&e['htmx-internal-data'];return d&&d.sseEventSource?d.sseEventSource.readyState:-1})()`))
		return err == nil && state == 1
	}, "the issue page's event stream to open")
	call("POST", "/api/issues/"+issueID+"/comments", map[string]any{"body": "Posted by the API, seen live"})
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
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, violations, "the browser logged CSP violations or script errors")
}
