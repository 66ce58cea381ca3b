package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/extensions/all"
	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdktest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

// bundledRoot builds the plugin the way keel ships it: a bundled root whose plugins/wiki
// holds the manifest, package.json, skills, ui/ and the built executable.
func bundledRoot(t testing.TB) string {
	t.Helper()
	built := sdktest.BuildProcessExtension(t, ".")
	root := t.TempDir()
	dir := filepath.Join(root, "plugins", "wiki")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.CopyFS(filepath.Join(dir, "skills"), os.DirFS("skills")))
	require.NoError(t, os.CopyFS(filepath.Join(dir, "ui"), os.DirFS("ui")))
	for _, f := range []string{"manifest.json", "package.json"} {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	exe, err := os.ReadFile(filepath.Join(built, "llm-wiki"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "llm-wiki"), exe, 0o755))
	return root
}

// api is a wiki route path.
func api(p string) string { return apiPrefix + p }

// toolResult is the result of a tool execution.
type toolResult struct {
	Content string         `json:"content"`
	Data    map[string]any `json:"data"`
	Error   string         `json:"error"`
}

// execTool runs a wiki tool as the board in a company.
func execTool(t testing.TB, h *sdktest.Host, company, name string, params map[string]any) *toolResult {
	t.Helper()
	p := map[string]any{"companyId": company, "wikiId": "default"}
	for k, v := range params {
		p[k] = v
	}
	res := h.Do("POST", "/api/plugins/tools/execute", map[string]any{"tool": pluginKey + ":" + name, "parameters": p,
		"runContext": map[string]any{"companyId": company}})
	require.Equal(t, http.StatusOK, res.Status, "%s %s", name, res.Body)
	var out struct {
		Result toolResult `json:"result"`
	}
	res.JSON(t, &out)
	return &out.Result
}

// ok checks a status and decodes the body.
func ok(t testing.TB, res *sdktest.Response, status int) map[string]any {
	t.Helper()
	require.Equal(t, status, res.Status, "%s", res.Body)
	return res.Map(t)
}

// agentScript is the whole maintainer "agent" of the query test: with its run's own
// credentials it writes a page through the wiki tools, tries a stale write and a
// protected file, searches page text, and answers the query as a comment on its task.
const agentScript = `set -eu
auth="Authorization: Bearer $SERVICE_API_KEY"
run="X-Service-Run-Id: $SERVICE_RUN_ID"
json="Content-Type: application/json"
tool() {
  curl -sS -f -X POST -H "$auth" -H "$run" -H "$json" \
    -d "{\"tool\":\"keelhq.llm_wiki:$1\",\"parameters\":{\"companyId\":\"$SERVICE_COMPANY_ID\",\"wikiId\":\"default\",$2}}" \
    "$SERVICE_API_URL/api/plugins/tools/execute"
}
tool wiki_write_page '"path":"wiki/synthesis/runbook.md","contents":"# Runbook\n\nThe pager rotates weekly; see [billing](../concepts/billing.md).\n"' >/dev/null
stale=$(tool wiki_write_page '"path":"wiki/synthesis/runbook.md","contents":"# Stale","expectedHash":"0000000000000000000000000000000000000000000000000000000000000000"')
protected=$(tool wiki_write_page '"path":"AGENTS.md","contents":"# Mine"')
found=$(tool wiki_search '"query":"pager rotation"')
echo "Looking up the pager rotation in the wiki"
case "$stale" in *"Refusing to overwrite wiki/synthesis/runbook.md: expected hash"*) s=refused;; *) s=written;; esac
case "$protected" in *"Refusing to overwrite protected wiki control file AGENTS.md"*) p=refused;; *) p=written;; esac
case "$found" in *"wiki/synthesis/runbook.md"*) f=found;; *) f=missing;; esac
curl -sS -f -X POST -H "$auth" -H "$run" -H "$json" \
  -d "{\"body\":\"The pager rotates weekly (wiki/synthesis/runbook.md). stale=$s protected=$p search=$f\"}" \
  "$SERVICE_API_URL/api/issues/$SERVICE_TASK_ID/comments" >/dev/null
curl -sS -f -X PATCH -H "$auth" -H "$run" -H "$json" -d '{"status":"done"}' "$SERVICE_API_URL/api/issues/$SERVICE_TASK_ID" >/dev/null
`

// TestWiki installs the wiki from the bundled catalog into a real host with every
// first-party extension and drives it end to end: bootstrap in a temp folder, managed
// resources, capture, tools (writes, the hash guard, protected files, full-text search,
// backlinks, a rename, paging), pages written straight to the folder, spaces, operations
// as hidden issues, a query session answered by a real process agent over the stream,
// filing the answer, event ingestion, then uninstall with and without purge.
func TestWiki(t *testing.T) {
	t.Parallel()
	root := bundledRoot(t)
	h := sdktest.Start(t, sdktest.Options{Builtins: true, Verbose: os.Getenv("WIKI_DEBUG") != "", Configure: func(c *host.Config) { c.BundledRoot = root }})
	company := h.CreateCompany("Wiki Co")

	var catalog []map[string]any
	h.Do("GET", "/api/plugins/examples", nil).JSON(t, &catalog)
	var entry map[string]any
	for _, e := range catalog {
		if e["pluginKey"] == pluginKey {
			entry = e
		}
	}
	require.NotNil(t, entry, "the wiki is in the bundled catalog: %v", catalog)
	require.Equal(t, "first-party", entry["tag"])
	require.Equal(t, "@keelhq/plugin-llm-wiki", entry["packageName"])
	res := h.Do("POST", "/api/plugins/install", map[string]any{"packageName": entry["localPath"], "isLocalPath": true})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	plugin := res.Map(t)["id"].(string)

	var managed *sdk.ManagedResourceList
	sdktest.WaitFor(t, 60*time.Second, func() bool {
		res := h.Do("GET", "/api/plugins/"+plugin+"/companies/"+company+"/managed-resources", nil)
		if res.Status != http.StatusOK {
			return false
		}
		managed = &sdk.ManagedResourceList{}
		res.JSON(t, managed)
		t.Logf("managed resources: %s", res.Body)
		for _, r := range managed.Resources {
			if r.Kind != sdk.ManagedSkillKind && r.ResourceID == nil {
				return false
			}
		}
		return len(managed.Resources) == 11
	}, "the wiki's managed resources")
	maintainer := *managed.Find(sdk.ManagedAgentKind, maintainerKey).ResourceID
	require.Equal(t, "paused", managed.Find(sdk.ManagedAgentKind, maintainerKey).OwnerStatus)
	for _, key := range []string{"cursor-window-processing", "nightly-wiki-lint", "index-refresh"} {
		r := managed.Find(sdk.ManagedRoutineKind, key)
		require.NotNil(t, r, key)
		require.Equal(t, "paused", r.OwnerStatus, key)
	}
	agent := ok(t, h.Do("GET", "/api/agents/"+maintainer, nil), http.StatusOK)
	require.EqualValues(t, 0, agent["budgetMonthlyCents"])

	wikiRoot := filepath.Join(t.TempDir(), "company-wiki")

	t.Run("BeforeBootstrap", func(t *testing.T) {
		res := h.Do("POST", api("/sources"), map[string]any{"companyId": company, "contents": "x"})
		require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
		require.Contains(t, string(res.Body), "not configured")
		r := execTool(t, h, company, "wiki_read_page", map[string]any{"path": "wiki/index.md"})
		require.Contains(t, r.Error, "not configured")
	})

	t.Run("Bootstrap", func(t *testing.T) {
		out := ok(t, h.Do("POST", api("/bootstrap"), map[string]any{"companyId": company, "path": wikiRoot}), http.StatusCreated)
		require.Contains(t, out["writtenFiles"], "AGENTS.md")
		require.Contains(t, out["writtenFiles"], "wiki/index.md")
		require.Equal(t, true, out["folder"].(map[string]any)["healthy"])
		require.NotNil(t, out["managedAgent"])
		for _, d := range requiredDirectories {
			require.DirExists(t, filepath.Join(wikiRoot, d))
		}
		again := ok(t, h.Do("POST", api("/bootstrap"), map[string]any{"companyId": company}), http.StatusCreated)
		require.Empty(t, again["writtenFiles"])
		require.Contains(t, again["preservedFiles"], "IDEA.md")
		// The board sets the same folder in keel: tools then get it with every call.
		res := h.Do("PUT", "/api/plugins/"+plugin+"/companies/"+company+"/local-folders/wiki-root", map[string]any{"path": wikiRoot})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, true, res.Map(t)["healthy"], "%s", res.Body)

		ov := ok(t, h.Do("GET", api("/overview?companyId="+company), nil), http.StatusOK)
		require.Equal(t, "ok", ov["status"])
		require.Equal(t, maintainer, *managed.Find(sdk.ManagedAgentKind, maintainerKey).ResourceID)
		require.Equal(t, false, ov["eventIngestion"].(map[string]any)["enabled"], "event ingestion is off by default")
		require.Len(t, ov["managedSkills"], 6)
		require.Len(t, ov["managedRoutines"], 3)
	})

	t.Run("CaptureSources", func(t *testing.T) {
		out := ok(t, h.Do("POST", api("/sources"), map[string]any{"companyId": company, "title": "Q3 pricing memo",
			"contents": "The enterprise tier moves to usage-based invoicing in October.", "url": "https://example.com/memo"}), http.StatusCreated)
		rawPath := out["rawPath"].(string)
		require.Regexp(t, `^raw/\d{4}-\d{2}-\d{2}-q3-pricing-memo-[0-9a-f]{8}\.md$`, rawPath)
		require.FileExists(t, filepath.Join(wikiRoot, rawPath))
		for _, tc := range []struct {
			name   string
			body   map[string]any
			status int
			want   string
		}{
			{"OutsideRaw", map[string]any{"companyId": company, "contents": "x", "rawPath": "wiki/x.md"}, 400, "sources live under raw/"},
			{"Traversal", map[string]any{"companyId": company, "contents": "x", "rawPath": "raw/../AGENTS.md"}, 400, "'..'"},
			{"TooLarge", map[string]any{"companyId": company, "contents": strings.Repeat("x", 250001)}, 413, "maxSourceBytes"},
			{"Empty", map[string]any{"companyId": company, "contents": ""}, 400, "contents"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				res := h.Do("POST", api("/sources"), tc.body)
				require.Equal(t, tc.status, res.Status, "%s", res.Body)
				require.Contains(t, string(res.Body), tc.want)
			})
		}
		list := execTool(t, h, company, "wiki_list_sources", nil)
		require.Contains(t, list.Content, rawPath)
		src := execTool(t, h, company, "wiki_read_source", map[string]any{"rawPath": rawPath})
		require.Contains(t, src.Content, "usage-based invoicing")
		found := execTool(t, h, company, "wiki_search", map[string]any{"query": "invoicing"})
		require.Contains(t, found.Content, "source: "+rawPath, "source text is searched")
	})

	t.Run("Tools", func(t *testing.T) {
		w1 := execTool(t, h, company, "wiki_write_page", map[string]any{"path": "wiki/concepts/billing.md",
			"contents": "# Billing\n\nInvoices are issued monthly by the finance team. See [Acme](../entities/acme.md).\n", "summary": "New concept"})
		require.Empty(t, w1.Error)
		hash := w1.Data["hash"].(string)
		require.Equal(t, "Billing", w1.Data["title"])
		require.Equal(t, "concept", w1.Data["pageType"])
		require.Equal(t, []any{"wiki/entities/acme.md"}, w1.Data["backlinks"])

		read := execTool(t, h, company, "wiki_read_page", map[string]any{"path": "wiki/concepts/billing.md"})
		require.Equal(t, hash, read.Data["hash"])
		require.Contains(t, read.Content, "Invoices are issued monthly")

		stale := execTool(t, h, company, "wiki_write_page", map[string]any{"path": "wiki/concepts/billing.md", "contents": "# Billing v2",
			"expectedHash": strings.Repeat("a", 64)})
		require.Equal(t, "Refusing to overwrite wiki/concepts/billing.md: expected hash "+strings.Repeat("a", 64)+" but current hash is "+hash, stale.Error)
		w2 := execTool(t, h, company, "wiki_write_page", map[string]any{"path": "wiki/concepts/billing.md",
			"contents": "# Billing\n\nInvoices are issued monthly by the finance team. See [Acme](../entities/acme.md).\nRefunds take five days.\n", "expectedHash": hash})
		require.Empty(t, w2.Error)
		require.Equal(t, hash, w2.Data["previousHash"])

		for _, p := range []string{"AGENTS.md", "IDEA.md"} {
			r := execTool(t, h, company, "wiki_write_page", map[string]any{"path": p, "contents": "# Mine"})
			require.Equal(t, "Refusing to overwrite protected wiki control file "+p, r.Error)
		}
		b, _ := os.ReadFile(filepath.Join(wikiRoot, "AGENTS.md"))
		require.Contains(t, string(b), "LLM Wiki operating schema", "the control file is untouched")
		bad := execTool(t, h, company, "wiki_write_page", map[string]any{"path": "raw/x.md", "contents": "x"})
		require.Contains(t, bad.Error, "Invalid page path")
		bad = execTool(t, h, company, "wiki_read_page", map[string]any{"path": "wiki/../../etc/passwd.md"})
		require.Contains(t, bad.Error, "'..'")

		execTool(t, h, company, "wiki_write_page", map[string]any{"path": "wiki/entities/acme.md", "contents": "# Acme\n\nA customer on the enterprise tier.\n"})
		execTool(t, h, company, "wiki_write_page", map[string]any{"path": "wiki/synthesis/q3.md",
			"contents": "# Q3\n\nRevenue grew; billing ([[wiki/concepts/billing.md]]) changed and wiki/entities/acme.md renewed.\n"})

		// Full-text search over page text: ranked, with snippets, stemming included.
		found := execTool(t, h, company, "wiki_search", map[string]any{"query": "refund", "kind": "page"})
		results := found.Data["results"].([]any)
		require.NotEmpty(t, results)
		first := results[0].(map[string]any)
		require.Equal(t, "wiki/concepts/billing.md", first["path"])
		require.Contains(t, first["snippet"], "**Refunds**")
		none := execTool(t, h, company, "wiki_search", map[string]any{"query": "zeppelin"})
		require.Equal(t, "No wiki matches found.", none.Content)

		back := execTool(t, h, company, "wiki_list_backlinks", map[string]any{"path": "wiki/entities/acme.md"})
		paths := []string{}
		for _, r := range back.Data["backlinks"].([]any) {
			paths = append(paths, r.(map[string]any)["path"].(string))
		}
		require.Equal(t, []string{"wiki/concepts/billing.md", "wiki/synthesis/q3.md"}, paths)

		// Renaming keeps backlinks correct: every linking page is rewritten.
		ren := execTool(t, h, company, "wiki_rename_page", map[string]any{"path": "wiki/entities/acme.md", "newPath": "wiki/entities/acme-corp.md"})
		require.Empty(t, ren.Error)
		require.ElementsMatch(t, []any{"wiki/concepts/billing.md", "wiki/synthesis/q3.md"}, ren.Data["updatedPages"])
		require.NoFileExists(t, filepath.Join(wikiRoot, "wiki/entities/acme.md"))
		back = execTool(t, h, company, "wiki_list_backlinks", map[string]any{"path": "wiki/entities/acme-corp.md"})
		require.Len(t, back.Data["backlinks"], 2)
		back = execTool(t, h, company, "wiki_list_backlinks", map[string]any{"path": "wiki/entities/acme.md"})
		require.Empty(t, back.Data["backlinks"])
		b, _ = os.ReadFile(filepath.Join(wikiRoot, "wiki/concepts/billing.md"))
		require.Contains(t, string(b), "[Acme](wiki/entities/acme-corp.md)")

		prop := execTool(t, h, company, "wiki_propose_patch", map[string]any{"path": "wiki/concepts/billing.md", "contents": "# New"})
		require.Equal(t, "proposed", prop.Data["status"])
		require.NotEqual(t, prop.Data["currentHash"], prop.Data["proposedHash"])

		idx := execTool(t, h, company, "wiki_read_page", map[string]any{"path": "wiki/index.md"})
		up := execTool(t, h, company, "wiki_update_index", map[string]any{"contents": "# Index\n\n- [Billing](concepts/billing.md)\n", "expectedHash": idx.Data["hash"]})
		require.Empty(t, up.Error)
		stale = execTool(t, h, company, "wiki_update_index", map[string]any{"contents": "# Index", "expectedHash": idx.Data["hash"]})
		require.Contains(t, stale.Error, "Refusing to overwrite wiki/index.md")
		execTool(t, h, company, "wiki_append_log", map[string]any{"entry": "ingest | Q3 pricing memo"})
		b, _ = os.ReadFile(filepath.Join(wikiRoot, "wiki/log.md"))
		require.Regexp(t, `\n- \d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z ingest \| Q3 pricing memo\n$`, string(b))

		// Pages written straight to the folder are picked up by the next index refresh.
		require.NoError(t, os.WriteFile(filepath.Join(wikiRoot, "wiki/concepts/churn.md"), []byte("# Churn\n\nCustomers who cancel within ninety days.\n"), 0o644))
		require.NoError(t, os.Remove(filepath.Join(wikiRoot, "wiki/synthesis/q3.md")))
		ref := ok(t, h.Do("POST", api("/index-refresh"), map[string]any{"companyId": company}), http.StatusOK)
		require.Equal(t, []any{"wiki/concepts/churn.md"}, ref["indexed"])
		require.Equal(t, []any{"wiki/synthesis/q3.md"}, ref["removed"])
		found = execTool(t, h, company, "wiki_search", map[string]any{"query": "cancel"})
		require.Contains(t, found.Content, "wiki/concepts/churn.md")

		// Paging with a cursor.
		seen := []string{}
		cursor := ""
		for range 10 {
			params := map[string]any{"limit": 2}
			if cursor != "" {
				params["cursor"] = cursor
			}
			pg := execTool(t, h, company, "wiki_list_pages", params)
			for _, p := range pg.Data["pages"].([]any) {
				seen = append(seen, p.(map[string]any)["path"].(string))
			}
			if pg.Data["complete"] == true {
				break
			}
			cursor = pg.Data["nextCursor"].(string)
		}
		require.Contains(t, seen, "wiki/concepts/churn.md")
		require.Contains(t, seen, "wiki/log.md")
		require.IsIncreasing(t, seen)
	})

	t.Run("Spaces", func(t *testing.T) {
		out := ok(t, h.Do("POST", api("/spaces"), map[string]any{"companyId": company, "displayName": "Research Lab"}), http.StatusCreated)
		sp := out["space"].(map[string]any)
		require.Equal(t, "research-lab", sp["slug"])
		require.Equal(t, "spaces/research-lab", sp["pathPrefix"])
		require.FileExists(t, filepath.Join(wikiRoot, "spaces/research-lab/wiki/index.md"))
		res := h.Do("POST", api("/spaces"), map[string]any{"companyId": company, "slug": "x", "folderMode": "existing_local_folder"})
		require.Equal(t, http.StatusUnprocessableEntity, res.Status)
		require.Contains(t, string(res.Body), "Only managed_subfolder spaces are supported until dynamic local folder bindings are available.")
		require.Equal(t, http.StatusConflict, h.Do("POST", api("/spaces"), map[string]any{"companyId": company, "slug": "research-lab"}).Status)

		w := execTool(t, h, company, "wiki_write_page", map[string]any{"spaceSlug": "research-lab", "path": "wiki/concepts/lab.md", "contents": "# Lab\n\nSpectrometers.\n"})
		require.Empty(t, w.Error)
		require.FileExists(t, filepath.Join(wikiRoot, "spaces/research-lab/wiki/concepts/lab.md"))
		require.Contains(t, execTool(t, h, company, "wiki_search", map[string]any{"query": "spectrometers"}).Content, "No wiki matches", "spaces are isolated")

		patched := ok(t, h.Do("PATCH", api("/spaces/research-lab"), map[string]any{"companyId": company, "displayName": "Lab", "settings": map[string]any{"a": 1}}), http.StatusOK)
		require.Equal(t, "Lab", patched["space"].(map[string]any)["displayName"])
		bs := ok(t, h.Do("POST", api("/spaces/research-lab/bootstrap"), map[string]any{"companyId": company}), http.StatusCreated)
		require.Empty(t, bs["writtenFiles"])
		var list struct {
			Spaces []map[string]any `json:"spaces"`
		}
		h.Do("GET", api("/spaces?companyId="+company), nil).JSON(t, &list)
		require.Len(t, list.Spaces, 2)
		require.Equal(t, "default", list.Spaces[0]["slug"])
		require.Equal(t, http.StatusUnprocessableEntity, h.Do("POST", api("/spaces/default/archive"), map[string]any{"companyId": company}).Status)
		arch := ok(t, h.Do("POST", api("/spaces/research-lab/archive"), map[string]any{"companyId": company}), http.StatusOK)
		require.Equal(t, "archived", arch["status"])
		h.Do("GET", api("/spaces?companyId="+company), nil).JSON(t, &list)
		require.Len(t, list.Spaces, 1)
		require.Contains(t, execTool(t, h, company, "wiki_read_page", map[string]any{"spaceSlug": "research-lab", "path": "wiki/index.md"}).Error, "space not found")
		require.Equal(t, http.StatusNotFound, h.Do("POST", api("/spaces/nope/bootstrap"), map[string]any{"companyId": company}).Status)
	})

	t.Run("Access", func(t *testing.T) {
		other := h.CreateCompany("Other Co")
		outsider := h.CreateAgent(other, "Outsider", "general")
		insider := h.CreateAgent(company, "Insider", "general")
		// board-or-agent routes admit the company's agents; board-only ones refuse them.
		require.Equal(t, http.StatusOK, h.Do("GET", api("/overview?companyId="+company), nil, insider.As("")...).Status)
		require.Equal(t, http.StatusOK, h.Do("GET", api("/spaces?companyId="+company), nil, insider.As("")...).Status)
		require.Equal(t, http.StatusOK, h.Do("GET", api("/operations?companyId="+company), nil, insider.As("")...).Status)
		require.Equal(t, http.StatusCreated, h.Do("POST", api("/sources"), map[string]any{"companyId": company, "contents": "agent note"}, insider.As("")...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("POST", api("/bootstrap"), map[string]any{"companyId": company}, insider.As("")...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("POST", api("/spaces"), map[string]any{"companyId": company, "slug": "a"}, insider.As("")...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("POST", api("/query-sessions"), map[string]any{"companyId": company, "question": "q"}, insider.As("")...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("GET", api("/overview?companyId="+company), nil, outsider.As("")...).Status)
		res := h.Do("POST", "/api/plugins/tools/execute", map[string]any{"tool": pluginKey + ":wiki_read_page",
			"parameters": map[string]any{"companyId": company, "wikiId": "default", "path": "wiki/index.md"}}, outsider.As("")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Contains(t, string(res.Body), "companyId does not match", "an agent cannot name another company's wiki")
	})

	t.Run("QuerySession", func(t *testing.T) {
		// The maintainer is created paused: a query is blocked until the board resumes it.
		res := h.Do("POST", api("/query-sessions"), map[string]any{"companyId": company, "question": "Who carries the pager?"})
		require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
		require.Contains(t, string(res.Body), "The wiki maintainer agent is paused")
		var ops struct {
			Operations []map[string]any `json:"operations"`
		}
		h.Do("GET", api("/operations?companyId="+company+"&operationType=query"), nil).JSON(t, &ops)
		require.Len(t, ops.Operations, 1)
		require.Equal(t, "blocked", ops.Operations[0]["status"])
		require.Equal(t, "blocked", ops.Operations[0]["hiddenIssueStatus"])

		// Operation issues are hidden (out of the issue list, its count, search and the
		// dashboard) but reachable by id.
		hiddenID := ops.Operations[0]["hiddenIssueId"].(string)
		iss := ok(t, h.Do("GET", "/api/issues/"+hiddenID, nil), http.StatusOK)
		require.NotNil(t, iss["hiddenAt"])
		require.Equal(t, maintainer, iss["assigneeAgentId"])
		for _, path := range []string{"/issues", "/issues?projectId=" + iss["projectId"].(string), "/issues?assigneeAgentId=" + maintainer,
			"/issues/count?assigneeAgentId=" + maintainer, "/search?q=pager", "/dashboard"} {
			res := h.Do("GET", "/api/companies/"+company+path, nil)
			require.Equal(t, http.StatusOK, res.Status, "%s: %s", path, res.Body)
			require.NotContains(t, string(res.Body), hiddenID, "%s shows the hidden operation issue", path)
			if strings.HasPrefix(path, "/issues/count") {
				require.JSONEq(t, `{"count":0}`, string(res.Body))
			}
		}

		// The board gives the maintainer a real process adapter and resumes it.
		ok(t, h.Do("PATCH", "/api/agents/"+maintainer, map[string]any{"adapterType": "process",
			"adapterConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", agentScript}, "timeoutSec": 60}}), http.StatusOK)
		ok(t, h.Do("POST", "/api/agents/"+maintainer+"/resume", nil), http.StatusOK)

		out := ok(t, h.Do("POST", api("/query-sessions"), map[string]any{"companyId": company, "question": "Who carries the pager?"}), http.StatusCreated)
		require.Equal(t, "running", out["status"])
		opID := out["operationId"].(string)
		require.Equal(t, "llm-wiki:query:"+opID, out["channel"])

		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", h.URL+"/api/plugins/"+plugin+"/bridge/stream/llm-wiki:query:"+opID+"?companyId="+company, nil)
		require.NoError(t, err)
		stream, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer stream.Body.Close()
		require.Equal(t, http.StatusOK, stream.StatusCode)
		events := make(chan map[string]any, 1000)
		go func() {
			rd := bufio.NewReader(stream.Body)
			for {
				line, err := rd.ReadString('\n')
				if err != nil {
					close(events)
					return
				}
				if data, ok := strings.CutPrefix(line, "data: "); ok {
					var ev map[string]any
					if json.Unmarshal([]byte(data), &ev) == nil {
						events <- ev
					}
				}
			}
		}()

		var op map[string]any
		sdktest.WaitFor(t, 90*time.Second, func() bool {
			h.Do("GET", api("/operations?companyId="+company+"&operationType=query&status=done"), nil).JSON(t, &ops)
			if len(ops.Operations) == 1 && ops.Operations[0]["hiddenIssueStatus"] == "done" {
				op = ops.Operations[0]
				return true
			}
			return false
		}, "the maintainer to answer the query")
		require.Equal(t, "done", op["hiddenIssueStatus"])
		// The stream carries the run's output live (its stdout line, with the run id, read
		// from the run's events through the agents owner) and the answer.
		answer, live := "", false
		deadline := time.After(60 * time.Second)
	read:
		for {
			var ev map[string]any
			select {
			case e, open := <-events:
				if !open {
					break read
				}
				ev = e
			case <-deadline:
				break read
			}
			if ev["type"] == "agent.event" && ev["stream"] == "stdout" && ev["runId"] != nil &&
				strings.Contains(fmt.Sprint(ev["message"]), "Looking up the pager rotation") {
				live = true
			}
			if ev["type"] == "query.done" {
				answer = ev["answer"].(string)
			}
			if live && answer != "" {
				break
			}
		}
		require.True(t, live, "the run's output is streamed live")
		require.NotEmpty(t, op["runIds"], "the run is recorded on the operation")
		require.Contains(t, answer, "The pager rotates weekly")
		require.Contains(t, answer, "stale=refused protected=refused search=found",
			"the agent's stale write and protected write were refused and its page is searchable")
		require.FileExists(t, filepath.Join(wikiRoot, "wiki/synthesis/runbook.md"))

		filed := ok(t, h.Do("POST", api("/file-as-page"), map[string]any{"companyId": company, "querySessionId": opID,
			"path": "wiki/synthesis/pager.md", "title": "Pager"}), http.StatusCreated)
		require.Equal(t, "done", filed["issue"].(map[string]any)["status"])
		b, _ := os.ReadFile(filepath.Join(wikiRoot, "wiki/synthesis/pager.md"))
		require.Contains(t, string(b), "# Pager\n\n> Filed from query: Who carries the pager?\n\nThe pager rotates weekly")
		res = h.Do("POST", api("/file-as-page"), map[string]any{"companyId": company, "path": "AGENTS.md", "contents": "x"})
		require.Equal(t, http.StatusForbidden, res.Status)
	})

	t.Run("EventIngestion", func(t *testing.T) {
		// A second space takes documents only, through its ingestion profile; a profile
		// that raises the hard cap or names unknown fields is refused.
		for _, bad := range []map[string]any{{"enabled": true, "maxCharactersPerSource": 50000}, {"enabled": true, "bogus": 1},
			{"enabled": true, "scope": "selected_projects"}} {
			res := h.Do("POST", api("/spaces"), map[string]any{"companyId": company, "displayName": "Bad", "settings": map[string]any{"ingestion": bad}})
			require.Equal(t, http.StatusBadRequest, res.Status, "%v: %s", bad, res.Body)
		}
		ok(t, h.Do("POST", api("/spaces"), map[string]any{"companyId": company, "displayName": "Ops", "settings": map[string]any{
			"ingestion": map[string]any{"enabled": true, "sources": map[string]any{"issues": false, "comments": false}}}}), http.StatusCreated)
		iss := ok(t, h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "Migrate the ledger", "description": "Move the ledger to the new cluster."}), http.StatusCreated)
		ok(t, h.Do("POST", "/api/plugins/"+plugin+"/config", map[string]any{"configJson": map[string]any{"eventIngestion": true, "maxIssueSourceCharacters": 1000}}), http.StatusOK)
		res := h.Do("POST", "/api/plugins/"+plugin+"/config", map[string]any{"configJson": map[string]any{"maxIssueSourceCharacters": 20000}})
		require.Equal(t, http.StatusBadRequest, res.Status, "a cap above the hard cap is refused: %s", res.Body)
		ok(t, h.Do("POST", "/api/issues/"+iss["id"].(string)+"/comments", map[string]any{"body": "Cutover is Friday. " + strings.Repeat("z", 3000)}), http.StatusCreated)
		sdktest.WaitFor(t, 30*time.Second, func() bool {
			found := execTool(t, h, company, "wiki_search", map[string]any{"query": "cutover friday", "kind": "source"})
			return strings.Contains(found.Content, "raw/events/comment-")
		}, "the comment to be captured as a source")
		list := execTool(t, h, company, "wiki_list_sources", map[string]any{"limit": 5})
		require.Contains(t, list.Content, "Comment on ")
		var clipped bool
		for _, s := range list.Data["sources"].([]any) {
			p := s.(map[string]any)["raw_path"].(string)
			if strings.HasPrefix(p, "raw/events/comment-") {
				b, err := os.ReadFile(filepath.Join(wikiRoot, p))
				require.NoError(t, err)
				clipped = strings.Contains(string(b), "[Clipped at 1000 characters for this source.]")
			}
		}
		require.True(t, clipped, "sources are clipped to the per-source cap")

		// A document event is captured with the revision's text (read through the work
		// owner's documents.get, clipped there to the cap).
		ok(t, h.Do("PUT", "/api/issues/"+iss["id"].(string)+"/documents/plan", map[string]any{"title": "Cutover plan",
			"body": "Drain the quorum replicas first. " + strings.Repeat("y", 2000)}), http.StatusCreated)
		var doc string
		sdktest.WaitFor(t, 30*time.Second, func() bool {
			found := execTool(t, h, company, "wiki_search", map[string]any{"query": "quorum replicas", "kind": "source"})
			for _, r := range found.Data["results"].([]any) {
				if p := r.(map[string]any)["path"].(string); strings.HasPrefix(p, "raw/events/document-") {
					doc = p
				}
			}
			return doc != ""
		}, "the document to be captured as a source with its text")
		b, err := os.ReadFile(filepath.Join(wikiRoot, doc))
		require.NoError(t, err)
		require.Contains(t, string(b), "# Document Cutover plan of ")
		require.Contains(t, string(b), "Drain the quorum replicas first.")
		require.Contains(t, string(b), "[Clipped at 1000 characters for this source.]")
		require.Less(t, len(b), 1400, "the document text is clipped to the per-source cap")

		// The Ops space took the document, not the comment.
		sdktest.WaitFor(t, 30*time.Second, func() bool {
			found := execTool(t, h, company, "wiki_search", map[string]any{"query": "quorum replicas", "kind": "source", "spaceSlug": "ops"})
			return strings.Contains(found.Content, "raw/events/document-")
		}, "the Ops space's profile to take the document")
		found := execTool(t, h, company, "wiki_search", map[string]any{"query": "cutover friday", "kind": "source", "spaceSlug": "ops"})
		require.NotContains(t, found.Content, "raw/events/comment-", "the Ops profile takes no comments")

		// Each ingested event is noted on the company's distillation cursor.
		var pending int
		var last string
		require.NoError(t, h.Kernel.Pool.QueryRow(t.Context(), `SELECT c.pending_event_count, c.metadata->>'lastSourceKind'
			FROM ext_keelhq_llm_wiki.distillation_cursors c JOIN ext_keelhq_llm_wiki.wiki_spaces s ON s.id = c.space_id
			WHERE c.company_id = $1 AND c.source_scope = 'company' AND s.slug = 'default'`, company).Scan(&pending, &last))
		require.GreaterOrEqual(t, pending, 2, "the comment and the document at least")
		require.Equal(t, "issue_document", last)
	})

	t.Run("UninstallKeepsThenPurges", func(t *testing.T) {
		require.Equal(t, http.StatusOK, h.Do("DELETE", "/api/plugins/"+plugin, nil).Status)
		require.Equal(t, http.StatusNotFound, h.Do("GET", api("/overview?companyId="+company), nil).Status)
		var n int
		require.NoError(t, h.Kernel.Pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname = 'ext_keelhq_llm_wiki'`).Scan(&n))
		require.Equal(t, 1, n, "an uninstall keeps the wiki's schema")
		res := h.Do("POST", "/api/plugins/install", map[string]any{"packageName": entry["localPath"], "isLocalPath": true})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		sdktest.WaitFor(t, 30*time.Second, func() bool {
			return h.Do("GET", api("/overview?companyId="+company), nil).Status == http.StatusOK
		}, "the reinstalled wiki to serve")
		r := execTool(t, h, company, "wiki_read_page", map[string]any{"path": "wiki/concepts/billing.md"})
		require.Contains(t, r.Content, "Refunds take five days", "a reinstall finds the wiki as it was")

		require.Equal(t, http.StatusOK, h.Do("DELETE", "/api/plugins/"+plugin+"?purge=true", nil).Status)
		require.NoError(t, h.Kernel.Pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname = 'ext_keelhq_llm_wiki'`).Scan(&n))
		require.Equal(t, 0, n, "a purge drops the wiki's schema")
		require.FileExists(t, filepath.Join(wikiRoot, "wiki/concepts/billing.md"), "the company's folder is the company's: never deleted")
		agent := ok(t, h.Do("GET", "/api/agents/"+maintainer, nil), http.StatusOK)
		require.Equal(t, "terminated", agent["status"])
	})
}
