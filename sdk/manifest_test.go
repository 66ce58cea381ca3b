package sdk

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const validManifest = `{"key":"example.notes","version":"0.1.0","kind":"plugin",
 "runtime":{"kind":"process","executable":"notes"},"capabilities":["activity","calls"],
 "uses":["work.issues.get"],
 "routes":[{"method":"GET","path":"/api/companies/{companyId}/notes","access":"either","company":{"from":"path"}}],
 "jobs":[],"configSchema":{"type":"object","properties":{"n":{"type":"integer"}},"additionalProperties":false},"description":"notes"}`

func TestParseManifest(t *testing.T) {
	t.Parallel()
	m, err := ParseManifest([]byte(validManifest))
	require.NoError(t, err)
	require.Equal(t, "example.notes", m.Key)
	require.NoError(t, m.ValidateConfig([]byte(`{"n":3}`)))
	require.ErrorContains(t, m.ValidateConfig([]byte(`{"n":"x"}`)), "invalid config")
	require.ErrorContains(t, m.ValidateConfig([]byte(`{"other":1}`)), "invalid config")

	for _, tc := range []struct{ name, edit, want string }{
		{"UnknownField", `"bogus":1,`, "bogus"},
		{"UnknownRouteField", `"routes":[{"method":"GET","path":"/api/x","access":"board","nope":true}],`, "nope"},
		{"BadKey", `"key":"Bad Key",`, "key"},
		{"BadKind", `"kind":"widget",`, "kind"},
		{"BadAccess", `"routes":[{"method":"GET","path":"/api/x","access":"everyone"}],`, "access"},
		{"PathOutsideAPI", `"routes":[{"method":"GET","path":"/x","access":"board"}],`, "path"},
		{"UnknownCapability", `"capabilities":["teleport"],`, "teleport"},
		{"UsesWithoutCalls", `"capabilities":[],`, "calls capability"},
		{"CompanyParamMissing", `"routes":[{"method":"GET","path":"/api/x","access":"board","company":{"from":"path"}}],`, "companyId"},
		{"JobsWithoutCapability", `"jobs":[{"key":"tick","every":"1m"}],`, "jobs capability"},
		{"BadConfigSchema", `"configSchema":{"type":7},`, "config schema"},
		{"WasmWithoutModule", `"runtime":{"kind":"wasm"},`, "module"},
		{"ToolWithoutDescription", `"tools":[{"name":"echo"}],`, "description"},
		{"ToolBadName", `"tools":[{"name":"Echo Tool","description":"d"}],`, "name"},
		{"ToolRepeated", `"tools":[{"name":"echo","description":"d"},{"name":"echo","description":"e"}],`, "repeated"},
		{"ToolBadParametersSchema", `"tools":[{"name":"echo","description":"d","parametersSchema":{"type":9}}],`, "parameters schema"},
		{"WebhookRepeated", `"webhooks":[{"endpointKey":"in"},{"endpointKey":"in"}],`, "repeated"},
		{"WebhookBadKey", `"webhooks":[{"endpointKey":"../in"}],`, "endpointKey"},
		{"FolderBadAccess", `"localFolders":[{"folderKey":"root","access":"write"}],`, "access"},
		{"FolderRequiresOutside", `"localFolders":[{"folderKey":"root","requiredFiles":["../etc/passwd"]}],`, "relative path"},
		{"UIEntryOutside", `"ui":{"slots":[{"slot":"company.sidebar","entry":"../x.js"}]},`, "relative path"},
		{"LauncherBadAction", `"ui":{"launchers":[{"id":"open","displayName":"Open","placement":"toolbar","action":"explode"}]},`, "action"},
		{"ProvidesReservedMethod", `"provides":[{"name":"keel.tool.execute"}],`, "reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Later keys win in the JSON decoders used here, so prepend the edit.
			doc := "{" + tc.edit + strings.TrimPrefix(validManifest, "{")
			doc = dedupeKeys(t, doc, tc.edit)
			_, err := ParseManifest([]byte(doc))
			require.Error(t, err)
			require.Contains(t, strings.ToLower(err.Error()), strings.ToLower(tc.want))
		})
	}
}

// dedupeKeys removes from the valid manifest the keys that the edit redefines, so each
// case changes exactly one thing.
func dedupeKeys(t *testing.T, doc, edit string) string {
	t.Helper()
	base := validManifest
	for _, k := range []string{"key", "kind", "routes", "capabilities", "jobs", "configSchema", "runtime"} {
		if strings.HasPrefix(edit, `"`+k+`":`) {
			start := strings.Index(base, `"`+k+`":`)
			end := matchValueEnd(base, start+len(k)+3)
			base = base[:start] + base[end+1:]
		}
	}
	return "{" + edit + strings.TrimPrefix(base, "{")
}

// matchValueEnd returns the index of the comma after the JSON value starting at i.
func matchValueEnd(s string, i int) int {
	depth, inStr := 0, false
	for j := i; j < len(s); j++ {
		switch c := s[j]; {
		case inStr:
			if c == '\\' {
				j++
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		case c == ',' && depth == 0:
			return j
		}
	}
	return len(s) - 1
}

// TestManifestSchemaIsCurrent fails when manifest.schema.json is stale: run `make proto`.
func TestParseManifestFeatures(t *testing.T) {
	t.Parallel()
	doc := `{"key":"example.features","version":"0.1.0","kind":"plugin","runtime":{"kind":"process","executable":"x"},
	 "tools":[{"name":"echo","description":"Echo","parametersSchema":{"type":"object","required":["text"]}}],
	 "webhooks":[{"endpointKey":"github.push"}],
	 "localFolders":[{"folderKey":"wiki-root","access":"readWrite","requiredDirectories":["raw","wiki/sources"],"requiredFiles":["AGENTS.md"]}],
	 "ui":{"slots":[{"slot":"company.sidebar","entry":"dist/index.js"}],
	  "launchers":[{"id":"open","displayName":"Open","placement":"globalToolbarButton","action":"openDrawer","target":"dist/index.js"}]}}`
	m, err := ParseManifest([]byte(doc))
	require.NoError(t, err)
	require.NotNil(t, m.Tool("echo"))
	require.Nil(t, m.Tool("nope"))
	require.NotNil(t, m.Webhook("github.push"))
	require.Equal(t, FolderReadWrite, m.LocalFolder("wiki-root").FolderAccess())
	require.Equal(t, FolderReadWrite, (&LocalFolder{}).FolderAccess(), "readWrite by default")
}

func TestManifestSchemaIsCurrent(t *testing.T) {
	t.Parallel()
	want, err := GenerateManifestSchema()
	require.NoError(t, err)
	got, err := os.ReadFile("manifest.schema.json")
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "manifest.schema.json is stale: run make proto")
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(validManifest))
	f.Add([]byte(`{"key":"a","version":"1.0.0","kind":"feature","runtime":{"kind":"wasm","module":"m.wasm"}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("parsed manifest fails validation: %v", err)
		}
	})
}

// TestParseManifestUnknownFieldSuggests checks that a misspelt field is named with the
// closest known field, at the top level and inside nested objects.
func TestParseManifestUnknownFieldSuggests(t *testing.T) {
	t.Parallel()
	base := `{"key":"a.b","version":"1.0.0","kind":"feature","runtime":{"kind":"process","executable":"x"%s}%s}`
	tests := []struct {
		name, inner, outer, want string
	}{
		{"TopLevel", "", `,"capabilites":[]`, "invalid manifest: unknown field capabilites, did you mean capabilities"},
		{"Nested", `,"exectuable":"y"`, "", "invalid manifest: unknown field exectuable, did you mean executable"},
		{"NothingNear", "", `,"bogus":1`, "invalid manifest: unknown field bogus"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseManifest([]byte(strings.ReplaceAll(strings.Replace(strings.Replace(base, "%s", tc.inner, 1), "%s", tc.outer, 1), "\n", "")))
			require.EqualError(t, err, tc.want)
		})
	}
}

func TestManifestArtifacts(t *testing.T) {
	t.Parallel()
	const sum = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	manifest := func(runtime string) []byte {
		return []byte(`{"key":"example.pkg","version":"1.0.0","kind":"plugin","runtime":` + runtime + `}`)
	}
	t.Run("PerPlatform", func(t *testing.T) {
		t.Parallel()
		m, err := ParseManifest(manifest(`{"kind":"process","artifacts":{"linux-amd64":{"path":"bin/linux-amd64/x","sha256":"` + sum + `"},"darwin-arm64":{"path":"bin/darwin-arm64/x"}}}`))
		require.NoError(t, err)
		path, digest, ok := m.Runtime.ExecutableFor("linux-amd64")
		require.True(t, ok)
		require.Equal(t, "bin/linux-amd64/x", path)
		require.Equal(t, sum, digest)
		_, _, ok = m.Runtime.ExecutableFor("windows-amd64")
		require.False(t, ok)
	})
	t.Run("SingleExecutableStillValid", func(t *testing.T) {
		t.Parallel()
		m, err := ParseManifest(manifest(`{"kind":"process","executable":"x","sha256":"` + sum + `"}`))
		require.NoError(t, err)
		path, digest, ok := m.Runtime.ExecutableFor("linux-amd64")
		require.True(t, ok)
		require.Equal(t, "x", path)
		require.Equal(t, sum, digest)
	})
	for name, tc := range map[string]struct{ runtime, want string }{
		"BothExecutableAndArtifacts": {`{"kind":"process","executable":"x","artifacts":{"linux-amd64":{"path":"x"}}}`, "not both"},
		"BadPlatform":                {`{"kind":"process","artifacts":{"Linux_amd64":{"path":"x"}}}`, "goos-goarch"},
		"EscapingPath":               {`{"kind":"process","artifacts":{"linux-amd64":{"path":"../x"}}}`, "inside the package"},
		"AbsolutePath":               {`{"kind":"process","artifacts":{"linux-amd64":{"path":"/bin/sh"}}}`, "inside the package"},
		"BadDigest":                  {`{"kind":"process","artifacts":{"linux-amd64":{"path":"x","sha256":"nope"}}}`, "sha256"},
		"WasmWithArtifacts":          {`{"kind":"wasm","module":"m.wasm","artifacts":{"linux-amd64":{"path":"x"}}}`, "no artifacts"},
		"UnknownArtifactField":       {`{"kind":"process","artifacts":{"linux-amd64":{"path":"x","size":1}}}`, "size"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseManifest(manifest(tc.runtime))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestIsPackagePath(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]bool{
		"a": true, "ui/x.js": true, "bin/linux-amd64/notes": true,
		"": false, "/a": false, "../a": false, "a/../b": false, "a//b": false, "./a": false, `a\b`: false, "a\x00": false,
	} {
		require.Equal(t, want, IsPackagePath(p), p)
	}
}

func TestManifestEnvironmentDrivers(t *testing.T) {
	t.Parallel()
	doc := func(caps, drivers string) []byte {
		return []byte(`{"key":"example.drivers","version":"0.1.0","kind":"plugin","runtime":{"kind":"process","executable":"x"},
		 "capabilities":` + caps + `,"environmentDrivers":` + drivers + `}`)
	}
	m, err := ParseManifest(doc(`["environment_drivers"]`, `[{"driver":"acme.sandbox","configSchema":{"type":"object"}}]`))
	require.NoError(t, err)
	require.Equal(t, "acme.sandbox", m.EnvironmentDrivers[0].Driver)
	for name, c := range map[string]struct{ caps, drivers, want string }{
		"NeedsCapability": {`[]`, `[{"driver":"acme.sandbox"}]`, "needs the environment_drivers capability"},
		"LocalReserved":   {`["environment_drivers"]`, `[{"driver":"local"}]`, "reserved"},
		"Repeated":        {`["environment_drivers"]`, `[{"driver":"a"},{"driver":"a"}]`, "repeated"},
		"BadSchema":       {`["environment_drivers"]`, `[{"driver":"a","configSchema":{"type":5}}]`, "config schema of environment driver"},
		"UnknownField":    {`["environment_drivers"]`, `[{"driver":"a","bogus":1}]`, "unknown field"},
	} {
		_, err := ParseManifest(doc(c.caps, c.drivers))
		require.ErrorContains(t, err, c.want, name)
	}
}
