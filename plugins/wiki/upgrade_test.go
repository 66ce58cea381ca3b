package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/sdktest"
)

// putBuild replaces the executable and manifest of the package at dir with those of a
// build directory (what a newer or older release of the package holds).
func putBuild(t *testing.T, build, dir string) {
	t.Helper()
	for _, f := range []string{"manifest.json", "llm-wiki"} {
		b, err := os.ReadFile(filepath.Join(build, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o755))
	}
}

// TestWikiUpgrade installs the wiki from the bundled catalog at 0.1.0, fills a wiki (a page,
// a source, a space, an operation), then, through POST /api/plugins/{id}/upgrade:
// upgrades to a newer build (0.2.0, whose wiki_search answers a miss with a marked text),
// which keeps every row and file and serves the tools from the new process; refuses a
// downgrade to a build older than the schema (0.0.9, without migration 0002: 422
// upgrade_failed, 0.2.0 keeps serving); and allows a downgrade to 0.1.0, which has the same
// migrations.
func TestWikiUpgrade(t *testing.T) {
	t.Parallel()
	root := bundledRoot(t)
	pkgDir := filepath.Join(root, "plugins", "wiki")
	v1 := t.TempDir()
	putBuild(t, pkgDir, v1)
	v2 := sdktest.BuildProcessExtensionVersion(t, ".", "0.2.0", map[string][2]string{
		"tools.go": {`"No wiki matches found."`, `"No wiki matches found (served by 0.2.0)."`}})
	old := sdktest.BuildProcessExtensionVersion(t, ".", "0.0.9", map[string][2]string{
		"main.go": {"//go:embed migrations/*.sql", "//go:embed migrations/0001_wiki.up.sql"}})

	h := sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) { c.BundledRoot = root }})
	company := h.CreateCompany("Upgrade Wiki Co")
	var catalog []map[string]any
	h.Do("GET", "/api/plugins/examples", nil).JSON(t, &catalog)
	var localPath string
	for _, e := range catalog {
		if e["pluginKey"] == pluginKey {
			localPath = e["localPath"].(string)
		}
	}
	require.NotEmpty(t, localPath, "the wiki is in the bundled catalog")
	rec := ok(t, h.Do("POST", "/api/plugins/install", map[string]any{"packageName": localPath, "isLocalPath": true}), http.StatusOK)
	plugin := rec["id"].(string)
	require.Equal(t, "0.1.0", rec["version"])

	// A wiki with a page, a source, a space and an operation (a query blocked on the paused
	// maintainer is one).
	wikiRoot := filepath.Join(t.TempDir(), "wiki")
	sdktest.WaitFor(t, 60*time.Second, func() bool {
		return h.Do("POST", api("/bootstrap"), map[string]any{"companyId": company, "path": wikiRoot}).Status == http.StatusCreated
	}, "the wiki to bootstrap")
	w := execTool(t, h, company, "wiki_write_page", map[string]any{"path": "wiki/concepts/upgrades.md",
		"contents": "# Upgrades\n\nRolling upgrades keep the ledger online.\n"})
	require.Empty(t, w.Error)
	src := ok(t, h.Do("POST", api("/sources"), map[string]any{"companyId": company, "title": "Runbook",
		"contents": "Blue-green switchover happens at noon."}), http.StatusCreated)
	ok(t, h.Do("POST", api("/spaces"), map[string]any{"companyId": company, "displayName": "Platform"}), http.StatusCreated)
	require.Equal(t, http.StatusConflict, h.Do("POST", api("/query-sessions"), map[string]any{"companyId": company, "question": "When?"}).Status)

	// kept checks that the wiki's rows and files are all there.
	kept := func(t *testing.T) {
		t.Helper()
		r := execTool(t, h, company, "wiki_read_page", map[string]any{"path": "wiki/concepts/upgrades.md"})
		require.Contains(t, r.Content, "Rolling upgrades keep the ledger online.")
		found := execTool(t, h, company, "wiki_search", map[string]any{"query": "ledger"})
		require.Contains(t, found.Content, "wiki/concepts/upgrades.md", "the page index is kept")
		found = execTool(t, h, company, "wiki_search", map[string]any{"query": "switchover"})
		require.Contains(t, found.Content, src["rawPath"].(string), "the source index is kept")
		var spaces struct {
			Spaces []map[string]any `json:"spaces"`
		}
		h.Do("GET", api("/spaces?companyId="+company), nil).JSON(t, &spaces)
		require.Len(t, spaces.Spaces, 2)
		require.Equal(t, "platform", spaces.Spaces[1]["slug"])
		var ops struct {
			Operations []map[string]any `json:"operations"`
		}
		h.Do("GET", api("/operations?companyId="+company), nil).JSON(t, &ops)
		require.Len(t, ops.Operations, 1)
		require.Equal(t, "query", ops.Operations[0]["operationType"])
		require.Equal(t, "blocked", ops.Operations[0]["hiddenIssueStatus"], "the operation's hidden issue is joined")
	}
	miss := func() string {
		return execTool(t, h, company, "wiki_search", map[string]any{"query": "xylophone"}).Content
	}
	version := func() string {
		return ok(t, h.Do("GET", "/api/plugins/"+plugin, nil), http.StatusOK)["version"].(string)
	}
	require.Equal(t, "No wiki matches found.", miss())

	t.Run("Upgrade", func(t *testing.T) {
		putBuild(t, v2, pkgDir)
		rec := ok(t, h.Do("POST", "/api/plugins/"+plugin+"/upgrade", map[string]any{}), http.StatusOK)
		require.Equal(t, "0.2.0", rec["version"])
		require.Equal(t, "ready", rec["status"])
		require.Equal(t, "No wiki matches found (served by 0.2.0).", miss(), "the tools are served by the new process")
		kept(t)
	})

	t.Run("DowngradeBelowSchemaRefused", func(t *testing.T) {
		putBuild(t, old, pkgDir)
		res := h.Do("POST", "/api/plugins/"+plugin+"/upgrade", map[string]any{})
		require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
		body := res.Map(t)
		require.Equal(t, "upgrade_failed", body["code"])
		require.Contains(t, body["error"], "a downgrade below a schema change is refused")
		require.Contains(t, body["error"], "0002_distillation")
		require.Equal(t, "0.2.0", version(), "the newer version keeps serving")
		require.Equal(t, "No wiki matches found (served by 0.2.0).", miss())
		kept(t)
	})

	t.Run("DowngradeSameSchema", func(t *testing.T) {
		putBuild(t, v1, pkgDir)
		rec := ok(t, h.Do("POST", "/api/plugins/"+plugin+"/upgrade", map[string]any{}), http.StatusOK)
		require.Equal(t, "0.1.0", rec["version"])
		require.Equal(t, "No wiki matches found.", miss())
		kept(t)
		require.False(t, strings.Contains(version(), "0.2"), "0.1.0 serves again")
	})
}
