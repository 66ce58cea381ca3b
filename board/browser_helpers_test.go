package board_test

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/sdktest"
)

// axeSource is axe-core (MPL-2.0, testdata/axe/LICENSE), the accessibility engine the browser
// tests run over every page.
//
//go:embed testdata/axe/axe.min.js
var axeSource string

// chrome is a signed-in board in headless Chromium against a real host of its own, in
// authenticated mode, with an API client holding the same user's session.
type chrome struct {
	t    *testing.T
	h    *sdktest.Host
	ctx  context.Context
	api  *http.Client
	mu   sync.Mutex
	errs []string // CSP violations and uncaught script errors the console reported
}

const browserEmail, browserPassword = "grace@example.test", "a long enough password"

// newChrome starts a host and Chromium, signs a first user up and makes it the instance
// admin through the API, and signs the browser in through the board's form. It skips the
// test unless KEEL_BROWSER_TESTS is set and chromium is installed.
func newChrome(t *testing.T) *chrome {
	t.Helper()
	if os.Getenv("KEEL_BROWSER_TESTS") == "" {
		t.Skip("browser tests run with KEEL_BROWSER_TESTS=1 (they need Debian's chromium; a loaded machine makes them slow)")
	}
	exe, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed: the browser tests need Debian's headless Chromium (apt-get install -y chromium)")
	}
	h := sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) {
		c.DeploymentMode, c.DeploymentExposure = "authenticated", "private"
	}})
	waitExtensions(t, h)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	b := &chrome{t: t, h: h, api: &http.Client{Jar: jar}}
	b.call("POST", "/api/auth/sign-up/email", map[string]any{"name": "Grace", "email": browserEmail, "password": browserPassword})
	b.call("POST", "/api/bootstrap/claim", map[string]any{})

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Flag("headless", "new"), chromedp.WindowSize(1280, 800))...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 5*time.Minute)
	t.Cleanup(cancelTimeout)
	b.ctx = ctx
	// Start the browser before listening to its console: a listener racing the first
	// navigation for the new tab left it at about:blank.
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)), "starting chromium")
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if strings.Contains(m.Text, "Content Security Policy") || m.Type == chromedp.ConsoleException {
				b.mu.Lock()
				b.errs = append(b.errs, m.Text)
				b.mu.Unlock()
			}
		}
	}()
	b.do(
		chromedp.Navigate(h.URL+"/signin"),
		chromedp.WaitVisible(chromedp.CSS("#email")),
		chromedp.SendKeys(chromedp.CSS("#email"), browserEmail),
		chromedp.SendKeys(chromedp.CSS("#password"), browserPassword),
		chromedp.Submit(chromedp.CSS("#password")),
		chromedp.WaitVisible(chromedp.Search(`//strong[text()="Grace"]`)),
	)
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		require.Empty(t, b.errs, "the browser logged CSP violations or script errors")
	})
	return b
}

// call makes an API request with the browser user's API session and returns the decoded
// answer, failing the test on a status of 300 or more.
func (b *chrome) call(method, path string, body any) map[string]any {
	b.t.Helper()
	var out map[string]any
	status := b.callStatus(method, path, body, &out)
	require.Less(b.t, status, 300, "%s %s: %d %v", method, path, status, out)
	return out
}

// callStatus makes an API request and decodes the answer into out, returning its status.
func (b *chrome) callStatus(method, path string, body, out any) int {
	b.t.Helper()
	return b.callStatusAs(method, path, body, out, "")
}

// callStatusAs is callStatus with an Authorization header (none when empty, so the
// browser user's session applies).
func (b *chrome) callStatusAs(method, path string, body, out any, authorization string) int {
	b.t.Helper()
	buf, err := json.Marshal(body)
	require.NoError(b.t, err)
	req, err := http.NewRequest(method, b.h.URL+path, bytes.NewReader(buf))
	require.NoError(b.t, err)
	req.Header.Set("Content-Type", "application/json")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	res, err := b.api.Do(req)
	require.NoError(b.t, err)
	defer res.Body.Close()
	_ = json.NewDecoder(res.Body).Decode(out)
	return res.StatusCode
}

// do runs browser steps, failing the test on the first error with the page's address and
// text, and with a screenshot in the screenshot folder as failed-<test>.png.
func (b *chrome) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	err := chromedp.Do(ctx, steps...)
	if err == nil {
		return
	}
	loc, _ := chromedp.Run(b.ctx, chromedp.Location())
	text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	b.screenshot("failed-" + strings.ReplaceAll(b.t.Name(), "/", "-"))
	require.NoError(b.t, err, "browser at %s showing:\n%s", loc, text)
}

// open navigates to path and waits until sel is visible.
func (b *chrome) open(path, sel string) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.h.URL+path), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// axeViolation is one failed axe-core rule.
type axeViolation struct {
	ID    string `json:"id"`
	Help  string `json:"help"`
	Nodes []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

// checkAccessibility runs axe-core's WCAG 2 A and AA rules (labels, contrast, keyboard
// focus, names, landmarks …) over the open page and fails the test on any violation.
func (b *chrome) checkAccessibility(page string) {
	b.t.Helper()
	_, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](axeSource+";true"))
	require.NoError(b.t, err, "loading axe-core into %s", page)
	raw, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](
		`axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]}})
			.then(r => JSON.stringify(r.violations))`, chromedp.EvalAwaitPromise))
	require.NoError(b.t, err, "running axe-core on %s", page)
	var vs []axeViolation
	require.NoError(b.t, json.Unmarshal([]byte(raw), &vs))
	var msgs []string
	for _, v := range vs {
		for _, n := range v.Nodes {
			msgs = append(msgs, fmt.Sprintf("%s (%s): %v %s", v.ID, v.Help, n.Target, n.HTML))
		}
	}
	require.Empty(b.t, msgs, "accessibility violations on %s", page)
}

// screenshot writes the viewport (1280×800) as docs/screenshots/<name>.png, or under
// $KEEL_SCREENSHOT_DIR when set, for the README.
func (b *chrome) screenshot(name string) {
	b.t.Helper()
	dir := os.Getenv("KEEL_SCREENSHOT_DIR")
	if dir == "" {
		dir = filepath.Join("..", "docs", "screenshots")
	}
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	require.NoError(b.t, err, "screenshot of %s", name)
	require.NoError(b.t, os.MkdirAll(dir, 0o755))
	require.NoError(b.t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}
