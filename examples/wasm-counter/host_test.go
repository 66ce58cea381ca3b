//go:build !wasip1

package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host/wasmrt/wasmrttest"
	"github.com/keelhq/keel/sdktest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

// TestThroughHost runs the module inside a real host: routes with kernel-resolved company
// scoping, key-value state in the kernel, activity, and limits that fail one call with a
// clear error while the host (and the module's next call) keep working.
func TestThroughHost(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	module := wasmrttest.BuildModule(t, ".")
	b, err := os.ReadFile(module)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "counter.wasm"), b, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"), manifestJSON, 0o644))

	h := sdktest.Start(t, sdktest.Options{ExtensionDirs: []string{dir}})
	require.NoError(t, h.LoadErr)
	company := h.CreateCompany("Wasm Co")
	base := "/api/companies/" + company + "/wasm-counter"
	count := func(res *sdktest.Response) float64 {
		t.Helper()
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		return res.Map(t)["count"].(float64)
	}

	require.Equal(t, float64(0), count(h.Do("GET", base, nil)))
	require.Equal(t, float64(1), count(h.Do("POST", base+"/increment", nil)))
	require.Equal(t, float64(2), count(h.Do("POST", base+"/increment", nil)))
	require.Equal(t, float64(2), count(h.Do("GET", base, nil)))

	var state []byte
	require.NoError(t, h.Kernel.Pool.QueryRow(t.Context(), `SELECT value FROM kernel.extension_kv WHERE extension_key = 'example.wasm_counter' AND company_id = $1`, company).Scan(&state))
	require.NotEmpty(t, state, "state lives in the kernel's key-value store")
	res := h.Do("GET", "/api/companies/"+company+"/activity?action=wasm_counter.incremented", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var entries []map[string]any
	res.JSON(t, &entries)
	require.Len(t, entries, 2)

	t.Run("Tool", func(t *testing.T) {
		res := h.Do("POST", "/api/plugins/tools/execute", map[string]any{"tool": "example.wasm_counter:count", "runContext": map[string]any{"companyId": company}})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Contains(t, string(res.Body), "the counter is at 2", "a wasm module answers the reserved tool call")
		res = h.Do("POST", "/api/plugins/tools/execute", map[string]any{"tool": "example.wasm_counter:count", "parameters": map[string]any{"x": 1}, "runContext": map[string]any{"companyId": company}})
		require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	})

	t.Run("MemoryLimit", func(t *testing.T) {
		res := h.Do("POST", base+"/hog", nil)
		require.Equal(t, http.StatusBadGateway, res.Status, "%s", res.Body)
		body := res.Map(t)
		require.Equal(t, "extension_memory_limit", body["code"])
		require.Contains(t, body["error"], "exceeded its memory limit")
		require.Equal(t, float64(2), count(h.Do("GET", base, nil)), "the next call works")
	})

	t.Run("TimeLimit", func(t *testing.T) {
		began := time.Now()
		res := h.Do("POST", base+"/spin", nil)
		require.Equal(t, http.StatusGatewayTimeout, res.Status, "%s", res.Body)
		require.Equal(t, "extension_time_limit", res.Map(t)["code"])
		require.Less(t, time.Since(began), 10*time.Second)
		require.Equal(t, float64(2), count(h.Do("GET", base, nil)), "the next call works")
		require.Equal(t, http.StatusOK, h.Do("GET", "/api/health", nil).Status, "the host keeps serving")
	})

	t.Run("LocalFolder", func(t *testing.T) {
		notes, outside := t.TempDir(), t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(notes, "hello.txt"), []byte("hi from the notes"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o644))
		require.NoError(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(notes, "escape")))
		read := func(file string) (content, failure string) {
			t.Helper()
			res := h.Do("POST", "/api/plugins/tools/execute", map[string]any{"tool": "example.wasm_counter:read_note",
				"parameters": map[string]any{"file": file}, "runContext": map[string]any{"companyId": company}})
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			var out struct {
				Result struct {
					Content string `json:"content"`
					Error   string `json:"error"`
				} `json:"result"`
			}
			res.JSON(t, &out)
			return out.Result.Content, out.Result.Error
		}
		_, failure := read("hello.txt")
		require.Contains(t, failure, "not set", "no folder before the company sets one")

		res := h.Do("PUT", "/api/plugins/example.wasm_counter/companies/"+company+"/local-folders/notes", map[string]any{"path": notes})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		content, failure := read("hello.txt")
		require.Empty(t, failure)
		require.Equal(t, "hi from the notes", content, "the module reads its folder, mounted at /local-folders/<companyId>/notes")
		for _, file := range []string{"escape", "../../../" + filepath.Base(outside) + "/secret.txt", filepath.Join(outside, "secret.txt"), "/etc/hostname"} {
			content, failure := read(file)
			require.Empty(t, content, "%s is out of reach", file)
			require.NotEmpty(t, failure, "%s is out of reach", file)
		}

		// What the module writes to stdout and stderr lands in the plugin's log.
		sdktest.WaitFor(t, 10*time.Second, func() bool {
			res := h.Do("GET", "/api/plugins/example.wasm_counter/logs?limit=50", nil)
			return res.Status == http.StatusOK && strings.Contains(string(res.Body), "read note hello.txt (17 bytes)") &&
				strings.Contains(string(res.Body), "cannot read escape")
		}, "the module's output in its log")
	})

	t.Run("OtherCompanyRefused", func(t *testing.T) {
		other := h.CreateCompany("Other Wasm Co")
		agent := h.CreateAgent(other, "Outsider", "general")
		res := h.Do("GET", base, nil, agent.As("")...)
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	})
}
