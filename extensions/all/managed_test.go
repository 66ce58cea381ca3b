package all_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host/wasmrt/wasmrttest"
	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// managedDecl is the wiki's managed resources in small: a project, a paused agent with no
// budget, a routine of theirs paused with its schedule off, and a skill.
var managedDecl = map[string]any{
	"projects": []any{map[string]any{"key": "llm-wiki", "name": "LLM Wiki", "color": "#2563eb"}},
	"agents": []any{map[string]any{"key": "wiki-maintainer", "name": "Wiki Maintainer", "title": "LLM Wiki Maintainer",
		"icon": "book-open", "adapterPreference": []string{"nope_local", "process"}, "adapterConfig": map[string]any{"command": "true"}}},
	"routines": []any{map[string]any{"key": "nightly-wiki-lint", "title": "Run LLM Wiki lint", "agentKey": "wiki-maintainer",
		"projectKey": "llm-wiki", "schedule": map[string]any{"cron": "0 3 * * *"}}},
	"skills": []any{map[string]any{"key": "wiki-ingest", "name": "Wiki ingest"}},
}

// managedPackage publishes the wasm counter as a plugin that declares managed resources.
func managedPackage(t *testing.T, dir, version string) {
	t.Helper()
	module := wasmrttest.BuildModule(t, "../../examples/wasm-counter")
	b, err := os.ReadFile(module)
	require.NoError(t, err)
	mb, err := os.ReadFile("../../examples/wasm-counter/manifest.json")
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(mb, &doc))
	doc["version"] = version
	doc["capabilities"] = []string{"activity", "storage", "managed"}
	doc["managed"] = managedDecl
	mb, err = json.Marshal(doc)
	require.NoError(t, err)
	tmp := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "counter.wasm"), b, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "manifest.json"), mb, 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(tmp, "skills", "wiki-ingest"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "skills", "wiki-ingest", "SKILL.md"), []byte("---\nname: Wiki ingest\n---\nIngest sources.\n"), 0o644))
	sdktest.Publish(t, dir, tmp)
}

// install installs a package from a local path.
func install(t *testing.T, h *sdktest.Host, path string) {
	t.Helper()
	res := h.Do("POST", "/api/plugins/install", map[string]any{"packageName": path, "isLocalPath": true})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
}

// managedList reads a plugin's managed resources in a company.
func managedList(t *testing.T, h *sdktest.Host, plugin, company string) *sdk.ManagedResourceList {
	t.Helper()
	res := h.Do("GET", "/api/plugins/"+plugin+"/companies/"+company+"/managed-resources", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var l sdk.ManagedResourceList
	res.JSON(t, &l)
	return &l
}

func resourceID(t *testing.T, l *sdk.ManagedResourceList, kind, key string) string {
	t.Helper()
	r := l.Find(kind, key)
	require.NotNil(t, r, "%s %s listed", kind, key)
	require.NotNil(t, r.ResourceID, "%s %s made: %+v", kind, key, r)
	return *r.ResourceID
}

// waitManaged waits until the agent, project and routine of a company are made.
func waitManaged(t *testing.T, h *sdktest.Host, plugin, company string) *sdk.ManagedResourceList {
	t.Helper()
	var l *sdk.ManagedResourceList
	sdktest.WaitFor(t, 60*time.Second, func() bool {
		l = managedList(t, h, plugin, company)
		r := l.Find(sdk.ManagedRoutineKind, "nightly-wiki-lint")
		if r != nil && r.ResourceID != nil {
			return true
		}
		b, _ := json.Marshal(l)
		t.Logf("managed resources: %s", b)
		return false
	}, "managed resources to be made in company "+company)
	return l
}

// managedAgents counts a company's live agents made for the plugin.
func managedAgents(t *testing.T, h *sdktest.Host, company string) int {
	t.Helper()
	res := h.Do("GET", "/api/companies/"+company+"/agents", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var agents []struct {
		Status   string         `json:"status"`
		Metadata map[string]any `json:"metadata"`
	}
	res.JSON(t, &agents)
	n := 0
	for _, a := range agents {
		if a.Metadata["managedBy"] != nil && a.Status != "terminated" {
			n++
		}
	}
	return n
}

// TestPluginManagedResources installs a plugin that declares an agent, a project, a
// routine and a skill: keel makes them in every company through their owners, keeps the
// board's edits across a disable and enable, recreates only what was deleted, puts one back
// on reset, makes them in a company created later, leaves them on an uninstall and removes
// them on a purge.
func TestPluginManagedResources(t *testing.T) {
	t.Parallel()
	pub := filepath.Join(t.TempDir(), "managed-package")
	managedPackage(t, pub, "0.1.0")
	h := sdktest.Start(t, sdktest.Options{Builtins: true})
	company := h.CreateCompany("Managed Co")
	const plugin = "example.wasm_counter"

	// Before the install the plugin is unknown.
	require.Equal(t, http.StatusNotFound, h.Do("GET", "/api/plugins/"+plugin+"/companies/"+company+"/managed-resources", nil).Status)
	install(t, h, pub)
	l := waitManaged(t, h, plugin, company)
	agentID := resourceID(t, l, sdk.ManagedAgentKind, "wiki-maintainer")
	projectID := resourceID(t, l, sdk.ManagedProjectKind, "llm-wiki")
	routineID := resourceID(t, l, sdk.ManagedRoutineKind, "nightly-wiki-lint")
	require.Equal(t, sdk.ManagedCreated, l.Find(sdk.ManagedAgentKind, "wiki-maintainer").Status)
	require.Equal(t, "paused", l.Find(sdk.ManagedAgentKind, "wiki-maintainer").OwnerStatus)
	require.Equal(t, sdk.ManagedCreated, l.Find(sdk.ManagedSkillKind, "wiki-ingest").Status)
	skillID := resourceID(t, l, sdk.ManagedSkillKind, "wiki-ingest")

	t.Run("MadeAsDeclared", func(t *testing.T) {
		ag := h.Do("GET", "/api/agents/"+agentID, nil).Map(t)
		require.Equal(t, "paused", ag["status"], "the managed agent is created paused")
		require.Equal(t, float64(0), ag["budgetMonthlyCents"])
		require.Equal(t, "process", ag["adapterType"], "the first preferred adapter the registry knows")
		require.Equal(t, "LLM Wiki Maintainer", ag["title"])
		pr := h.Do("GET", "/api/projects/"+projectID, nil).Map(t)
		require.Equal(t, "LLM Wiki", pr["name"])
		require.Equal(t, "in_progress", pr["status"])
		rt := h.Do("GET", "/api/routines/"+routineID, nil).Map(t)
		require.Equal(t, "paused", rt["status"])
		require.Equal(t, "low", rt["priority"])
		require.Equal(t, "skip_if_active", rt["concurrencyPolicy"])
		require.Equal(t, agentID, rt["assigneeAgentId"])
		require.Equal(t, projectID, rt["projectId"])
		triggers := rt["triggers"].([]any)
		require.Len(t, triggers, 1)
		tr := triggers[0].(map[string]any)
		require.Equal(t, "schedule", tr["kind"])
		require.Equal(t, false, tr["enabled"], "the schedule is off")
		require.Equal(t, "0 3 * * *", tr["cronExpression"])
		sk := h.Do("GET", "/api/companies/"+company+"/skills/"+skillID, nil).Map(t)
		require.Equal(t, "Wiki ingest", sk["name"])
		require.Equal(t, plugin, sk["managedBy"], "the skills owner knows which plugin manages it")
		require.Contains(t, sk["key"], "plugin/", "a managed skill's key is the plugin's own")
	})

	// The board renames the agent; a disable and an enable do not duplicate or undo it.
	res := h.Do("PATCH", "/api/agents/"+agentID, map[string]any{"name": "Board Named"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, http.StatusOK, h.Do("POST", "/api/plugins/"+plugin+"/disable", nil).Status)
	res = h.Do("POST", "/api/plugins/"+plugin+"/companies/"+company+"/managed-resources/reconcile", nil)
	require.Equal(t, http.StatusBadRequest, res.Status, "a disabled plugin makes nothing: %s", res.Body)
	require.Equal(t, http.StatusOK, h.Do("POST", "/api/plugins/"+plugin+"/enable", nil).Status)
	res = h.Do("POST", "/api/plugins/"+plugin+"/companies/"+company+"/managed-resources/reconcile", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var l2 sdk.ManagedResourceList
	res.JSON(t, &l2)
	require.Equal(t, agentID, resourceID(t, &l2, sdk.ManagedAgentKind, "wiki-maintainer"), "same agent")
	require.Equal(t, sdk.ManagedResolved, l2.Find(sdk.ManagedAgentKind, "wiki-maintainer").Status)
	require.Equal(t, "Board Named", l2.Find(sdk.ManagedAgentKind, "wiki-maintainer").Name, "the board's edit is kept")
	require.Equal(t, 1, managedAgents(t, h, company), "no duplicate agent")

	t.Run("DeletedIsRecreated", func(t *testing.T) {
		require.Equal(t, http.StatusOK, h.Do("DELETE", "/api/projects/"+projectID, nil).Status)
		res := h.Do("POST", "/api/plugins/"+plugin+"/companies/"+company+"/managed-resources/reconcile", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var l sdk.ManagedResourceList
		res.JSON(t, &l)
		p := l.Find(sdk.ManagedProjectKind, "llm-wiki")
		require.Equal(t, sdk.ManagedRecreated, p.Status)
		require.NotEqual(t, projectID, *p.ResourceID)
		require.Equal(t, sdk.ManagedResolved, l.Find(sdk.ManagedRoutineKind, "nightly-wiki-lint").Status, "the routine is kept")
		projectID = *p.ResourceID
	})

	t.Run("Reset", func(t *testing.T) {
		res := h.Do("PATCH", "/api/routines/"+routineID, map[string]any{"title": "Board title", "priority": "high"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = h.Do("POST", "/api/plugins/"+plugin+"/companies/"+company+"/managed-resources/routine/nightly-wiki-lint/reset", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		rt := h.Do("GET", "/api/routines/"+routineID, nil).Map(t)
		require.Equal(t, "Run LLM Wiki lint", rt["title"], "the declared title is back on the same routine")
		require.Equal(t, "low", rt["priority"])
		require.Equal(t, projectID, rt["projectId"], "it names the project made again")

		res = h.Do("POST", "/api/plugins/"+plugin+"/companies/"+company+"/managed-resources/agent/wiki-maintainer/reset", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var l sdk.ManagedResourceList
		res.JSON(t, &l)
		a := l.Find(sdk.ManagedAgentKind, "wiki-maintainer")
		require.Equal(t, sdk.ManagedReset, a.Status)
		require.Equal(t, agentID, *a.ResourceID, "reset keeps the same agent")
		require.Equal(t, "Wiki Maintainer", h.Do("GET", "/api/agents/"+agentID, nil).Map(t)["name"], "the declared name is back")

		for _, tc := range []struct {
			name, path string
			status     int
		}{
			{"UndeclaredKey", "/managed-resources/agent/nobody/reset", http.StatusNotFound},
			{"UnknownKind", "/managed-resources/robot/wiki-maintainer/reset", http.StatusNotFound},
		} {
			t.Run(tc.name, func(t *testing.T) {
				res := h.Do("POST", "/api/plugins/"+plugin+"/companies/"+company+tc.path, nil)
				require.Equal(t, tc.status, res.Status, "%s", res.Body)
			})
		}
	})

	t.Run("PluginCalls", func(t *testing.T) {
		// The plugin reaches its own resources through the reserved calls (the wiki asks
		// for its maintainer's id this way).
		in, err := json.Marshal(sdk.ManagedRequest{CompanyID: company})
		require.NoError(t, err)
		out, err := h.Supervisor.Invoke(t.Context(), plugin, &hostv1.InvokeRequest{Method: sdk.ManagedListMethod, InputJson: in})
		require.NoError(t, err)
		require.Nil(t, out.Error)
		var got sdk.ManagedResourceList
		require.NoError(t, json.Unmarshal(out.OutputJson, &got))
		require.Equal(t, agentID, resourceID(t, &got, sdk.ManagedAgentKind, "wiki-maintainer"))
		out, err = h.Supervisor.Invoke(t.Context(), "example.none", &hostv1.InvokeRequest{Method: sdk.ManagedReconcileMethod, InputJson: in})
		require.NoError(t, err)
		require.NotNil(t, out.Error, "an extension without declarations has no managed resources")
		require.Equal(t, int32(http.StatusBadRequest), out.Error.Status)
	})

	t.Run("Errors", func(t *testing.T) {
		for _, tc := range []struct {
			name, method, path string
			status             int
		}{
			{"UnknownPlugin", "GET", "/api/plugins/example.none/companies/" + company + "/managed-resources", http.StatusNotFound},
			{"BadCompany", "GET", "/api/plugins/" + plugin + "/companies/nope/managed-resources", http.StatusNotFound},
			{"UnknownCompany", "POST", "/api/plugins/" + plugin + "/companies/00000000-0000-4000-8000-000000000000/managed-resources/reconcile", http.StatusNotFound},
		} {
			t.Run(tc.name, func(t *testing.T) {
				res := h.Do(tc.method, tc.path, nil)
				require.Equal(t, tc.status, res.Status, "%s", res.Body)
			})
		}
	})

	// A company created later gets them too.
	later := h.CreateCompany("Later Co")
	waitManaged(t, h, plugin, later)
	require.Equal(t, 1, managedAgents(t, h, later))

	// An upgrade keeps them: same resources, no duplicates.
	managedPackage(t, pub, "0.2.0")
	res = h.Do("POST", "/api/plugins/"+plugin+"/upgrade", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, "0.2.0", res.Map(t)["version"])
	res = h.Do("POST", "/api/plugins/"+plugin+"/companies/"+company+"/managed-resources/reconcile", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var l3 sdk.ManagedResourceList
	res.JSON(t, &l3)
	require.Equal(t, agentID, resourceID(t, &l3, sdk.ManagedAgentKind, "wiki-maintainer"))
	require.Equal(t, routineID, resourceID(t, &l3, sdk.ManagedRoutineKind, "nightly-wiki-lint"))
	require.Equal(t, 1, managedAgents(t, h, company), "an upgrade does not duplicate")

	// Uninstall without purge leaves them; a reinstall binds the same ones again.
	require.Equal(t, http.StatusOK, h.Do("DELETE", "/api/plugins/"+plugin, nil).Status)
	require.Equal(t, "paused", h.Do("GET", "/api/agents/"+agentID, nil).Map(t)["status"], "kept after an uninstall")
	install(t, h, pub)
	l = waitManaged(t, h, plugin, company)
	require.Equal(t, agentID, resourceID(t, l, sdk.ManagedAgentKind, "wiki-maintainer"))
	require.Equal(t, 1, managedAgents(t, h, company), "a reinstall does not duplicate")

	// Uninstall with purge removes them.
	res = h.Do("DELETE", "/api/plugins/"+plugin+"?purge=true", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, "terminated", h.Do("GET", "/api/agents/"+agentID, nil).Map(t)["status"])
	require.Equal(t, http.StatusNotFound, h.Do("GET", "/api/projects/"+projectID, nil).Status)
	require.Equal(t, "archived", h.Do("GET", "/api/routines/"+routineID, nil).Map(t)["status"])
	require.Equal(t, http.StatusNotFound, h.Do("GET", "/api/companies/"+company+"/skills/"+skillID, nil).Status, "the managed skill is deleted")
	require.Equal(t, 0, managedAgents(t, h, later))
	var rows int
	require.NoError(t, h.Kernel.Pool.QueryRow(t.Context(), `SELECT count(*) FROM kernel.plugin_managed_resources WHERE extension_key = $1`, plugin).Scan(&rows))
	require.Zero(t, rows)
}
