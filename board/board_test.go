package board_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/board"
	_ "github.com/keelhq/keel/extensions/all" // the first-party extensions the pages read from
	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as an extension,
// sdktest.Main serves the extension instead.
func TestMain(m *testing.M) { sdktest.Main(m) }

// browser is a cookie-keeping HTTP client that does not follow redirects, so the tests
// see each answer.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &browser{t: t, base: base, c: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// page is an answer read in full.
type page struct {
	Status int
	Header http.Header
	Body   string
}

func (b *browser) do(method, path string, form url.Values, headers ...string) *page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	require.NoError(b.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := b.c.Do(req)
	require.NoError(b.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(b.t, err)
	return &page{Status: res.StatusCode, Header: res.Header, Body: string(raw)}
}

func (b *browser) get(path string, headers ...string) *page {
	return b.do("GET", path, nil, headers...)
}

// post sends a form the way a browser on the board's own origin does.
func (b *browser) post(path string, form url.Values, headers ...string) *page {
	return b.do("POST", path, form, append([]string{"Origin", b.base, "Sec-Fetch-Site", "same-origin"}, headers...)...)
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`)

// csrf returns the page's CSRF token.
func (p *page) csrf(t *testing.T) string {
	t.Helper()
	m := csrfMeta.FindStringSubmatch(p.Body)
	require.NotNil(t, m, "no csrf-token meta in: %s", p.Body)
	return m[1]
}

var (
	scriptTag = regexp.MustCompile(`<script[^>]*>`)
	styleAttr = regexp.MustCompile(`\sstyle=`)
	inlineOn  = regexp.MustCompile(`\son[a-z]+=`)
)

// requireSafePage checks the headers every board page carries and that the HTML has no
// inline script, no style attributes and no inline event handlers.
func requireSafePage(t *testing.T, p *page) {
	t.Helper()
	require.Equal(t, board.ContentSecurityPolicy, p.Header.Get("Content-Security-Policy"))
	require.Contains(t, p.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'")
	require.Equal(t, "DENY", p.Header.Get("X-Frame-Options"))
	require.Equal(t, "nosniff", p.Header.Get("X-Content-Type-Options"))
	for _, tag := range scriptTag.FindAllString(p.Body, -1) {
		require.Contains(t, tag, ` src="/assets/`, "inline or foreign script: %s", tag)
	}
	require.NotRegexp(t, styleAttr, p.Body)
	require.NotRegexp(t, inlineOn, p.Body)
	require.NotContains(t, p.Body, "<style")
}

// startLocal starts a local_trusted host with the first-party extensions and a company with
// issues, an agent and a comment.
func startLocal(t *testing.T) (*sdktest.Host, string) {
	t.Helper()
	h := sdktest.Start(t, sdktest.Options{Builtins: true})
	waitExtensions(t, h)
	return h, h.CreateCompany("Board Co")
}

// waitExtensions waits until the host is ready: the database, migrations, job queue and
// every enabled extension (GET /api/health?ready=1 is public, so this works in both modes).
func waitExtensions(tb testing.TB, h *sdktest.Host) {
	tb.Helper()
	sdktest.WaitFor(tb, 4*time.Minute, func() bool {
		return h.Do("GET", "/api/health?ready=1", nil).Status == http.StatusOK
	}, "the host and its extensions to be ready")
}

func createIssue(t *testing.T, h *sdktest.Host, companyID, title string) map[string]any {
	t.Helper()
	res := h.Do("POST", "/api/companies/"+companyID+"/issues", map[string]any{"title": title, "description": "About " + title})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	return res.Map(t)
}

func TestBoardLocalTrusted(t *testing.T) {
	t.Parallel()
	h, co := startLocal(t)
	first := createIssue(t, h, co, "Wire the flux capacitor")
	for i := 0; i < 4; i++ {
		createIssue(t, h, co, fmt.Sprintf("Filler issue %d", i))
	}
	issueID := first["id"].(string)
	res := h.Do("POST", "/api/issues/"+issueID+"/comments", map[string]any{"body": "First comment from the API"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)

	t.Run("HomeGoesToTheFirstCompany", func(t *testing.T) {
		t.Parallel()
		p := newBrowser(t, h.URL).get("/")
		require.Equal(t, http.StatusSeeOther, p.Status)
		require.Equal(t, "/c/"+co, p.Header.Get("Location"))
	})

	t.Run("Companies", func(t *testing.T) {
		t.Parallel()
		p := newBrowser(t, h.URL).get("/companies")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		require.Contains(t, p.Body, "Board Co")
		require.Contains(t, p.Body, `action="/companies"`)
		require.Contains(t, p.Body, "Signed in as")
	})

	t.Run("CreateCompany", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t, h.URL)
		tok := b.get("/companies").csrf(t)
		p := b.post("/companies", url.Values{"_csrf": {tok}, "name": {"Made on the board"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		require.True(t, strings.HasPrefix(p.Header.Get("Location"), "/c/"))
		p = b.post("/companies", url.Values{"_csrf": {tok}, "name": {""}})
		require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
		require.Contains(t, p.Body, "The company was not created")
	})

	t.Run("Dashboard", func(t *testing.T) {
		t.Parallel()
		p := newBrowser(t, h.URL).get("/c/" + co)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		require.Contains(t, p.Body, "Open issues")
		require.Contains(t, p.Body, `<svg class="chart"`)
		require.Contains(t, p.Body, `role="img" aria-labelledby="runs-chart-t runs-chart-d"`)
		require.Contains(t, p.Body, `<title id="spend-chart-t">Spend per day</title>`)
		require.Contains(t, p.Body, "14 days from")
	})

	t.Run("IssueList", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t, h.URL)
		p := b.get("/c/" + co + "/issues")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		require.Contains(t, p.Body, "Wire the flux capacitor")
		require.Contains(t, p.Body, `sse-connect="/api/companies/`+co+`/events?entityType=issue&amp;since=`)
		require.Contains(t, p.Body, `hx-trigger="sse:message delay:500ms"`)
		for _, name := range []string{"q", "status", "assigneeAgentId", "assigneeUserId", "projectId", "goalId", "labelId",
			"parentId", "originKind", "originKindPrefix", "originId", "routineExecutions", "sortField", "sortDir", "limit"} {
			require.Contains(t, p.Body, `name="`+name+`"`, "filter %s", name)
		}
		// Search, as an htmx partial: the fragment alone.
		p = b.get("/c/"+co+"/issues?q=flux", "HX-Request", "true")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.NotContains(t, p.Body, "<html")
		require.True(t, strings.HasPrefix(p.Body, `<div id="issue-list"`), p.Body)
		require.Contains(t, p.Body, "Wire the flux capacitor")
		require.NotContains(t, p.Body, "Filler issue")
		// Pagination.
		p = b.get("/c/"+co+"/issues?q=Filler&limit=2&sortField=createdAt&sortDir=asc", "HX-Request", "true")
		require.Contains(t, p.Body, "1–2 of 4")
		require.Contains(t, p.Body, "Filler issue 0")
		require.Contains(t, p.Body, ">Next<")
		require.NotContains(t, p.Body, ">Previous<")
		p = b.get("/c/"+co+"/issues?q=Filler&limit=2&offset=2&sortField=createdAt&sortDir=asc", "HX-Request", "true")
		require.Contains(t, p.Body, "3–4 of 4")
		require.Contains(t, p.Body, "Filler issue 3")
		require.Contains(t, p.Body, ">Previous<")
		require.NotContains(t, p.Body, ">Next<")
		p = b.get("/c/" + co + "/issues?status=done")
		require.Contains(t, p.Body, "No issues match.")
		// A filter the API refuses is a clear 400, not a broken page.
		p = b.get("/c/"+co+"/issues?projectId=nope", "HX-Request", "true")
		require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
		require.Contains(t, p.Body, "The issues could not be listed")
	})

	t.Run("IssueDetail", func(t *testing.T) {
		t.Parallel()
		p := newBrowser(t, h.URL).get("/c/" + co + "/issues/" + issueID)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		for _, want := range []string{"Wire the flux capacitor", "About Wire the flux capacitor", "First comment from the API",
			"Add a comment", "Blockers", "Documents", "Runs", `name="status"`, `name="assigneeAgentId"`,
			`sse-connect="/api/companies/` + co + `/events?entityType=issue&amp;entityId=` + issueID + `&amp;since=`} {
			require.Contains(t, p.Body, want)
		}
	})

	t.Run("CommentAndStatusChange", func(t *testing.T) {
		t.Parallel()
		is := createIssue(t, h, co, "Comment target")
		id := is["id"].(string)
		b := newBrowser(t, h.URL)
		path := "/c/" + co + "/issues/" + id
		tok := b.get(path).csrf(t)
		// htmx posts carry the token as a header and get the fresh live part back.
		p := b.post(path+"/comments", url.Values{"body": {"Posted from the board"}}, "HX-Request", "true", "X-CSRF-Token", tok)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, "Posted from the board")
		require.Contains(t, p.Body, `id="comment-form"`)
		require.Contains(t, p.Body, `hx-swap-oob="true"`)
		// A plain form post carries it as a field and is redirected back.
		p = b.post(path, url.Values{"_csrf": {tok}, "status": {"todo"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		require.Equal(t, "todo", h.Do("GET", "/api/issues/"+id, nil).Map(t)["status"])
		// A transition the API refuses is shown, not a broken page.
		p = b.post(path, url.Values{"status": {"bogus"}}, "HX-Request", "true", "X-CSRF-Token", tok)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, "The change was refused")
	})

	t.Run("CSRF", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t, h.URL)
		path := "/c/" + co + "/issues/" + issueID
		tok := b.get(path).csrf(t)
		cases := []struct {
			name    string
			form    url.Values
			headers []string
		}{
			{"NoToken", url.Values{"body": {"x"}}, nil},
			{"WrongToken", url.Values{"body": {"x"}, "_csrf": {"forged"}}, nil},
			{"WrongHeader", url.Values{"body": {"x"}}, []string{"X-CSRF-Token", "forged"}},
			{"CrossSiteWithToken", url.Values{"body": {"x"}, "_csrf": {tok}}, []string{"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				p := b.post(path+"/comments", tc.form, tc.headers...)
				require.Equal(t, http.StatusForbidden, p.Status, p.Body)
				requireSafePage(t, p)
			})
		}
		// Another browser's token does not fit this browser.
		other := newBrowser(t, h.URL)
		other.get("/companies")
		p := other.post(path+"/comments", url.Values{"body": {"x"}, "_csrf": {tok}})
		require.Equal(t, http.StatusForbidden, p.Status, p.Body)
		var comments []map[string]any
		h.Do("GET", "/api/issues/"+issueID+"/comments", nil).JSON(t, &comments)
		for _, c := range comments {
			require.NotEqual(t, "x", c["body"])
		}
	})

	t.Run("Assets", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t, h.URL)
		for _, name := range []string{"board.css", "board.js", "icons.svg", "vendor/htmx.min.js", "vendor/htmx-ext-sse.min.js"} {
			p := b.get(board.Asset(name))
			require.Equal(t, http.StatusOK, p.Status, name)
			require.Equal(t, "public, max-age=31536000, immutable", p.Header.Get("Cache-Control"), name)
			require.NotEmpty(t, p.Body)
		}
		require.Regexp(t, `^/assets/vendor/htmx\.min\.[0-9a-f]{12}\.js$`, board.Asset("vendor/htmx.min.js"))
		p := b.get("/assets/board.000000000000.css")
		require.Equal(t, http.StatusNotFound, p.Status)
	})

	t.Run("UnknownCompanyAndIssue", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t, h.URL)
		p := b.get("/c/00000000-0000-0000-0000-000000000000")
		require.Equal(t, http.StatusNotFound, p.Status, p.Body)
		requireSafePage(t, p)
		require.Contains(t, p.Body, "Not found")
		p = b.get("/c/" + co + "/issues/00000000-0000-0000-0000-000000000000")
		require.Equal(t, http.StatusNotFound, p.Status, p.Body)
	})
}

// TestBoardAuthenticated covers sign-in, the first-admin claim, sign out and a member who
// may not see another company's pages.
func TestBoardAuthenticated(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) {
		c.DeploymentMode, c.DeploymentExposure = "authenticated", "private"
	}})
	waitExtensions(t, h)
	admin := newBrowser(t, h.URL)
	p := admin.get("/")
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/signin", p.Header.Get("Location"))
	p = admin.get("/signin")
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	requireSafePage(t, p)
	require.Contains(t, p.Body, "This instance has no admin yet")
	tok := p.csrf(t)

	// Sign up, then claim the instance.
	p = admin.post("/signup", url.Values{"_csrf": {tok}, "name": {"Ada"}, "email": {"ada@example.test"}, "password": {"correct horse battery"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	session := cookieNamed(p.Header, "keel_session")
	require.Contains(t, session, "HttpOnly")
	require.Contains(t, session, "SameSite=Lax")
	require.NotContains(t, session, "Secure", "a private http deployment's cookie is not Secure")
	p = admin.get("/companies")
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	require.Contains(t, p.Body, "Claim first admin")
	// The token changed with the session.
	require.NotEqual(t, tok, p.csrf(t))
	p = admin.post("/claim-admin", url.Values{"_csrf": {p.csrf(t)}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	tok = admin.get("/companies").csrf(t)
	p = admin.post("/companies", url.Values{"_csrf": {tok}, "name": {"Ada's company"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	companyPath := p.Header.Get("Location")
	p = admin.get(companyPath)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	require.Contains(t, p.Body, "Signed in as <strong>Ada</strong>")

	// A second user who is no member of Ada's company is told so, on a page.
	other := newBrowser(t, h.URL)
	otok := other.get("/signin").csrf(t)
	p = other.post("/signup", url.Values{"_csrf": {otok}, "name": {"Bob"}, "email": {"bob@example.test"}, "password": {"another good password"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	for _, path := range []string{companyPath, companyPath + "/issues"} {
		p = other.get(path)
		require.Equal(t, http.StatusForbidden, p.Status, "%s: %s", path, p.Body)
		requireSafePage(t, p)
		require.Contains(t, p.Body, "You do not have access")
	}

	// Wrong password: the API's message on the sign-in page.
	p = newBrowser(t, h.URL).post("/signin", url.Values{"_csrf": {tok}, "email": {"ada@example.test"}, "password": {"wrong"}})
	require.Equal(t, http.StatusForbidden, p.Status, "a token from another browser is refused")
	fresh := newBrowser(t, h.URL)
	ftok := fresh.get("/signin").csrf(t)
	p = fresh.post("/signin", url.Values{"_csrf": {ftok}, "email": {"ada@example.test"}, "password": {"wrong"}})
	require.Equal(t, http.StatusUnauthorized, p.Status, p.Body)
	require.Contains(t, p.Body, `role="alert"`)
	p = fresh.post("/signin", url.Values{"_csrf": {ftok}, "email": {"ada@example.test"}, "password": {"correct horse battery"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	p = fresh.get(companyPath)
	require.Equal(t, http.StatusOK, p.Status, p.Body)

	// Sign out ends the session.
	p = fresh.post("/signout", url.Values{"_csrf": {fresh.get(companyPath).csrf(t)}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/signin", p.Header.Get("Location"))
	p = fresh.get(companyPath)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/signin", p.Header.Get("Location"))
}

func cookieNamed(h http.Header, name string) string {
	for _, c := range h.Values("Set-Cookie") {
		if strings.HasPrefix(c, name+"=") {
			return c
		}
	}
	return ""
}
