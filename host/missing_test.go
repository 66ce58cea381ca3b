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

// TestPluginsListNeverLoaded checks that /api/plugins lists an extension directory on
// the extensions path whose manifest never loaded, with status error and the reason: by
// the manifest's key when it can be read, by the directory's name when it cannot.
func TestPluginsListNeverLoaded(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	typo := filepath.Join(root, "typo")
	require.NoError(t, os.MkdirAll(typo, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(typo, "manifest.json"), []byte(`{"key": "test.never_loaded", "version": "0.2.0",
		"kind": "plugin", "runtime": {"kind": "process", "executable": "x"}, "kernel": ">=0.1", "capabilites": ["activity"]}`), 0o644))
	garbled := filepath.Join(root, "garbled")
	require.NoError(t, os.MkdirAll(garbled, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(garbled, "manifest.json"), []byte(`{"key": `), 0o644))

	h := sdktest.Start(t, sdktest.Options{ExtensionDirs: []string{root}, ExpectFailures: true})
	res := h.Do("GET", "/api/plugins", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var list []map[string]any
	res.JSON(t, &list)
	byKey := map[string]map[string]any{}
	for _, r := range list {
		byKey[r["pluginKey"].(string)] = r
	}

	rec := byKey["test.never_loaded"]
	require.NotNil(t, rec, "the extension with a misspelt manifest field is listed: %s", res.Body)
	require.Equal(t, "error", rec["status"])
	require.Equal(t, "0.2.0", rec["version"])
	require.Equal(t, typo, rec["path"])
	require.Contains(t, rec["lastError"], "unknown field capabilites, did you mean capabilities")

	rec = byKey["garbled"]
	require.NotNil(t, rec, "the extension with an unreadable manifest is listed by its directory: %s", res.Body)
	require.Equal(t, "error", rec["status"])
	require.Contains(t, rec["lastError"], "extension in "+garbled)

	// A later start without the directory keeps the row and says it was not found.
	one := sdktest.Start(t, sdktest.Options{DatabaseURL: h.DatabaseURL, ExpectFailures: true})
	res = one.Do("GET", "/api/plugins/test.never_loaded", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, "not found at start: no extension test.never_loaded in "+typo+" (check SERVICE_EXTENSIONS_PATH)", res.Map(t)["lastError"])
}
