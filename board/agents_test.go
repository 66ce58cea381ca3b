package board_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdktest"
)

// runScript is a process agent that writes its log in three steps, slowly enough for the
// run page to follow it live.
const runScript = `echo "step one of the run"; sleep 2; echo "step two of the run"; sleep 2; echo "all done here"`

func createAgentAPI(t *testing.T, h *sdktest.Host, companyID string, body map[string]any) string {
	t.Helper()
	res := h.Do("POST", "/api/companies/"+companyID+"/agents", body)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	return res.Map(t)["id"].(string)
}

var (
	pollerGet = regexp.MustCompile(`id="run-poll" hx-get="([^"]+)"`)
	oobLog    = regexp.MustCompile(`(?s)<div hx-swap-oob="beforeend:#run-log">(.*?)</div>`)
	pageLog   = regexp.MustCompile(`(?s)<pre id="run-log"[^>]*>(.*?)</pre>`)
)

func TestBoardAgents(t *testing.T) {
	t.Parallel()
	h, co := startLocal(t)
	ceo := createAgentAPI(t, h, co, map[string]any{"name": "Chief", "role": "ceo", "adapterType": "process",
		"adapterConfig": map[string]any{"command": "/bin/true"}})
	eng := createAgentAPI(t, h, co, map[string]any{"name": "Builder", "role": "engineer", "title": "Staff engineer",
		"reportsTo": ceo, "adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", runScript}, "timeoutSec": 60}})
	base := "/c/" + co + "/agents"

	t.Run("ListAndOrgChart", func(t *testing.T) {
		t.Parallel()
		p := newBrowser(t, h.URL).get(base)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		for _, want := range []string{"Org chart", `<ul class="org" aria-label="Org chart">`, `aria-label="Reports of Chief"`,
			"Staff engineer", "Hire an agent", `name="adapterType"`, `name="reportsTo"`, `aria-current="page"`, `href="/c/` + co + `/runs"`} {
			require.Contains(t, p.Body, want)
		}
		// The engineer is nested under the CEO.
		chief := strings.Index(p.Body, ">Chief</a>")
		reports := strings.Index(p.Body, `aria-label="Reports of Chief"`)
		builder := strings.Index(p.Body, ">Builder</a>")
		require.True(t, chief >= 0 && chief < reports && reports < builder, "the org chart nests Builder under Chief")
	})

	t.Run("Hire", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t, h.URL)
		tok := b.get(base).csrf(t)
		p := b.post(base, url.Values{"_csrf": {tok}, "name": {"Hired on the board"}, "role": {"engineer"}, "title": {"New hire"},
			"reportsTo": {ceo}, "adapterType": {"process"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		loc := p.Header.Get("Location")
		require.True(t, strings.HasPrefix(loc, base+"/"), loc)
		p = b.get(loc)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, "Hired on the board")
		require.Contains(t, p.Body, ">Chief</a>", "reports to the CEO")
		// A refusal keeps the form and shows the API's reason.
		p = b.post(base, url.Values{"_csrf": {tok}, "name": {"Bad reports"}, "reportsTo": {"not-a-uuid"}, "adapterType": {"process"}})
		require.GreaterOrEqual(t, p.Status, 400, p.Body)
		require.Less(t, p.Status, 500, p.Body)
		require.Contains(t, p.Body, "The agent was not hired: Validation error: reportsTo")
		require.Contains(t, p.Body, `value="Bad reports"`)
		// No CSRF token, no hire.
		p = b.post(base, url.Values{"name": {"Forged"}, "adapterType": {"process"}})
		require.Equal(t, http.StatusForbidden, p.Status, p.Body)
	})

	t.Run("DetailAndWrites", func(t *testing.T) {
		t.Parallel()
		id := createAgentAPI(t, h, co, map[string]any{"name": "Writable", "role": "engineer", "adapterType": "process",
			"adapterConfig": map[string]any{"command": "/bin/true"}})
		b := newBrowser(t, h.URL)
		path := base + "/" + id
		p := b.get(path)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		for _, want := range []string{"Writable", "Adapter configuration", "Runs", "API keys", "Permissions", "Budget",
			`action="` + path + `/pause"`, `action="` + path + `/wake"`, `value="/bin/true"`} {
			require.Contains(t, p.Body, want)
		}
		tok := p.csrf(t)
		agent := func() map[string]any { return h.Do("GET", "/api/agents/"+id, nil).Map(t) }

		// Pause and resume.
		p = b.post(path+"/pause", url.Values{"_csrf": {tok}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		require.Equal(t, "paused", agent()["status"])
		p = b.get(path + "?ok=paused")
		require.Contains(t, p.Body, "The agent is paused.")
		require.Contains(t, p.Body, `action="`+path+`/resume"`)
		p = b.post(path+"/resume", url.Values{"_csrf": {tok}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		require.NotEqual(t, "paused", agent()["status"])

		// Budget: dollars in, cents to the API; a bad amount is a clear 400.
		p = b.post(path+"/budget", url.Values{"_csrf": {tok}, "budgetMonthlyUsd": {"12.5"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		require.EqualValues(t, 1250, agent()["budgetMonthlyCents"])
		p = b.post(path+"/budget", url.Values{"_csrf": {tok}, "budgetMonthlyUsd": {"-3"}})
		require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
		require.Contains(t, p.Body, "must be a non-negative amount of dollars")
		require.Contains(t, b.get(path).Body, `value="12.50"`)

		// Permissions.
		p = b.post(path+"/permissions", url.Values{"_csrf": {tok}, "canCreateAgents": {"on"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		require.Equal(t, true, agent()["permissions"].(map[string]any)["canCreateAgents"])
		p = b.post(path+"/permissions", url.Values{"_csrf": {tok}, "canCreateAgentsWas": {"on"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		require.Equal(t, false, agent()["permissions"].(map[string]any)["canCreateAgents"])
		p = b.post(path+"/permissions", url.Values{"_csrf": {tok}, "canAssignTasks": {"on"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		require.Equal(t, "explicit_grant", agent()["access"].(map[string]any)["taskAssignSource"])
		require.Contains(t, b.get(path).Body, `name="canAssignTasksWas" value="on"`)

		// A paused agent's wake is skipped, and the page says why.
		p = b.post(path+"/pause", url.Values{"_csrf": {tok}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		p = b.post(path+"/wake", url.Values{"_csrf": {tok}})
		require.Equal(t, http.StatusConflict, p.Status, p.Body)
		require.Contains(t, p.Body, "the wake was skipped")
		p = b.post(path+"/resume", url.Values{"_csrf": {tok}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)

		// Adapter config, the form generated from the process adapter's schema: a field the
		// form refuses is shown beside it; a good post is saved, keys the schema does not
		// name are kept and an emptied field is removed.
		res := h.Do("PATCH", "/api/agents/"+id, map[string]any{"adapterConfig": map[string]any{"command": "/bin/true",
			"cwd": "/tmp", "promptTemplate": "kept"}, "replaceAdapterConfig": true})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		p = b.get(path)
		for _, want := range []string{`name="_mode" value="schema"`, `name="cfg.command"`, `name="cfg.args"`, `name="cfg.timeoutSec"`,
			`name="cfg.cwd"`, "The executable to run"} {
			require.Contains(t, p.Body, want)
		}
		p = b.post(path+"/config", url.Values{"_csrf": {tok}, "_mode": {"schema"}, "cfg.command": {"/bin/echo"}, "cfg.timeoutSec": {"soon"}})
		require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
		require.Contains(t, p.Body, `class="field-error" id="f-cfg-timeoutSec-error"`)
		require.Contains(t, p.Body, `value="soon"`, "the posted value is kept for fixing")
		// What the adapter's own validation refuses is shown beside the field it names.
		p = b.post(path+"/config", url.Values{"_csrf": {tok}, "_mode": {"schema"}, "cfg.command": {"/bin/echo"},
			"cfg.env": {`{"GREETING": 5}`}})
		require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
		require.Contains(t, p.Body, "The change was refused: Validation error: adapterConfig.env")
		require.Contains(t, p.Body, `class="field-error" id="f-cfg-env-error"`)
		p = b.post(path+"/config", url.Values{"_csrf": {tok}, "_mode": {"schema"}, "cfg.command": {"/bin/echo"},
			"cfg.args": {"hello\nworld"}, "cfg.timeoutSec": {"30"}, "cfg.cwd": {""}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		cfg := agent()["adapterConfig"].(map[string]any)
		require.Equal(t, "/bin/echo", cfg["command"])
		require.Equal(t, []any{"hello", "world"}, cfg["args"])
		require.EqualValues(t, 30, cfg["timeoutSec"])
		require.Equal(t, "kept", cfg["promptTemplate"])
		require.NotContains(t, cfg, "cwd")

		// The same as JSON text: the refusal is shown; a good config is saved.
		p = b.post(path+"/config", url.Values{"_csrf": {tok}, "adapterConfig": {"not json"}})
		require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
		require.Contains(t, p.Body, "adapterConfig must be a JSON object")
		require.Contains(t, p.Body, "not json", "the text is kept for fixing")
		p = b.post(path+"/config", url.Values{"_csrf": {tok}, "adapterConfig": {`{"command": "/bin/echo", "args": ["hi"]}`}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		require.Equal(t, "/bin/echo", agent()["adapterConfig"].(map[string]any)["command"])

		// API keys: the token is shown once, then only the key's name; revoke.
		p = b.post(path+"/keys", url.Values{"_csrf": {tok}, "name": {"ci key"}})
		require.Equal(t, http.StatusCreated, p.Status, p.Body)
		m := regexp.MustCompile(`id="new-key-token" class="token" type="text" readonly value="([^"]+)"`).FindStringSubmatch(p.Body)
		require.NotNil(t, m, p.Body)
		token := m[1]
		require.Equal(t, http.StatusOK, h.Do("GET", "/api/agents/me", nil, "Authorization", "Bearer "+token).Status, "the token works")
		p = b.get(path)
		require.Contains(t, p.Body, "ci key")
		require.NotContains(t, p.Body, token)
		var keys []map[string]any
		h.Do("GET", "/api/agents/"+id+"/keys", nil).JSON(t, &keys)
		require.Len(t, keys, 1)
		p = b.post(path+"/keys/"+keys[0]["id"].(string)+"/revoke", url.Values{"_csrf": {tok}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		require.Equal(t, http.StatusUnauthorized, h.Do("GET", "/api/agents/me", nil, "Authorization", "Bearer "+token).Status)
		require.Contains(t, b.get(path).Body, "revoked")

		// Writes without a token are refused.
		p = b.post(path+"/pause", url.Values{})
		require.Equal(t, http.StatusForbidden, p.Status, p.Body)
		require.NotEqual(t, "paused", agent()["status"])
	})

	t.Run("WakeFollowsTheRunLive", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t, h.URL)
		path := base + "/" + eng
		tok := b.get(path).csrf(t)
		p := b.post(path+"/wake", url.Values{"_csrf": {tok}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		runPath := p.Header.Get("Location")
		require.True(t, strings.HasPrefix(runPath, "/c/"+co+"/runs/"), runPath)
		runID := strings.TrimPrefix(runPath, "/c/"+co+"/runs/")

		p = b.get(runPath)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		require.Contains(t, p.Body, "Builder")
		log := html.UnescapeString(pageLog.FindStringSubmatch(p.Body)[1])
		// Follow the poller the way htmx does until the run has ended.
		deadline, sawSummary := time.Now().Add(2*time.Minute), false
		next := pollerGet.FindStringSubmatch(p.Body)
		if next == nil {
			t.Log("the run ended before its page loaded; the page alone is checked")
		}
		for next != nil {
			require.True(t, time.Now().Before(deadline), "the poller stops once the run ends")
			time.Sleep(250 * time.Millisecond) // the poll interval (htmx's is a second)
			f := b.get(html.UnescapeString(next[1]), "HX-Request", "true")
			require.Equal(t, http.StatusOK, f.Status, f.Body)
			require.NotContains(t, f.Body, "<html")
			for _, chunk := range oobLog.FindAllStringSubmatch(f.Body, -1) {
				log += html.UnescapeString(chunk[1])
			}
			if strings.Contains(f.Body, `hx-swap-oob="outerHTML:#run-summary"`) {
				sawSummary = true
			}
			next = pollerGet.FindStringSubmatch(f.Body)
			if next == nil {
				require.Contains(t, f.Body, "The run has ended.")
				require.True(t, sawSummary, "the summary was swapped when the status changed")
				require.Contains(t, f.Body, `class="badge r-succeeded"`, f.Body)
			}
		}
		for _, line := range []string{"step one of the run", "step two of the run", "all done here"} {
			require.Contains(t, log, line)
		}
		// The log came through in order, each byte once.
		require.Equal(t, 1, strings.Count(log, "step two of the run"), log)
		require.Less(t, strings.Index(log, "step one"), strings.Index(log, "all done"))

		p = b.get(runPath)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, `class="badge r-succeeded"`)
		require.Contains(t, p.Body, "all done here")
		require.Contains(t, p.Body, "Events (")
		require.NotContains(t, p.Body, "Cancel run")

		// The runs lists.
		p = b.get("/c/" + co + "/runs")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		require.Contains(t, p.Body, `id="run-`+runID+`"`)
		require.Contains(t, p.Body, `sse-connect="/api/companies/`+co+`/events?entityType=heartbeat_run&amp;since=`)
		// The list re-fetches itself on run events: the fragment alone, with its filters.
		p = b.get("/c/"+co+"/runs?agentId="+eng, "HX-Request", "true")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.True(t, strings.HasPrefix(p.Body, `<div id="runs-body" hx-get="/c/`+co+`/runs?agentId=`+eng+`"`), p.Body)
		require.Contains(t, p.Body, `id="run-`+runID+`"`)
		require.Contains(t, b.get("/c/"+co+"/runs?status=succeeded&agentId="+eng).Body, `id="run-`+runID+`"`)
		require.NotContains(t, b.get("/c/"+co+"/runs?status=failed").Body, `id="run-`+runID+`"`)
		require.Contains(t, b.get(path).Body, `id="run-`+runID+`"`, "the agent's page lists its run")
		p = b.get("/c/" + co + "/runs?agentId=nope")
		require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
		require.Contains(t, p.Body, "The runs could not be listed")
	})

	t.Run("CancelARun", func(t *testing.T) {
		t.Parallel()
		slow := createAgentAPI(t, h, co, map[string]any{"name": "Slowpoke", "role": "engineer", "adapterType": "process",
			"adapterConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", "echo waiting; sleep 60"}, "timeoutSec": 120}})
		b := newBrowser(t, h.URL)
		tok := b.get(base + "/" + slow).csrf(t)
		p := b.post(base+"/"+slow+"/wake", url.Values{"_csrf": {tok}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		runPath := p.Header.Get("Location")
		p = b.get(runPath)
		require.Contains(t, p.Body, "Cancel run")
		require.Contains(t, b.get("/c/"+co+"/runs").Body, "Live now")
		p = b.post(runPath+"/cancel", url.Values{"_csrf": {tok}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		sdktest.WaitFor(t, 60*time.Second, func() bool {
			return strings.Contains(b.get(runPath).Body, `class="badge r-cancelled"`)
		}, "the run to show cancelled")
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t, h.URL)
		for _, path := range []string{base + "/00000000-0000-0000-0000-000000000000", "/c/" + co + "/runs/00000000-0000-0000-0000-000000000000"} {
			p := b.get(path)
			require.Equal(t, http.StatusNotFound, p.Status, "%s: %s", path, p.Body)
			requireSafePage(t, p)
		}
	})
}

// TestBoardAgentsViewer checks that a viewer sees the agent pages without write controls
// and that a forged write is refused with the API's reason.
func TestBoardAgentsViewer(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) {
		c.DeploymentMode, c.DeploymentExposure = "authenticated", "private"
	}})
	waitExtensions(t, h)
	owner := agentsSession(t, h, "owner@agents.example")
	require.Equal(t, http.StatusOK, h.Do("POST", "/api/bootstrap/claim", nil, owner...).Status)
	res := h.Do("POST", "/api/companies", map[string]any{"name": "Viewer Co"}, owner...)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	co := res.Map(t)["id"].(string)
	res = h.Do("POST", "/api/companies/"+co+"/agents", map[string]any{"name": "Watched", "role": "engineer", "adapterType": "process",
		"adapterConfig": map[string]any{"command": "/bin/true"}}, owner...)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	agentID := res.Map(t)["id"].(string)
	res = h.Do("POST", "/api/companies/"+co+"/invites", map[string]any{"allowedJoinTypes": "human", "membershipRole": "viewer"}, owner...)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	viewer := agentsSession(t, h, "viewer@agents.example")
	res = h.Do("POST", "/api/invites/"+res.Map(t)["token"].(string)+"/accept", map[string]any{}, viewer...)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.Equal(t, "viewer", res.Map(t)["membership"].(map[string]any)["membershipRole"])

	b := newBrowser(t, h.URL)
	u, err := url.Parse(h.URL)
	require.NoError(t, err)
	b.c.Jar.SetCookies(u, []*http.Cookie{{Name: kernel.SessionCookie, Value: strings.TrimPrefix(viewer[1], kernel.SessionCookie+"=")}})
	p := b.get("/c/" + co + "/agents")
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	requireSafePage(t, p)
	require.Contains(t, p.Body, "Watched")
	require.NotContains(t, p.Body, "Hire an agent")
	path := "/c/" + co + "/agents/" + agentID
	p = b.get(path)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	for _, write := range []string{"/pause\"", "/wake\"", "Create key", "Save budget", "Save permissions"} {
		require.NotContains(t, p.Body, write)
	}
	p = b.post(path+"/pause", url.Values{"_csrf": {p.csrf(t)}})
	require.Equal(t, http.StatusForbidden, p.Status, p.Body)
	require.Contains(t, p.Body, "You may not do this: Viewers cannot change anything in this company.")

	// Someone outside the company gets the clear 403 page.
	outsider := newBrowser(t, h.URL)
	outsider.c.Jar.SetCookies(u, []*http.Cookie{{Name: kernel.SessionCookie,
		Value: strings.TrimPrefix(agentsSession(t, h, "outsider@agents.example")[1], kernel.SessionCookie+"=")}})
	for _, path := range []string{"/c/" + co + "/agents", path, "/c/" + co + "/runs"} {
		p = outsider.get(path)
		require.Equal(t, http.StatusForbidden, p.Status, "%s: %s", path, p.Body)
		require.Contains(t, p.Body, "You do not have access")
	}
}

// agentsSession makes an account through the API and returns its session cookie header pair.
func agentsSession(t *testing.T, h *sdktest.Host, email string) []string {
	t.Helper()
	res := h.Do("POST", "/api/auth/sign-up/email", map[string]any{"email": email, "password": "correct horse battery", "name": email})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	for _, c := range (&http.Response{Header: res.Header}).Cookies() {
		if c.Name == kernel.SessionCookie && c.Value != "" {
			return []string{"Cookie", c.Name + "=" + c.Value}
		}
	}
	t.Fatalf("no session cookie for %s", email)
	return nil
}
