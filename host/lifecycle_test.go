package host_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// variant copies a built extension directory with its manifest edited by edit.
func variant(t *testing.T, dir string, edit func(m map[string]any)) string {
	t.Helper()
	out := t.TempDir()
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	edit(m)
	b, err = json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(out, "manifest.json"), b, 0o644))
	exe := m["runtime"].(map[string]any)["executable"].(string)
	require.NoError(t, os.Symlink(filepath.Join(dir, exe), filepath.Join(out, exe)))
	return out
}

func TestFlagGatedExtension(t *testing.T) {
	t.Parallel()
	notes := sdktest.BuildProcessExtension(t, "../examples/process-notes")
	dir := variant(t, notes, func(m map[string]any) {
		m["flag"] = "enableCases"
		m["flagOff"] = map[string]any{"status": 403, "error": "Cases are disabled"}
	})
	h := sdktest.Start(t, sdktest.Options{ExtensionDirs: []string{dir}})
	company := h.CreateCompany("Flag Co")
	path := "/api/companies/" + company + "/notes"

	res := h.Do("GET", path, nil)
	require.Equal(t, http.StatusForbidden, res.Status)
	require.Equal(t, "Cases are disabled", res.Map(t)["error"])
	require.Zero(t, h.Supervisor.PID("example.notes"), "not running while the flag is off")
	require.Equal(t, "disabled", h.Do("GET", "/api/plugins/example.notes", nil).Map(t)["status"])

	require.Equal(t, http.StatusOK, h.Do("PATCH", "/api/instance/settings/experimental", map[string]any{"enableCases": true}).Status)
	sdktest.WaitFor(t, 10*time.Second, func() bool { return h.Do("GET", path, nil).Status == http.StatusOK }, "the extension to start")
	require.NotZero(t, h.Supervisor.PID("example.notes"))
	require.Equal(t, "ready", h.Do("GET", "/api/plugins/example.notes", nil).Map(t)["status"])

	require.Equal(t, http.StatusOK, h.Do("PATCH", "/api/instance/settings/experimental", map[string]any{"enableCases": false}).Status)
	sdktest.WaitFor(t, 10*time.Second, func() bool { return h.Supervisor.PID("example.notes") == 0 }, "the extension to stop")
	require.Equal(t, http.StatusForbidden, h.Do("GET", path, nil).Status)
}

func TestLazyExtension(t *testing.T) {
	t.Parallel()
	notes := sdktest.BuildProcessExtension(t, "../examples/process-notes")
	dir := variant(t, notes, func(m map[string]any) {
		rt := m["runtime"].(map[string]any)
		rt["lazy"] = true
		rt["idleStopAfter"] = "1s"
	})
	h := sdktest.Start(t, sdktest.Options{ExtensionDirs: []string{dir}})
	require.Zero(t, h.Supervisor.PID("example.notes"), "a lazy extension does not start with the host")
	company := h.CreateCompany("Lazy Co")

	res := h.Do("GET", "/api/companies/"+company+"/notes", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.NotZero(t, h.Supervisor.PID("example.notes"), "started on first use")

	sdktest.WaitFor(t, 10*time.Second, func() bool { return h.Supervisor.PID("example.notes") == 0 }, "the idle extension to stop")
	require.Equal(t, "ready", h.Do("GET", "/api/plugins/example.notes", nil).Map(t)["status"])
	require.Equal(t, http.StatusOK, h.Do("GET", "/api/companies/"+company+"/notes", nil).Status, "and starts again on the next use")
}
