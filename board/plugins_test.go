package board_test

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/sdktest"
)

// wikiCatalog builds a bundled root whose plugins/wiki is the LLM Wiki as keel ships it
// (binary, manifest, package.json, skills and ui/ files).
func wikiCatalog(t *testing.T) string {
	t.Helper()
	built := sdktest.BuildProcessExtension(t, "../plugins/wiki")
	root := t.TempDir()
	dir := filepath.Join(root, "plugins", "wiki")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.CopyFS(filepath.Join(dir, "skills"), os.DirFS("../plugins/wiki/skills")))
	require.NoError(t, os.CopyFS(filepath.Join(dir, "ui"), os.DirFS("../plugins/wiki/ui")))
	for _, f := range []string{"manifest.json", "package.json"} {
		b, err := os.ReadFile(filepath.Join("../plugins/wiki", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	exe, err := os.ReadFile(filepath.Join(built, "llm-wiki"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "llm-wiki"), exe, 0o755))
	return root
}

// pluginIDOf returns the registry id of an installed plugin.
func pluginIDOf(t *testing.T, h *sdktest.Host, key string) string {
	t.Helper()
	var list []map[string]any
	h.Do("GET", "/api/plugins", nil).JSON(t, &list)
	for _, p := range list {
		if p["pluginKey"] == key {
			return p["id"].(string)
		}
	}
	t.Fatalf("plugin %s is not installed", key)
	return ""
}

var hxGet = regexp.MustCompile(`hx-get="([^"]*/x/[^"]*)"`)

// TestBoardPlugins drives the plugin and adapter admin pages and extension UI of a real
// host: the wiki installed from the catalog through the page's form (with progress), its
// page and sidebar link contributed as HTML fragments, then disabled through the page so
// its slot disappears; the ui-slots example's fragments sanitised (script, onclick, foreign
// htmx) and placed as a page, dashboard widgets (one failing: an error box), an issue tab and
// a settings page; the config form from the manifest's JSON Schema; the adapter registry.
func TestBoardPlugins(t *testing.T) {
	t.Parallel()
	root := wikiCatalog(t)
	uiSlots := sdktest.BuildProcessExtension(t, "../examples/ui-slots")
	h := sdktest.Start(t, sdktest.Options{Builtins: true, ExtensionDirs: []string{uiSlots},
		Configure: func(c *host.Config) { c.BundledRoot = root }})
	waitExtensions(t, h)
	co := h.CreateCompany("Plugin Co")
	uiID := pluginIDOf(t, h, "example.ui_slots")

	t.Run("PluginsPage", func(t *testing.T) {
		t.Parallel()
		p := newBrowser(t, h.URL).get("/instance/plugins")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		for _, want := range []string{"<h1>Plugins</h1>", "UI slots (example)", "LLM Wiki", `name="catalog"`, `name="packageName"`,
			`hx-get="/instance/plugins/` + uiID + `/health"`, `href="/instance/plugins"`, `href="/instance/adapters"`} {
			require.Contains(t, p.Body, want)
		}
		// The page reads the light list: manifests cut to displayName and description.
		var light []map[string]any
		h.Do("GET", "/api/plugins?manifest=false", nil).JSON(t, &light)
		for _, e := range light {
			if e["pluginKey"] == "example.ui_slots" {
				require.Equal(t, "UI slots (example)", e["manifest"].(map[string]any)["displayName"])
				require.Len(t, e["manifest"], 2)
				require.Equal(t, map[string]any{}, e["config"])
			}
		}
		p = newBrowser(t, h.URL).get("/instance/plugins/"+uiID+"/health", "HX-Request", "true")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, "healthy")
	})

	t.Run("InstallUseAndDisableTheWiki", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t, h.URL)
		p := b.get("/instance/plugins")
		tok := p.csrf(t)
		m := regexp.MustCompile(`<option value="([^"]*plugins/wiki)"`).FindStringSubmatch(p.Body)
		require.NotNil(t, m, "the catalog offers the wiki: %s", p.Body)
		// Without the token the install is refused.
		p = b.post("/instance/plugins/install", url.Values{"catalog": {m[1]}})
		require.Equal(t, http.StatusForbidden, p.Status, p.Body)
		p = b.post("/instance/plugins/install", url.Values{"catalog": {m[1]}}, "HX-Request", "true", "X-CSRF-Token", tok)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, "LLM Wiki")
		wikiID := pluginIDOf(t, h, "keelhq.llm_wiki")
		// The progress row settles (it polls /state until then).
		sdktest.WaitFor(t, time.Minute, func() bool {
			p := b.get("/instance/plugins/"+wikiID+"/state", "HX-Request", "true")
			return strings.Contains(p.Body, "status-ready")
		}, "the wiki to be ready")

		// Its sidebar link and page arrive through its UI slots.
		page := "/c/" + co + "/x/keelhq.llm_wiki/wiki"
		p = b.get("/c/" + co)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, `href="`+page+`"`)
		require.Contains(t, p.Body, "<span>Wiki</span>")
		res := h.Do("POST", "/api/plugins/keelhq.llm_wiki/api/bootstrap", map[string]any{"companyId": co, "path": t.TempDir()})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		res = h.Do("POST", "/api/plugins/tools/execute", map[string]any{"tool": "keelhq.llm_wiki:wiki_write_page",
			"parameters": map[string]any{"companyId": co, "wikiId": "default", "path": "wiki/concepts/billing.md",
				"contents": "# Billing\n\nInvoices go out monthly. <script>alert(1)</script>\n\nSee [the runbook](../synthesis/runbook.md).\n"},
			"runContext": map[string]any{"companyId": co}})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		p = b.get(page)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		require.Contains(t, p.Body, "Search the wiki")
		require.Contains(t, p.Body, "Recent pages")
		require.Contains(t, p.Body, "wiki/concepts/billing.md")
		require.Contains(t, p.Body, `aria-current="page"`)
		// The search box asks the board, which asks the wiki and sanitises the results.
		search := hxGet.FindStringSubmatch(p.Body)
		require.NotNil(t, search)
		require.True(t, strings.HasPrefix(search[1], page+"?at="), search[1])
		searchURL := strings.ReplaceAll(search[1], "&amp;", "&") + "&q=invoices"
		p = b.get(searchURL, "HX-Request", "true")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.NotContains(t, p.Body, "<html")
		require.Contains(t, p.Body, "Billing")
		// A page renders its markdown without raw HTML; its links stay on the board.
		p = b.get(page + "?at=" + url.QueryEscape("/api/plugins/keelhq.llm_wiki/html/page?companyId="+co+"&path=wiki/concepts/billing.md"))
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		require.Contains(t, p.Body, "<h1>Billing</h1>")
		require.NotContains(t, p.Body, "alert(1)</script>")
		require.Contains(t, p.Body, `href="`+page+`?at=%2Fapi%2Fplugins%2Fkeelhq.llm_wiki%2Fhtml%2Fpage`)
		// Another plugin's or the kernel's paths are refused as ?at=.
		p = b.get(page + "?at=" + url.QueryEscape("/api/companies/"+co))
		require.Equal(t, http.StatusBadRequest, p.Status, p.Body)

		// Disabled through its page, the wiki's link and page are gone.
		tok = b.get("/instance/plugins/" + wikiID).csrf(t)
		p = b.post("/instance/plugins/"+wikiID+"/disable", url.Values{"_csrf": {tok}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		require.Equal(t, "/instance/plugins/"+wikiID+"?done=disabled", p.Header.Get("Location"))
		p = b.get("/instance/plugins/" + wikiID + "?done=disabled")
		require.Contains(t, p.Body, "The plugin was disabled")
		require.Contains(t, p.Body, "status-disabled")
		p = b.get("/c/" + co)
		require.NotContains(t, p.Body, `href="`+page+`"`)
		p = b.get(page)
		require.Equal(t, http.StatusNotFound, p.Status, p.Body)
		// Disabling it again is refused with the API's message, on the page.
		p = b.post("/instance/plugins/"+wikiID+"/disable", url.Values{"_csrf": {tok}})
		require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
		require.Contains(t, p.Body, "The plugin could not disable: Invalid lifecycle transition")
		// Uninstalled (with purge) through its page.
		p = b.post("/instance/plugins/"+wikiID+"/uninstall", url.Values{"_csrf": {tok}, "purge": {"true"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		require.Equal(t, "/instance/plugins?done=purged", p.Header.Get("Location"))
	})

	t.Run("ExampleFragmentsAreSanitised", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t, h.URL)
		page := "/c/" + co + "/x/example.ui_slots/home"
		p := b.get("/c/" + co)
		require.Contains(t, p.Body, `href="`+page+`"`, "the sidebar slot links to the plugin's page")
		p = b.get(page)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		require.Contains(t, p.Body, " from the UI slots example.")
		require.NotContains(t, p.Body, "never runs")
		require.NotContains(t, p.Body, "onclick")
		require.NotContains(t, p.Body, `hx-get="https://evil.example`)
		require.Contains(t, p.Body, `href="https://evil.example/x"`, "plain links elsewhere stay links")
		require.Contains(t, p.Body, `hx-get="`+page+`?at=%2Fapi%2Fplugins%2Fexample.ui_slots%2Fhtml%2Fclock`)
		require.Contains(t, p.Body, `hx-target="#ui-clock"`)
		// The button's request goes through the board.
		clock := hxGet.FindStringSubmatch(p.Body)
		require.NotNil(t, clock)
		p = b.get(strings.ReplaceAll(clock[1], "&amp;", "&"), "HX-Request", "true")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, "<time datetime=")
		// The form's hx-post goes through the board too: with the CSRF token only.
		greet := regexp.MustCompile(`hx-post="([^"]*)"`).FindStringSubmatch(p.Body + b.get(page).Body)
		require.NotNil(t, greet)
		greetURL := strings.ReplaceAll(greet[1], "&amp;", "&")
		tok := b.get(page).csrf(t)
		p = b.post(greetURL, url.Values{"name": {"Ada"}}, "HX-Request", "true")
		require.Equal(t, http.StatusForbidden, p.Status, p.Body)
		p = b.post(greetURL, url.Values{"name": {"Ada <b>"}}, "HX-Request", "true", "X-CSRF-Token", tok)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Regexp(t, `(Hello|Hi), Ada &lt;b&gt;!`, p.Body, "the greeting follows the config, which ConfigForm changes")
		p = b.post(greetURL, url.Values{"name": {""}}, "HX-Request", "true", "X-CSRF-Token", tok)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, `class="notice error ext-error"`)
	})

	t.Run("WidgetsTabsAndSettings", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t, h.URL)
		p := b.get("/c/" + co)
		require.Contains(t, p.Body, `hx-get="/c/`+co+`/x-slots/company.dashboardWidget"`)
		p = b.get("/c/"+co+"/x-slots/company.dashboardWidget", "HX-Request", "true")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, "Example widget")
		require.Contains(t, p.Body, "<li>Row 1</li>")
		// The failing widget is a small error box; the others still show.
		require.Contains(t, p.Body, "Broken widget could not be shown: The broken widget always fails")
		is := createIssue(t, h, co, "Tabbed issue")
		id := is["id"].(string)
		p = b.get("/c/" + co + "/issues/" + id)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, `hx-get="/c/`+co+`/x-slots/issue.detailTab?issueId=`+id+`"`)
		p = b.get("/c/"+co+"/x-slots/issue.detailTab?issueId="+id, "HX-Request", "true")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, "Issue "+id+" as the example plugin sees it.")
		p = b.get("/c/"+co+"/x-slots/nowhere", "HX-Request", "true")
		require.Equal(t, http.StatusNotFound, p.Status, p.Body)
		p = b.get("/instance/plugins/" + uiID)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		require.Contains(t, p.Body, "Example settings")
		require.Contains(t, p.Body, "The example&#39;s settings live in its config form above")
	})

	t.Run("ConfigForm", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t, h.URL)
		path := "/instance/plugins/" + uiID
		p := b.get(path)
		for _, want := range []string{`<label for="f-cfg-greeting">`, "How the page greets people.", `name="cfg.widgetRows"`,
			`name="cfg.mode"`, `<option value="loud"`, `name="cfg.shout"`, `role="log"`} {
			require.Contains(t, p.Body, want)
		}
		tok := p.csrf(t)
		p = b.post(path+"/config", url.Values{"_csrf": {tok}, "cfg.greeting": {"Hi"}, "cfg.widgetRows": {"lots"}})
		require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
		requireSafePage(t, p)
		require.Contains(t, p.Body, "Must be a whole number.")
		require.Contains(t, p.Body, `value="lots"`)
		p = b.post(path+"/config", url.Values{"_csrf": {tok}, "cfg.greeting": {"Hi"}, "cfg.widgetRows": {"11"}})
		require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
		require.Contains(t, p.Body, "Must be at most 10.")
		p = b.post(path+"/config", url.Values{"_csrf": {tok}, "cfg.greeting": {"Hi"}, "cfg.widgetRows": {"2"}, "cfg.mode": {"loud"}, "cfg.bogus": {"x"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		var cfg map[string]any
		h.Do("GET", "/api/plugins/"+uiID+"/config", nil).JSON(t, &cfg)
		require.Equal(t, map[string]any{"greeting": "Hi", "widgetRows": float64(2), "mode": "loud"}, cfg["configJson"])
		sdktest.WaitFor(t, 30*time.Second, func() bool {
			p := b.get("/c/"+co+"/x-slots/company.dashboardWidget", "HX-Request", "true")
			return strings.Contains(p.Body, "Row 2") && !strings.Contains(p.Body, "Row 3")
		}, "the new config to reach the plugin")
	})

	t.Run("Adapters", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t, h.URL)
		p := b.get("/instance/adapters")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		require.Contains(t, p.Body, "<h1>Adapters</h1>")
		m := regexp.MustCompile(`href="/instance/adapters/([^"]+)"`).FindStringSubmatch(p.Body)
		require.NotNil(t, m, p.Body)
		p = b.get("/instance/adapters/" + m[1])
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		requireSafePage(t, p)
		require.Contains(t, p.Body, "Instance config")
		// A refused install is shown on the page.
		tok := p.csrf(t)
		p = b.post("/instance/adapters/install", url.Values{"_csrf": {tok}, "packageName": {"/nowhere/at/all"}, "isLocalPath": {"true"}})
		require.GreaterOrEqual(t, p.Status, 400, p.Body)
		require.Less(t, p.Status, 500, p.Body)
		require.Contains(t, p.Body, "The adapter was not installed")
		p = b.post("/instance/adapters/"+m[1]+"/bogus", url.Values{"_csrf": {tok}})
		require.Equal(t, http.StatusNotFound, p.Status, p.Body)
	})
}

// TestBoardPluginsForbidden: a member who is no instance admin is told so on the plugin and
// adapter pages, and gets no plugin UI it may not see.
func TestBoardPluginsForbidden(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) {
		c.DeploymentMode, c.DeploymentExposure = "authenticated", "private"
	}})
	waitExtensions(t, h)
	admin := newBrowser(t, h.URL)
	tok := admin.get("/signin").csrf(t)
	p := admin.post("/signup", url.Values{"_csrf": {tok}, "name": {"Ada"}, "email": {"ada@example.test"}, "password": {"correct horse battery"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	p = admin.post("/claim-admin", url.Values{"_csrf": {admin.get("/companies").csrf(t)}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	p = admin.get("/instance/plugins")
	require.Equal(t, http.StatusOK, p.Status, p.Body)

	bob := newBrowser(t, h.URL)
	btok := bob.get("/signin").csrf(t)
	p = bob.post("/signup", url.Values{"_csrf": {btok}, "name": {"Bob"}, "email": {"bob@example.test"}, "password": {"another good password"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	p = bob.get("/instance/plugins")
	require.Equal(t, http.StatusForbidden, p.Status, p.Body)
	requireSafePage(t, p)
	require.Contains(t, p.Body, "You do not have access")
	// The adapter registry is readable by board users; its writes are the admin's.
	p = bob.get("/instance/adapters")
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	require.Contains(t, p.Body, "Only an instance admin can install, configure or remove adapters.")
	require.NotContains(t, p.Body, `action="/instance/adapters/install"`)
	require.Contains(t, admin.get("/instance/adapters").Body, `action="/instance/adapters/install"`)
	btok = bob.get("/companies").csrf(t)
	p = bob.post("/instance/plugins/install", url.Values{"_csrf": {btok}, "packageName": {"x"}})
	require.Equal(t, http.StatusForbidden, p.Status, p.Body)
	require.Contains(t, p.Body, "The plugin was not installed")
}
