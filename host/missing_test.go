package host_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// TestPluginsListStaleRecords checks that /api/plugins tells the truth about an extension
// loaded by an earlier start: when its manifest no longer loads the row says why (with a
// spelling suggestion), and when it is gone the row says it was not found at start.
func TestPluginsListStaleRecords(t *testing.T) {
	t.Parallel()
	built := sdktest.BuildProcessExtension(t, "../examples/process-notes")
	dir := filepath.Join(t.TempDir(), "notes")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	entries, err := os.ReadDir(built)
	require.NoError(t, err)
	for _, e := range entries {
		require.NoError(t, os.Symlink(filepath.Join(built, e.Name()), filepath.Join(dir, e.Name())))
	}
	manifest, err := os.ReadFile(filepath.Join(built, "manifest.json"))
	require.NoError(t, err)

	h1 := sdktest.Start(t, sdktest.Options{ExtensionDirs: []string{dir}})
	status := func(h *sdktest.Host) map[string]any {
		res := h.Do("GET", "/api/plugins/example.notes", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		return res.Map(t)
	}
	require.Equal(t, "ready", status(h1)["status"])
	h1.Stop(context.Background())

	// A typo in the manifest: the row keeps the key and says what is wrong.
	require.NoError(t, os.Remove(filepath.Join(dir, "manifest.json")))
	typo := strings.Replace(string(manifest), `"capabilities"`, `"capabilites"`, 1)
	require.NotEqual(t, string(manifest), typo, "the manifest declares capabilities")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(typo), 0o644))
	h2 := sdktest.Start(t, sdktest.Options{ExtensionDirs: []string{dir}, DatabaseURL: h1.DatabaseURL, ExpectFailures: true})
	rec := status(h2)
	require.Equal(t, "error", rec["status"])
	require.Contains(t, rec["lastError"], "unknown field capabilites, did you mean capabilities")
	h2.Stop(context.Background())

	// Gone: not found at start.
	h3 := sdktest.Start(t, sdktest.Options{DatabaseURL: h1.DatabaseURL})
	rec = status(h3)
	require.Equal(t, "error", rec["status"])
	require.Equal(t, "not found at start: no extension example.notes in "+dir+" (check SERVICE_EXTENSIONS_PATH)", rec["lastError"])
}

// TestMissingExecutableRefused checks that an extension whose executable is missing is
// refused once at load, listed with status error and the reason, and not retried.
func TestMissingExecutableRefused(t *testing.T) {
	t.Parallel()
	built := sdktest.BuildProcessExtension(t, "../examples/process-notes")
	manifest, err := os.ReadFile(filepath.Join(built, "manifest.json"))
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "notes")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"), manifest, 0o644))

	h := sdktest.Start(t, sdktest.Options{ExtensionDirs: []string{dir}, ExpectFailures: true})
	want := "executable " + filepath.Join(dir, "notes") + " not found: build it there or fix runtime.executable in " + filepath.Join(dir, "manifest.json")
	require.ErrorContains(t, h.LoadErr, want)
	res := h.Do("GET", "/api/plugins/example.notes", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	rec := res.Map(t)
	require.Equal(t, "error", rec["status"])
	require.Equal(t, want, rec["lastError"])
}
