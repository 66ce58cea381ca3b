package packages_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/host/packages"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdktest"
)

// catalogRoot writes a bundled root: first-party and example plugins, one nested, one
// flag-gated, plus what the scan skips (an adapter, node_modules, a broken manifest).
func catalogRoot(t *testing.T) string {
	root := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	manifest := func(key, kind, extra string) string {
		return `{"key":"` + key + `","version":"1.0.0","kind":"` + kind + `","runtime":{"kind":"wasm","module":"m.wasm"}` + extra + `}`
	}
	write("plugins/wiki/manifest.json", manifest("keel.wiki", "plugin", `,"displayName":"Wiki","description":"An LLM wiki.","flag":"enableWiki"`))
	write("plugins/wiki/package.json", `{"name":"@keel/plugin-wiki"}`)
	write("examples/zeta-notes/manifest.json", manifest("example.zeta", "plugin", ""))
	write("examples/group/alpha/manifest.json", manifest("example.alpha", "plugin", `,"displayName":"Alpha"`))
	write("examples/custom-adapter/manifest.json", manifest("example.adapter", "adapter", ""))
	write("examples/node_modules/dep/manifest.json", manifest("example.dep", "plugin", ""))
	write("examples/broken/manifest.json", `{"key":`)
	return root
}

func TestCatalog(t *testing.T) {
	t.Parallel()
	root := catalogRoot(t)
	real, err := filepath.EvalSymlinks(root)
	require.NoError(t, err)
	c := packages.NewCatalog(root)
	list, err := c.BundledPlugins(context.Background())
	require.NoError(t, err)
	require.Equal(t, []*kernel.BundledPlugin{
		{PackageName: "@keel/plugin-wiki", PluginKey: "keel.wiki", DisplayName: "Wiki", Description: "An LLM wiki.",
			LocalPath: filepath.Join(real, "plugins/wiki"), Tag: "first-party", Experimental: true},
		{PackageName: "example.alpha", PluginKey: "example.alpha", DisplayName: "Alpha", Description: "Bundled example plugin from examples/group/alpha.",
			LocalPath: filepath.Join(real, "examples/group/alpha"), Tag: "example"},
		{PackageName: "example.zeta", PluginKey: "example.zeta", DisplayName: "Zeta Notes", Description: "Bundled example plugin from examples/zeta-notes.",
			LocalPath: filepath.Join(real, "examples/zeta-notes"), Tag: "example"},
	}, list)

	// The scan is cached: a package added later shows at the next start.
	require.NoError(t, os.MkdirAll(filepath.Join(root, "examples/late"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "examples/late/manifest.json"), []byte(`{"key":"example.late","version":"1.0.0","kind":"plugin","runtime":{"kind":"wasm","module":"m.wasm"}}`), 0o644))
	again, err := c.BundledPlugins(context.Background())
	require.NoError(t, err)
	require.Len(t, again, 3)

	empty, err := packages.NewCatalog("").BundledPlugins(context.Background())
	require.NoError(t, err)
	require.Empty(t, empty)
}

func TestFindBundledRoot(t *testing.T) {
	t.Parallel()
	// The test runs in host/packages of the checkout, whose root has examples/.
	root := packages.FindBundledRoot()
	want, err := filepath.Abs("../..")
	require.NoError(t, err)
	require.Equal(t, want, root)
}

func TestExamplesRoute(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Configure: func(c *host.Config) { c.BundledRoot = catalogRoot(t) }})
	res := h.Do("GET", "/api/plugins/examples", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var list []map[string]any
	res.JSON(t, &list)
	require.Len(t, list, 3)
	require.Equal(t, map[string]any{
		"packageName": "@keel/plugin-wiki", "pluginKey": "keel.wiki", "displayName": "Wiki", "description": "An LLM wiki.",
		"localPath": list[0]["localPath"], "tag": "first-party", "experimental": true,
	}, list[0])

	t.Run("InstallsByLocalPath", func(t *testing.T) {
		// The checkout's own examples install through the ordinary local-path install
		// (wasm-counter needs its module built; the manifest alone is refused clearly).
		checkout := packages.NewCatalog(packages.FindBundledRoot())
		entries, err := checkout.BundledPlugins(context.Background())
		require.NoError(t, err)
		keys := map[string]string{}
		for _, e := range entries {
			keys[e.PluginKey] = e.LocalPath
			want := "example"
			if filepath.Base(filepath.Dir(e.LocalPath)) == "plugins" {
				want = "first-party"
			}
			require.Equal(t, want, e.Tag, e.PluginKey)
		}
		require.Contains(t, keys, "keelhq.llm_wiki", "the LLM Wiki ships in plugins/")
		require.Contains(t, keys, "example.notes")
		require.Contains(t, keys, "example.wasm_counter")
		_, err = h.Packages.Install(context.Background(), packages.Request{PackageName: keys["example.wasm_counter"], IsLocalPath: true})
		requireAPIErrorContains(t, err, http.StatusBadRequest, "module counter.wasm is missing from the package")
	})
}
