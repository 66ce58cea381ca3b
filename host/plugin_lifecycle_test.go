package host_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/host/wasmrt/wasmrttest"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdktest"
)

const notesDir = "../examples/process-notes"

// notesVersions builds the notes example three times, once: as written (0.1.0), as 0.2.0,
// and as an 0.2.1 whose health check fails.
var (
	notesOnce                     sync.Once
	notesV1, notesV2, notesV2Sick string
)

func notesBuilds(t *testing.T) (v1, v2, sick string) {
	t.Helper()
	notesOnce.Do(func() {
		var wg sync.WaitGroup
		wg.Add(3)
		go func() { defer wg.Done(); notesV1 = sdktest.BuildProcessExtension(t, notesDir) }()
		go func() { defer wg.Done(); notesV2 = sdktest.BuildProcessExtensionVersion(t, notesDir, "0.2.0", nil) }()
		go func() {
			defer wg.Done()
			notesV2Sick = sdktest.BuildProcessExtensionVersion(t, notesDir, "0.2.1", map[string][2]string{
				"main.go": {"return n.db.PingContext(ctx)", `return errors.New("version 0.2.1 is unhealthy")`},
			})
		}()
		wg.Wait()
	})
	require.NotEmpty(t, notesV1)
	require.NotEmpty(t, notesV2)
	require.NotEmpty(t, notesV2Sick)
	return notesV1, notesV2, notesV2Sick
}

// record decodes a plugin record answer.
func record(t *testing.T, res *sdktest.Response, status int) *kernel.ExtensionRecord {
	t.Helper()
	require.Equal(t, status, res.Status, "%s", res.Body)
	var r kernel.ExtensionRecord
	res.JSON(t, &r)
	return &r
}

// lifecycleActions lists the instance-level lifecycle entries of an extension, oldest first.
func lifecycleActions(t *testing.T, h *sdktest.Host, key string) []string {
	t.Helper()
	rows, err := h.Kernel.Pool.Query(t.Context(), `SELECT action FROM kernel.activity_log WHERE entity_id = $1 AND action LIKE 'plugin.%' ORDER BY created_at, id`, key)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var a string
		require.NoError(t, rows.Scan(&a))
		out = append(out, a)
	}
	return out
}

// notesServedOK accepts the answers of the notes routes while keel upgrades them.
func notesServedOK(status int, _ []byte) bool { return status == http.StatusOK }

func schemaExists(t *testing.T, h *sdktest.Host, schema string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, h.Kernel.Pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&ok))
	return ok
}

// TestPluginLifecycle drives a process plugin through every lifecycle route of a real host:
// install from a local path, config (schema, the plugin's own validator, delivery without a
// restart), disable and enable, an upgrade and a failed upgrade under steady load with zero
// failed requests, uninstall keeping data, reinstall, and uninstall with purge.
func TestPluginLifecycle(t *testing.T) {
	t.Parallel()
	v1, v2, sick := notesBuilds(t)
	pub := filepath.Join(t.TempDir(), "notes-package")
	sdktest.Publish(t, pub, v1)
	h := sdktest.Start(t, sdktest.Options{})
	company := h.CreateCompany("Lifecycle Co")
	notes := "/api/companies/" + company + "/notes"

	var installed *kernel.ExtensionRecord
	t.Run("Install", func(t *testing.T) {
		require.Equal(t, http.StatusNotFound, h.Do("GET", notes, nil).Status, "no route before the install")
		installed = record(t, h.Do("POST", "/api/plugins/install", map[string]any{"packageName": pub, "isLocalPath": true}), http.StatusOK)
		require.Equal(t, "example.notes", installed.PluginKey)
		require.Equal(t, "ready", installed.Status)
		require.Equal(t, "0.1.0", installed.Version)
		require.Equal(t, "path", installed.Source)
		require.Len(t, installed.PackageDigest, 64)
		require.ElementsMatch(t, []string{"activity", "companies", "database", "jobs"}, installed.GrantedCapabilities)
		require.Nil(t, installed.LastError)
		require.Equal(t, http.StatusCreated, h.Do("POST", notes, map[string]any{"text": "first"}).Status)
		require.Equal(t, http.StatusOK, h.Do("GET", notes, nil).Status)
		res := h.Do("GET", "/api/plugins/"+installed.ID, nil)
		require.Equal(t, "example.notes", record(t, res, http.StatusOK).PluginKey, "read by id")
		res = h.Do("GET", "/api/plugins", nil)
		require.Contains(t, string(res.Body), `"example.notes"`)
	})

	t.Run("InstallErrors", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "file")
		require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
		missing := filepath.Join(t.TempDir(), "missing")
		for _, tc := range []struct {
			name   string
			body   any
			status int
			text   string
		}{
			{"AlreadyInstalled", map[string]any{"packageName": pub, "isLocalPath": true}, http.StatusConflict, "Plugin already installed"},
			{"MissingName", map[string]any{"isLocalPath": true}, http.StatusBadRequest, "Validation error"},
			{"InvalidNpmName", map[string]any{"packageName": "bad<name>"}, http.StatusBadRequest, "packageName contains invalid characters"},
			{"PathMissing", map[string]any{"packageName": missing, "isLocalPath": true}, http.StatusBadRequest, "Invalid localPath: path does not exist: " + missing},
			{"PathNotDir", map[string]any{"packageName": file, "isLocalPath": true}, http.StatusBadRequest, "Invalid localPath: path is not a directory: " + file},
			{"NullByte", map[string]any{"packageName": "a\x00b", "isLocalPath": true}, http.StatusBadRequest, "Validation error"}, // the body decoder refuses NUL first
			{"NotAPackage", map[string]any{"packageName": t.TempDir(), "isLocalPath": true}, http.StatusBadRequest, "not a keel package"},
			{"WrongType", map[string]any{"packageName": 7}, http.StatusBadRequest, "Validation error"},
		} {
			res := h.Do("POST", "/api/plugins/install", tc.body)
			require.Equal(t, tc.status, res.Status, "%s: %s", tc.name, res.Body)
			require.Contains(t, res.Map(t)["error"], tc.text, tc.name)
		}
	})

	t.Run("UnknownPlugin", func(t *testing.T) {
		for _, r := range [][2]string{{"GET", ""}, {"DELETE", ""}, {"POST", "/enable"}, {"POST", "/disable"}, {"POST", "/upgrade"},
			{"GET", "/config"}, {"POST", "/config"}, {"POST", "/config/test"}} {
			res := h.Do(r[0], "/api/plugins/nope.nothing"+r[1], map[string]any{"configJson": map[string]any{}})
			require.Equal(t, http.StatusNotFound, res.Status, "%s %s: %s", r[0], r[1], res.Body)
			require.Equal(t, "Plugin not found", res.Map(t)["error"])
		}
	})

	t.Run("Config", func(t *testing.T) {
		pid := h.Supervisor.PID("example.notes")
		res := h.Do("GET", "/api/plugins/example.notes/config", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		body := res.Map(t)
		require.Equal(t, map[string]any{}, body["configJson"])
		require.NotNil(t, body["configSchema"])

		res = h.Do("POST", "/api/plugins/example.notes/config", map[string]any{"configJson": map[string]any{"maxNotesPerCompany": "many", "bogus": 1}})
		require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
		body = res.Map(t)
		require.Equal(t, "Configuration does not match the plugin's config schema", body["error"])
		require.Equal(t, "invalid_config", body["code"])
		require.Contains(t, string(res.Body), `"/maxNotesPerCompany"`)
		res = h.Do("POST", "/api/plugins/example.notes/config", map[string]any{"configJson": "x"})
		require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
		res = h.Do("POST", "/api/plugins/example.notes/config", map[string]any{})
		require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)

		test := func(cfg map[string]any) map[string]any {
			res := h.Do("POST", "/api/plugins/example.notes/config/test", map[string]any{"configJson": cfg})
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			return res.Map(t)
		}
		got := test(map[string]any{"maxNotesPerCompany": 2_000_000})
		require.Equal(t, false, got["valid"])
		require.Equal(t, true, got["supported"])
		require.Contains(t, got["message"], "not supported")
		got = test(map[string]any{"maxNotesPerCompany": 20_000})
		require.Equal(t, true, got["valid"])
		require.Contains(t, got["message"], "Warnings: maxNotesPerCompany above 10000")
		got = test(map[string]any{"maxNotesPerCompany": 5})
		require.Equal(t, map[string]any{"valid": true, "supported": true}, got)
		res = h.Do("POST", "/api/plugins/example.notes/config/test", map[string]any{"configJson": map[string]any{"maxNotesPerCompany": 0}})
		require.Equal(t, http.StatusBadRequest, res.Status, "the schema applies to tests too: %s", res.Body)
		require.Equal(t, map[string]any{}, h.Do("GET", "/api/plugins/example.notes/config", nil).Map(t)["configJson"], "a test does not save")

		// Saved and delivered without a restart: the limit applies to the next note.
		res = h.Do("POST", "/api/plugins/example.notes/config", map[string]any{"configJson": map[string]any{"maxNotesPerCompany": 1}})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, map[string]any{"maxNotesPerCompany": float64(1)}, res.Map(t)["configJson"])
		res = h.Do("POST", notes, map[string]any{"text": "second"})
		require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
		require.Equal(t, pid, h.Supervisor.PID("example.notes"), "no restart")
		require.Equal(t, http.StatusOK, h.Do("POST", "/api/plugins/example.notes/config", map[string]any{"configJson": map[string]any{}}).Status)
		require.Equal(t, http.StatusCreated, h.Do("POST", notes, map[string]any{"text": "second"}).Status)
	})

	t.Run("DisableEnable", func(t *testing.T) {
		r := record(t, h.Do("POST", "/api/plugins/example.notes/disable", nil), http.StatusOK)
		require.Equal(t, "disabled", r.Status)
		require.False(t, r.Enabled)
		require.Zero(t, h.Supervisor.PID("example.notes"), "stopped")
		res := h.Do("GET", notes, nil)
		require.Equal(t, http.StatusServiceUnavailable, res.Status, "%s", res.Body)
		require.Equal(t, "extension_disabled", res.Map(t)["code"])
		require.Empty(t, res.Header.Get("Retry-After"), "a refusal by design, not a retry")
		res = h.Do("POST", "/api/plugins/example.notes/disable", nil)
		require.Equal(t, http.StatusBadRequest, res.Status)
		require.Equal(t, "Invalid lifecycle transition: disabled → disabled (disable is allowed from ready, upgrade_pending or error)", res.Map(t)["error"])
		require.Equal(t, map[string]any{}, h.Do("GET", "/api/plugins/example.notes/config", nil).Map(t)["configJson"], "config kept")

		r = record(t, h.Do("POST", "/api/plugins/example.notes/enable", nil), http.StatusOK)
		require.Equal(t, "ready", r.Status)
		require.True(t, r.Enabled)
		require.Equal(t, http.StatusOK, h.Do("GET", notes, nil).Status)
		res = h.Do("POST", "/api/plugins/example.notes/enable", nil)
		require.Equal(t, http.StatusBadRequest, res.Status)
		require.Equal(t, "Invalid lifecycle transition: ready → ready (enable is allowed from disabled or error)", res.Map(t)["error"])
	})

	t.Run("DisableEnableUnderLoad", func(t *testing.T) {
		// Requests to a disabled plugin are refused by design (503 extension_disabled); every
		// other answer is a 200.
		load := sdktest.StartLoad(h.URL, []string{notes}, 4, func(status int, body []byte) bool {
			return status == http.StatusOK || (status == http.StatusServiceUnavailable && strings.Contains(string(body), "extension_disabled"))
		})
		waitServed(t, load, 20)
		require.Equal(t, http.StatusOK, h.Do("POST", "/api/plugins/example.notes/disable", nil).Status)
		require.Equal(t, http.StatusOK, h.Do("POST", "/api/plugins/example.notes/enable", nil).Status)
		waitServed(t, load, load.Served()+20)
		got := load.Stop()
		require.Zero(t, got.Failed, "failures: %v", got.Failures)
		t.Logf("disable and enable under load: %d served, statuses %v, longest %s", got.Served, got.Statuses, got.Longest)
	})

	t.Run("UpgradeUnderLoad", func(t *testing.T) {
		oldPID := h.Supervisor.PID("example.notes")
		sdktest.Publish(t, pub, v2)
		load := sdktest.StartLoad(h.URL, []string{notes, notes + "/stats"}, 4, notesServedOK)
		waitServed(t, load, 20)
		r := record(t, h.Do("POST", "/api/plugins/example.notes/upgrade", nil), http.StatusOK)
		waitServed(t, load, load.Served()+20)
		got := load.Stop()
		require.Zero(t, got.Failed, "failures: %v", got.Failures)
		t.Logf("upgrade under load: %d served, longest %s", got.Served, got.Longest)
		require.Equal(t, "0.2.0", r.Version)
		require.Equal(t, "ready", r.Status)
		require.NotEqual(t, installed.PackageDigest, r.PackageDigest)
		require.Equal(t, installed.ID, r.ID, "same record")
		require.NotEqual(t, oldPID, h.Supervisor.PID("example.notes"), "the new version runs in a new process")
		res := h.Do("GET", notes, nil)
		require.Equal(t, http.StatusOK, res.Status)
		require.Contains(t, string(res.Body), "second", "data kept across the upgrade")

		// The same bytes again: nothing to do.
		r2 := record(t, h.Do("POST", "/api/plugins/example.notes/upgrade", nil), http.StatusOK)
		require.Equal(t, r.PackageDigest, r2.PackageDigest)
	})

	t.Run("FailedUpgradeKeepsOldServing", func(t *testing.T) {
		pid := h.Supervisor.PID("example.notes")
		sdktest.Publish(t, pub, sick)
		load := sdktest.StartLoad(h.URL, []string{notes}, 4, notesServedOK)
		waitServed(t, load, 20)
		res := h.Do("POST", "/api/plugins/example.notes/upgrade", nil)
		waitServed(t, load, load.Served()+20)
		got := load.Stop()
		require.Zero(t, got.Failed, "failures: %v", got.Failures)
		require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
		body := res.Map(t)
		require.Equal(t, "upgrade_failed", body["code"])
		require.Contains(t, body["error"], "Upgrade of example.notes to 0.2.1 failed; version 0.2.0 keeps serving")
		require.Contains(t, body["error"], "version 0.2.1 is unhealthy")
		r := record(t, h.Do("GET", "/api/plugins/example.notes", nil), http.StatusOK)
		require.Equal(t, "0.2.0", r.Version)
		require.Equal(t, "ready", r.Status)
		require.NotNil(t, r.LastError)
		require.Contains(t, *r.LastError, "unhealthy")
		require.Equal(t, pid, h.Supervisor.PID("example.notes"), "the old process kept serving")
		sdktest.Publish(t, pub, v2)
	})

	t.Run("UninstallKeepsData", func(t *testing.T) {
		r := record(t, h.Do("DELETE", "/api/plugins/example.notes", nil), http.StatusOK)
		require.Equal(t, "uninstalled", r.Status)
		require.Equal(t, http.StatusNotFound, h.Do("GET", "/api/plugins/example.notes", nil).Status)
		require.NotContains(t, string(h.Do("GET", "/api/plugins", nil).Body), `"example.notes"`)
		require.Equal(t, http.StatusNotFound, h.Do("GET", notes, nil).Status, "routes removed")
		require.Equal(t, http.StatusNotFound, h.Do("DELETE", "/api/plugins/example.notes", nil).Status)
		require.True(t, schemaExists(t, h, "ext_example_notes"), "data kept")

		again := record(t, h.Do("POST", "/api/plugins/install", map[string]any{"packageName": pub, "isLocalPath": true}), http.StatusOK)
		require.Equal(t, installed.ID, again.ID, "a reinstall reuses the record")
		require.Equal(t, "ready", again.Status)
		res := h.Do("GET", notes, nil)
		require.Equal(t, http.StatusOK, res.Status)
		require.Contains(t, string(res.Body), "first", "the kept data is back")
	})

	t.Run("UninstallPurge", func(t *testing.T) {
		r := record(t, h.Do("DELETE", "/api/plugins/example.notes?purge=true", nil), http.StatusOK)
		require.Equal(t, "purged", r.Status)
		require.False(t, schemaExists(t, h, "ext_example_notes"), "schema dropped")
		var roles int
		require.NoError(t, h.Kernel.Pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_roles WHERE rolname = $1`, host.ExtensionRole("example.notes", h.Kernel.InstanceID())).Scan(&roles))
		require.Zero(t, roles, "role dropped")
		rec, err := h.Kernel.ExtensionGetAny(t.Context(), "example.notes")
		require.NoError(t, err)
		require.Nil(t, rec, "row and config gone")
		_, err = os.Stat(filepath.Join(h.Config().Home, "packages", r.PackageDigest))
		require.True(t, os.IsNotExist(err), "stored package removed")
		require.Equal(t, http.StatusNotFound, h.Do("DELETE", "/api/plugins/example.notes?purge=true", nil).Status)
	})

	t.Run("ActivityLog", func(t *testing.T) {
		require.Equal(t, []string{
			"plugin.installed", "plugin.config.updated", "plugin.config.updated",
			"plugin.disabled", "plugin.enabled", "plugin.disabled", "plugin.enabled",
			"plugin.upgraded", "plugin.upgrade_failed",
			"plugin.uninstalled", "plugin.installed", "plugin.uninstalled",
		}, lifecycleActions(t, h, "example.notes"))
	})

	t.Run("BuiltinAndPathRefusals", func(t *testing.T) {
		ctx := context.Background()
		_, err := h.Kernel.ExtensionUpsert(ctx, &kernel.ExtensionUpsertParams{Key: "fake.builtin", Version: "1.0.0", Kind: "plugin", Runtime: "process", Source: "builtin", Manifest: json.RawMessage(`{}`)})
		require.NoError(t, err)
		res := h.Do("DELETE", "/api/plugins/fake.builtin?purge=true", nil)
		require.Equal(t, http.StatusBadRequest, res.Status)
		require.Equal(t, "fake.builtin is built into keel and cannot be uninstalled; disable it instead", res.Map(t)["error"])
		res = h.Do("POST", "/api/plugins/fake.builtin/upgrade", nil)
		require.Equal(t, http.StatusBadRequest, res.Status)
		require.Equal(t, "fake.builtin is built into keel and is upgraded with keel itself", res.Map(t)["error"])
		_, err = h.Kernel.ExtensionUpsert(ctx, &kernel.ExtensionUpsertParams{Key: "fake.onpath", Version: "1.0.0", Kind: "plugin", Runtime: "process", Source: "path", Path: "/x", Manifest: json.RawMessage(`{}`)})
		require.NoError(t, err)
		res = h.Do("POST", "/api/plugins/fake.onpath/upgrade", nil)
		require.Equal(t, http.StatusBadRequest, res.Status)
		require.Equal(t, "not_installed_through_api", res.Map(t)["code"])
	})
}

// waitServed waits until the load has served n requests.
func waitServed(t *testing.T, l *sdktest.Load, n int64) {
	t.Helper()
	sdktest.WaitFor(t, time.Minute, func() bool { return l.Served() >= n }, "the load to be served")
}

// wasmCounterPackage writes the wasm counter example as a package with the given version
// and capabilities.
func wasmCounterPackage(t *testing.T, dir, version string, capabilities []string) {
	t.Helper()
	module := wasmrttest.BuildModule(t, "../examples/wasm-counter")
	b, err := os.ReadFile(module)
	require.NoError(t, err)
	mb, err := os.ReadFile("../examples/wasm-counter/manifest.json")
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(mb, &doc))
	doc["version"] = version
	doc["capabilities"] = capabilities
	mb, err = json.Marshal(doc)
	require.NoError(t, err)
	tmp := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "counter.wasm"), b, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "manifest.json"), mb, 0o644))
	sdktest.Publish(t, dir, tmp)
}

// TestPluginUpgradeNeedsApproval upgrades a wasm plugin to a version that asks for one more
// capability: it waits in upgrade_pending while the old version serves, and POST upgrade
// again approves it.
func TestPluginUpgradeNeedsApproval(t *testing.T) {
	t.Parallel()
	pub := filepath.Join(t.TempDir(), "counter-package")
	wasmCounterPackage(t, pub, "0.1.0", []string{"activity", "storage"})
	h := sdktest.Start(t, sdktest.Options{})
	company := h.CreateCompany("Approval Co")
	counter := "/api/companies/" + company + "/wasm-counter"

	r := record(t, h.Do("POST", "/api/plugins/install", map[string]any{"packageName": pub, "isLocalPath": true}), http.StatusOK)
	require.Equal(t, "ready", r.Status)
	require.Equal(t, "wasm", r.Runtime)
	require.Equal(t, http.StatusOK, h.Do("POST", counter+"/increment", nil).Status)

	wasmCounterPackage(t, pub, "0.2.0", []string{"activity", "storage", "companies"})
	r = record(t, h.Do("POST", "/api/plugins/example.wasm_counter/upgrade", nil), http.StatusOK)
	require.Equal(t, "upgrade_pending", r.Status)
	require.Equal(t, "0.1.0", r.Version, "the old version keeps serving")
	require.NotNil(t, r.PendingUpgrade)
	require.Equal(t, "0.2.0", r.PendingUpgrade.Version)
	require.Equal(t, []string{"companies"}, r.PendingUpgrade.NewCapabilities)
	require.ElementsMatch(t, []string{"activity", "storage"}, r.GrantedCapabilities)
	res := h.Do("GET", counter, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, float64(1), res.Map(t)["count"])

	load := sdktest.StartLoad(h.URL, []string{counter}, 4, notesServedOK)
	waitServed(t, load, 20)
	r = record(t, h.Do("POST", "/api/plugins/example.wasm_counter/upgrade", nil), http.StatusOK)
	waitServed(t, load, load.Served()+20)
	got := load.Stop()
	require.Zero(t, got.Failed, "failures: %v", got.Failures)
	require.Equal(t, "ready", r.Status)
	require.Equal(t, "0.2.0", r.Version)
	require.Nil(t, r.PendingUpgrade)
	require.ElementsMatch(t, []string{"activity", "storage", "companies"}, r.GrantedCapabilities)
	res = h.Do("GET", counter, nil)
	require.Equal(t, float64(1), res.Map(t)["count"], "state kept")
	require.Equal(t, []string{"plugin.installed", "plugin.upgrade_pending", "plugin.upgraded"}, lifecycleActions(t, h, "example.wasm_counter"))
}

// TestPluginTwoNodes installs through one node and uses the plugin through another on the
// same database; a disable and an uninstall follow too, and a restarted node loads the
// installed package at start.
func TestPluginTwoNodes(t *testing.T) {
	t.Parallel()
	pub := filepath.Join(t.TempDir(), "counter-package")
	wasmCounterPackage(t, pub, "0.1.0", []string{"activity", "storage"})
	// Each node has its own data dir and the default package manager: the package reaches
	// the others through the database alone. The periodic fallback is off (an hour): node b
	// follows on the registry's notices alone.
	configure := func(c *host.Config) {
		c.ReconcileInterval = time.Hour
	}
	a := sdktest.Start(t, sdktest.Options{Configure: configure})
	b := sdktest.Start(t, sdktest.Options{Configure: configure, DatabaseURL: a.DatabaseURL})
	company := a.CreateCompany("Two Nodes Co")
	counter := "/api/companies/" + company + "/wasm-counter"
	require.Equal(t, http.StatusNotFound, b.Do("GET", counter, nil).Status)

	record(t, a.Do("POST", "/api/plugins/install", map[string]any{"packageName": pub, "isLocalPath": true}), http.StatusOK)
	start := time.Now()
	require.NoError(t, os.RemoveAll(pub), "the source directory is not needed after the install")
	require.Equal(t, http.StatusOK, a.Do("POST", counter+"/increment", nil).Status)
	sdktest.WaitFor(t, 30*time.Second, func() bool {
		res := b.Do("GET", counter, nil)
		return res.Status == http.StatusOK && strings.Contains(string(res.Body), `"count":1`)
	}, "node b to serve the plugin installed through node a")
	t.Logf("node b served the install %v after it was answered", time.Since(start))

	require.Equal(t, http.StatusOK, a.Do("POST", "/api/plugins/example.wasm_counter/disable", nil).Status)
	start = time.Now()
	sdktest.WaitFor(t, 30*time.Second, func() bool { return b.Do("GET", counter, nil).Status == http.StatusServiceUnavailable }, "node b to follow the disable")
	t.Logf("node b followed the disable in %v", time.Since(start))
	require.Equal(t, http.StatusOK, a.Do("POST", "/api/plugins/example.wasm_counter/enable", nil).Status)
	start = time.Now()
	sdktest.WaitFor(t, 30*time.Second, func() bool { return b.Do("GET", counter, nil).Status == http.StatusOK }, "node b to follow the enable")
	t.Logf("node b followed the enable in %v", time.Since(start))

	// A node started afterwards loads the installed package at start (no reconcile needed).
	c := sdktest.Start(t, sdktest.Options{DatabaseURL: a.DatabaseURL, Configure: func(c *host.Config) {
		c.ReconcileInterval = time.Hour
	}})
	res := c.Do("GET", counter, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	require.Equal(t, http.StatusOK, a.Do("DELETE", "/api/plugins/example.wasm_counter", nil).Status)
	sdktest.WaitFor(t, 30*time.Second, func() bool { return b.Do("GET", counter, nil).Status == http.StatusNotFound }, "node b to follow the uninstall")
}
