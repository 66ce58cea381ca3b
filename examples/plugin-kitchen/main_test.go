package main

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

// kitchenDir builds the example into an extension directory with its ui/ files beside it.
func kitchenDir(t *testing.T) string {
	t.Helper()
	dir := sdktest.BuildProcessExtension(t, ".")
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "ui")))
	require.NoError(t, os.CopyFS(filepath.Join(dir, "ui"), os.DirFS("ui")), "copy ui/")
	return dir
}

// Test_main drives every plugin feature route through a real host with the kitchen
// running as a process extension: tools, webhooks, jobs, logs, UI contributions and
// assets, the dashboard, data and actions, the bridge stream and local folders.
func Test_main(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{ExtensionDirs: []string{kitchenDir(t)}})
	company := h.CreateCompany("Kitchen Co")
	other := h.CreateCompany("Other Co")
	agent := h.CreateAgent(company, "Cook", "engineer")
	var plugin struct {
		ID string `json:"id"`
	}
	h.Do("GET", "/api/plugins/example.kitchen", nil).JSON(t, &plugin)
	require.NotEmpty(t, plugin.ID)

	t.Run("Tools", func(t *testing.T) {
		res := h.Do("GET", "/api/plugins/tools", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var tools []map[string]any
		res.JSON(t, &tools)
		names := []string{}
		for _, tl := range tools {
			names = append(names, tl["name"].(string))
		}
		require.Equal(t, []string{"example.kitchen:echo", "example.kitchen:read_readme", "example.kitchen:whoami"}, names)
		require.Equal(t, plugin.ID, tools[0]["pluginId"])
		require.NotNil(t, tools[0]["parametersSchema"])

		for _, tc := range []struct {
			name   string
			body   map[string]any
			status int
			want   string
		}{
			{"Echo", map[string]any{"tool": "example.kitchen:echo", "parameters": map[string]any{"text": "hi", "times": 2}, "runContext": map[string]any{"companyId": company}}, 200, "hi hi"},
			{"MissingParameter", map[string]any{"tool": "example.kitchen:echo", "parameters": map[string]any{}, "runContext": map[string]any{"companyId": company}}, 400, "Validation error"},
			{"WrongType", map[string]any{"tool": "example.kitchen:echo", "parameters": map[string]any{"text": "x", "times": 9}, "runContext": map[string]any{"companyId": company}}, 400, "parameters.times"},
			{"UnknownField", map[string]any{"tool": "example.kitchen:echo", "parameters": map[string]any{"text": "x", "extra": 1}, "runContext": map[string]any{"companyId": company}}, 400, "Validation error"},
			{"UnknownTool", map[string]any{"tool": "example.kitchen:nope", "runContext": map[string]any{"companyId": company}}, 404, `Tool \"example.kitchen:nope\" not found`},
			{"UnknownPlugin", map[string]any{"tool": "example.none:echo", "runContext": map[string]any{"companyId": company}}, 404, "not found"},
			{"NoCompany", map[string]any{"tool": "example.kitchen:echo", "parameters": map[string]any{"text": "x"}}, 400, "runContext.companyId"},
			{"BadCompanyID", map[string]any{"tool": "example.kitchen:echo", "runContext": map[string]any{"companyId": "nope"}}, 400, "must be a UUID"},
			{"AgentOfAnotherCompany", map[string]any{"tool": "example.kitchen:whoami", "runContext": map[string]any{"companyId": other, "agentId": agent.ID}}, 403, "does not belong"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				res := h.Do("POST", "/api/plugins/tools/execute", tc.body)
				require.Equal(t, tc.status, res.Status, "%s", res.Body)
				require.Contains(t, string(res.Body), tc.want)
			})
		}
	})

	t.Run("ToolsAsAgent", func(t *testing.T) {
		res := h.Do("GET", "/api/plugins/tools", nil, agent.As("")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = h.Do("POST", "/api/plugins/tools/execute", map[string]any{"tool": "example.kitchen:whoami"}, agent.As("")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var out struct {
			Result struct {
				Data map[string]any `json:"data"`
			} `json:"result"`
		}
		res.JSON(t, &out)
		require.Equal(t, "agent", out.Result.Data["actorType"], "executed with the caller's actor")
		require.Equal(t, agent.ID, out.Result.Data["agentId"])
		require.Equal(t, company, out.Result.Data["companyId"], "an agent's company is its own")

		res = h.Do("POST", "/api/plugins/tools/execute", map[string]any{"tool": "example.kitchen:whoami", "runContext": map[string]any{"companyId": other}}, agent.As("")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	})

	t.Run("Webhooks", func(t *testing.T) {
		// History older than the retention goes when new history is written.
		_, err := h.Kernel.Pool.Exec(t.Context(), `INSERT INTO kernel.plugin_webhook_deliveries (id, extension_key, endpoint_key, status, created_at)
			VALUES ('00000000-0000-7000-8000-000000000001', 'example.kitchen', 'inbound', 'success', now() - interval '40 days')`)
		require.NoError(t, err)
		raw := `{"event":"push", "spaces kept":  true}`
		res := h.Do("POST", "/api/plugins/"+plugin.ID+"/webhooks/inbound", raw, "X-Signature", "sha256=abc")
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		ok := res.Map(t)
		require.Equal(t, "success", ok["status"])
		require.NotEmpty(t, ok["deliveryId"])

		res = h.Do("POST", "/api/plugins/"+plugin.ID+"/data/last-webhook", map[string]any{"companyId": company})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		data := res.Map(t)["data"].(map[string]any)
		require.Equal(t, raw, data["body"], "the raw body reaches the plugin byte for byte")
		require.Equal(t, "sha256=abc", data["signature"], "headers reach the plugin")

		res = h.Do("POST", "/api/plugins/example.kitchen/webhooks/broken", "not json at all", "Content-Type", "text/plain")
		require.Equal(t, http.StatusBadGateway, res.Status, "%s", res.Body)
		failed := res.Map(t)
		require.Equal(t, "failed", failed["status"])
		require.Contains(t, failed["error"], "always fails")

		res = h.Do("POST", "/api/plugins/example.kitchen/webhooks/undeclared", "{}")
		require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
		res = h.Do("POST", "/api/plugins/example.nothing/webhooks/inbound", "{}")
		require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
		require.Contains(t, string(res.Body), "Plugin not found")

		res = h.Do("GET", "/api/plugins/"+plugin.ID+"/dashboard", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var dash struct {
			Deliveries []struct {
				WebhookKey string  `json:"webhookKey"`
				Status     string  `json:"status"`
				DurationMs *int    `json:"durationMs"`
				Error      *string `json:"error"`
			} `json:"recentWebhookDeliveries"`
		}
		res.JSON(t, &dash)
		require.GreaterOrEqual(t, len(dash.Deliveries), 2)
		require.Equal(t, "broken", dash.Deliveries[0].WebhookKey)
		require.Equal(t, "failed", dash.Deliveries[0].Status)
		require.NotNil(t, dash.Deliveries[0].DurationMs)
		require.NotNil(t, dash.Deliveries[0].Error)
		require.Equal(t, "inbound", dash.Deliveries[1].WebhookKey)
		require.Equal(t, "success", dash.Deliveries[1].Status)
		require.Len(t, dash.Deliveries, 2, "the 40-day-old delivery was deleted")
	})

	t.Run("Jobs", func(t *testing.T) {
		res := h.Do("GET", "/api/plugins/example.kitchen/jobs", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var jobs []map[string]any
		res.JSON(t, &jobs)
		require.Len(t, jobs, 2)
		require.Equal(t, "tick", jobs[0]["jobKey"])
		require.Equal(t, "every 1h", jobs[0]["schedule"])
		require.Nil(t, jobs[1]["schedule"], "an on-demand job has no schedule")

		for _, job := range []string{"tick", "fail"} {
			res = h.Do("POST", "/api/plugins/example.kitchen/jobs/"+job+"/trigger", nil)
			require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
			require.NotEmpty(t, res.Map(t)["runId"])
		}
		var runs []map[string]any
		sdktest.WaitFor(t, 30*time.Second, func() bool {
			h.Do("GET", "/api/plugins/example.kitchen/jobs/tick/runs", nil).JSON(t, &runs)
			return len(runs) > 0 && runs[0]["status"] == "succeeded"
		}, "the triggered tick run to succeed")
		require.Equal(t, "manual", runs[0]["trigger"])
		require.NotNil(t, runs[0]["durationMs"])
		sdktest.WaitFor(t, 30*time.Second, func() bool {
			h.Do("GET", "/api/plugins/example.kitchen/jobs/fail/runs?limit=5", nil).JSON(t, &runs)
			return len(runs) > 0 && runs[0]["status"] == "failed"
		}, "the triggered fail run to fail")
		require.Contains(t, runs[0]["error"], "always fails")

		res = h.Do("GET", "/api/plugins/example.kitchen/jobs", nil)
		res.JSON(t, &jobs)
		require.NotNil(t, jobs[0]["lastRunAt"], "the jobs list shows the last run")

		require.Equal(t, http.StatusNotFound, h.Do("GET", "/api/plugins/example.kitchen/jobs/nope/runs", nil).Status)
		require.Equal(t, http.StatusNotFound, h.Do("POST", "/api/plugins/example.kitchen/jobs/nope/trigger", nil).Status)
		require.Equal(t, http.StatusBadRequest, h.Do("GET", "/api/plugins/example.kitchen/jobs/tick/runs?limit=0", nil).Status)
		require.Equal(t, http.StatusNotFound, h.Do("GET", "/api/plugins/example.none/jobs", nil).Status)
	})

	t.Run("Logs", func(t *testing.T) {
		var lines []map[string]any
		sdktest.WaitFor(t, 30*time.Second, func() bool {
			res := h.Do("GET", "/api/plugins/example.kitchen/logs?limit=200", nil)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			res.JSON(t, &lines)
			for _, l := range lines {
				if l["message"] == "webhook received" {
					return true
				}
			}
			return false
		}, "the plugin's log line to be kept")
		res := h.Do("GET", "/api/plugins/example.kitchen/logs?level=error", nil)
		res.JSON(t, &lines)
		require.NotEmpty(t, lines)
		for _, l := range lines {
			require.Equal(t, "error", l["level"])
		}
		require.Equal(t, http.StatusBadRequest, h.Do("GET", "/api/plugins/example.kitchen/logs?level=loud", nil).Status)
		require.Equal(t, http.StatusNotFound, h.Do("GET", "/api/plugins/example.none/logs", nil).Status)
		require.Equal(t, http.StatusNotFound, h.Do("GET", "/api/plugins/example.none/dashboard", nil).Status)

		res = h.Do("GET", "/api/plugins/example.kitchen/dashboard", nil)
		var dash struct {
			Health       map[string]any   `json:"health"`
			Jobs         []map[string]any `json:"jobs"`
			RecentErrors []map[string]any `json:"recentErrors"`
		}
		res.JSON(t, &dash)
		require.Equal(t, true, dash.Health["healthy"])
		require.Len(t, dash.Jobs, 2)
		require.NotEmpty(t, dash.RecentErrors)
	})

	t.Run("UI", func(t *testing.T) {
		res := h.Do("GET", "/api/plugins/ui-contributions", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var ui []map[string]any
		res.JSON(t, &ui)
		require.Len(t, ui, 1)
		require.Equal(t, "example.kitchen", ui[0]["pluginKey"])
		require.Len(t, ui[0]["slots"], 1)
		require.Len(t, ui[0]["launchers"], 1)
		base := ui[0]["uiBaseUrl"].(string)

		res = h.Do("GET", base+"index.js", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Contains(t, res.Header.Get("Content-Type"), "javascript")
		require.Contains(t, string(res.Body), "export async function Sidebar")
		res = h.Do("GET", base+"assets/style.css", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Contains(t, res.Header.Get("Content-Type"), "text/css")

		for _, p := range []string{"..%2Fmanifest.json", "assets/..%2F..%2Fmanifest.json", "%2E%2E/manifest.json"} {
			res = h.Do("GET", base+p, nil)
			require.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", p, res.Body)
		}
		require.Equal(t, http.StatusNotFound, h.Do("GET", base+"missing.js", nil).Status)
		require.Equal(t, http.StatusNotFound, h.Do("GET", "/api/plugins/example.none/ui/index.js", nil).Status)
	})

	t.Run("DataActionsAndStream", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", h.URL+"/api/plugins/example.kitchen/bridge/stream/pings?companyId="+company, nil)
		require.NoError(t, err)
		stream, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer stream.Body.Close()
		require.Equal(t, http.StatusOK, stream.StatusCode)
		require.Equal(t, "text/event-stream", stream.Header.Get("Content-Type"))
		rd := bufio.NewReader(stream.Body)
		first, err := rd.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, ":ok\n", first, "the stream is open before the action")

		res := h.Do("POST", "/api/plugins/example.kitchen/actions/ping", map[string]any{"companyId": company})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.EqualValues(t, 1, res.Map(t)["data"].(map[string]any)["pong"])
		res = h.Do("POST", "/api/plugins/example.kitchen/bridge/action", map[string]any{"key": "ping", "companyId": company}, agent.As("")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

		var got []string
		for len(got) < 2 {
			line, err := rd.ReadString('\n')
			require.NoError(t, err)
			if strings.HasPrefix(line, "data: ") {
				got = append(got, strings.TrimSpace(strings.TrimPrefix(line, "data: ")))
			}
		}
		require.JSONEq(t, `{"n":1,"by":"board"}`, got[0])
		require.JSONEq(t, `{"n":2,"by":"agent"}`, got[1])

		for _, tc := range []struct {
			name, method, path string
			body               any
			headers            []string
			status             int
		}{
			{"UnknownKey", "POST", "/api/plugins/example.kitchen/data/nope", map[string]any{"companyId": company}, nil, 404},
			{"MissingKey", "POST", "/api/plugins/example.kitchen/bridge/data", map[string]any{"companyId": company}, nil, 400},
			{"UnknownPlugin", "POST", "/api/plugins/example.none/bridge/data", map[string]any{"key": "folder", "companyId": company}, nil, 404},
			{"AgentOtherCompany", "POST", "/api/plugins/example.kitchen/actions/ping", map[string]any{"companyId": other}, agent.As(""), 403},
			{"AgentNoCompany", "POST", "/api/plugins/example.kitchen/actions/ping", map[string]any{}, agent.As(""), 403},
			{"StreamNoCompany", "GET", "/api/plugins/example.kitchen/bridge/stream/pings", nil, nil, 400},
			{"StreamOtherCompany", "GET", "/api/plugins/example.kitchen/bridge/stream/pings?companyId=" + other, nil, agent.As(""), 403},
		} {
			t.Run(tc.name, func(t *testing.T) {
				res := h.Do(tc.method, tc.path, tc.body, tc.headers...)
				require.Equal(t, tc.status, res.Status, "%s", res.Body)
			})
		}
	})

	t.Run("LocalFolders", func(t *testing.T) {
		base := "/api/plugins/example.kitchen/companies/" + company + "/local-folders"
		res := h.Do("GET", base, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var list struct {
			Declarations []map[string]any `json:"declarations"`
			Folders      []map[string]any `json:"folders"`
		}
		res.JSON(t, &list)
		require.Len(t, list.Declarations, 1)
		require.Equal(t, false, list.Folders[0]["configured"])

		dir := t.TempDir()
		res = h.Do("POST", base+"/notes/validate", map[string]any{"path": dir})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		st := res.Map(t)
		require.Equal(t, false, st["healthy"])
		require.Equal(t, []any{"inbox"}, st["missingDirectories"])
		require.Equal(t, []any{"README.md"}, st["missingFiles"])
		require.Equal(t, true, st["writable"])

		require.NoError(t, os.Mkdir(filepath.Join(dir, "inbox"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("# Our notes\n"), 0o644))
		res = h.Do("PUT", base+"/notes", map[string]any{"path": dir})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, true, res.Map(t)["healthy"], "%s", res.Body)

		res = h.Do("GET", base+"/notes/status", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, dir, res.Map(t)["path"])

		res = h.Do("POST", "/api/plugins/tools/execute", map[string]any{"tool": "example.kitchen:read_readme", "runContext": map[string]any{"companyId": company}})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Contains(t, string(res.Body), "# Our notes", "the plugin reads through the path it was given")
		res = h.Do("POST", "/api/plugins/example.kitchen/data/folder", map[string]any{"companyId": company})
		require.Contains(t, string(res.Body), `"lastChanged":{"companyId":"`+company, "the running plugin was told at once")

		// A required entry that is a symlink out of the folder is reported, not followed.
		outside := t.TempDir()
		escape := t.TempDir()
		require.NoError(t, os.Mkdir(filepath.Join(escape, "inbox"), 0o755))
		require.NoError(t, os.Symlink(filepath.Join(outside), filepath.Join(escape, "README.md")))
		res = h.Do("POST", base+"/notes/validate", map[string]any{"path": escape})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Contains(t, string(res.Body), "symlink_escape")

		file := filepath.Join(dir, "README.md")
		for _, tc := range []struct {
			name, method, path string
			body               any
			status             int
			want               string
		}{
			{"Relative", "PUT", base + "/notes", map[string]any{"path": "notes"}, 400, "absolute"},
			{"DotDot", "PUT", base + "/notes", map[string]any{"path": dir + "/../x"}, 400, ".. segments"},
			{"Empty", "POST", base + "/notes/validate", map[string]any{}, 400, "is required"},
			{"NotADirectory", "POST", base + "/notes/validate", map[string]any{"path": file}, 200, "not_directory"},
			{"Missing", "POST", base + "/notes/validate", map[string]any{"path": dir + "/nope"}, 200, `"code":"missing"`},
			{"UndeclaredKey", "GET", base + "/other/status", nil, 404, "not declared"},
			{"UnknownPlugin", "GET", "/api/plugins/example.none/companies/" + company + "/local-folders", nil, 404, "Plugin not found"},
			{"UnknownCompany", "GET", "/api/plugins/example.kitchen/companies/nope/local-folders", nil, 404, "Company not found"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				res := h.Do(tc.method, tc.path, tc.body)
				require.Equal(t, tc.status, res.Status, "%s", res.Body)
				require.Contains(t, string(res.Body), tc.want)
			})
		}
	})

	t.Run("StreamReachesEveryNode", func(t *testing.T) {
		// A second node on the same database: a UI client on it hears what the plugin emits
		// while serving a request on the first.
		h2 := sdktest.Start(t, sdktest.Options{ExtensionDirs: []string{kitchenDir(t)}, DatabaseURL: h.DatabaseURL})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", h2.URL+"/api/plugins/example.kitchen/bridge/stream/pings?companyId="+company, nil)
		require.NoError(t, err)
		stream, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer stream.Body.Close()
		rd := bufio.NewReader(stream.Body)
		first, err := rd.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, ":ok\n", first)
		res := h.Do("POST", "/api/plugins/example.kitchen/actions/ping", map[string]any{"companyId": company})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		for {
			line, err := rd.ReadString('\n')
			require.NoError(t, err)
			if strings.HasPrefix(line, "data: ") {
				require.Contains(t, line, `"by":"board"`)
				break
			}
		}
	})

	// Last: disabling hides the plugin's tools and UI (the lifecycle routes flip the same flag).
	t.Run("DisabledPluginHidden", func(t *testing.T) {
		_, err := h.Kernel.Pool.Exec(t.Context(), `UPDATE kernel.extensions SET enabled = false WHERE key = 'example.kitchen'`)
		require.NoError(t, err)
		var tools, ui []any
		h.Do("GET", "/api/plugins/tools", nil).JSON(t, &tools)
		require.Empty(t, tools)
		h.Do("GET", "/api/plugins/ui-contributions", nil).JSON(t, &ui)
		require.Empty(t, ui)
		res := h.Do("POST", "/api/plugins/tools/execute", map[string]any{"tool": "example.kitchen:echo", "parameters": map[string]any{"text": "x"}, "runContext": map[string]any{"companyId": company}})
		require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
		res = h.Do("POST", "/api/plugins/example.kitchen/webhooks/inbound", "{}")
		require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
		require.Contains(t, string(res.Body), "Plugin is not ready")
	})
}
