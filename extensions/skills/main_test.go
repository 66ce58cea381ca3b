package skills_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/extensions/agents"
	_ "github.com/keelhq/keel/extensions/folders"
	_ "github.com/keelhq/keel/extensions/routines"
	_ "github.com/keelhq/keel/extensions/secrets"
	_ "github.com/keelhq/keel/extensions/skills"
	_ "github.com/keelhq/keel/extensions/work"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as an extension,
// sdktest.Main serves it instead.
func TestMain(m *testing.M) { sdktest.Main(m) }

// ok requires a status and decodes an object.
func ok(t testing.TB, res *sdktest.Response, want int) map[string]any {
	t.Helper()
	require.Equal(t, want, res.Status, "%s", res.Body)
	return res.Map(t)
}

// list requires 200 and decodes an array.
func list(t testing.TB, res *sdktest.Response) []map[string]any {
	t.Helper()
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var out []map[string]any
	res.JSON(t, &out)
	return out
}

// wantErr checks an API error's status and text ("" skips the text).
func wantErr(t testing.TB, res *sdktest.Response, status int, message string) map[string]any {
	t.Helper()
	require.Equal(t, status, res.Status, "%s", res.Body)
	m := res.Map(t)
	if message != "" {
		require.Equal(t, message, m["error"], "%s", res.Body)
	}
	return m
}

// call invokes a provided method as the kernel with the system actor.
func call(t testing.TB, h *sdktest.Host, method, companyID string, input any, out any) *extensionv1.Error {
	t.Helper()
	in, err := json.Marshal(input)
	require.NoError(t, err)
	res, err := h.Supervisor.Invoke(context.Background(), "kernel", &hostv1.InvokeRequest{
		Method: method, InputJson: in, Actor: &extensionv1.Actor{Type: "system"}, CompanyId: companyID})
	require.NoError(t, err)
	if res.Error == nil && out != nil {
		require.NoError(t, json.Unmarshal(res.OutputJson, out))
	}
	return res.Error
}

// forge is a local stand-in for the code forge: its API (default branch, commits, trees),
// its raw file host and its web URLs, serving repositories whose refs tests can move.
type forge struct {
	srv *httptest.Server
	mu  sync.Mutex
	// repos maps owner/repo to refs (branch or tag → commit) and commits to files.
	refs    map[string]map[string]string
	commits map[string]map[string]string
}

func newForge(t *testing.T) *forge {
	f := &forge{refs: map[string]map[string]string{}, commits: map[string]map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/repos/{owner}/{repo}", func(rw http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.refs[r.PathValue("owner")+"/"+r.PathValue("repo")] == nil {
			http.NotFound(rw, r)
			return
		}
		_ = json.NewEncoder(rw).Encode(map[string]any{"default_branch": "main"})
	})
	mux.HandleFunc("GET /api/repos/{owner}/{repo}/commits/{ref}", func(rw http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		sha, found := f.refs[r.PathValue("owner")+"/"+r.PathValue("repo")][r.PathValue("ref")]
		if !found {
			http.NotFound(rw, r)
			return
		}
		_ = json.NewEncoder(rw).Encode(map[string]any{"sha": sha})
	})
	mux.HandleFunc("GET /api/repos/{owner}/{repo}/git/trees/{sha}", func(rw http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		files, found := f.commits[r.PathValue("sha")]
		if !found {
			http.NotFound(rw, r)
			return
		}
		var tree []map[string]any
		dirs := map[string]bool{}
		for p, c := range files {
			tree = append(tree, map[string]any{"path": p, "type": "blob", "size": len(c)})
			for d := filepath.Dir(p); d != "."; d = filepath.Dir(d) {
				dirs[d] = true
			}
		}
		for d := range dirs {
			tree = append(tree, map[string]any{"path": d, "type": "tree"})
		}
		_ = json.NewEncoder(rw).Encode(map[string]any{"sha": r.PathValue("sha"), "tree": tree, "truncated": false})
	})
	mux.HandleFunc("GET /raw/{owner}/{repo}/{sha}/{path...}", func(rw http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		c, found := f.commits[r.PathValue("sha")][r.PathValue("path")]
		if !found {
			http.NotFound(rw, r)
			return
		}
		_, _ = rw.Write([]byte(c))
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// push records a commit of a repository and points refs at it.
func (f *forge) push(repo, sha string, files map[string]string, refs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refs[repo] == nil {
		f.refs[repo] = map[string]string{}
	}
	f.commits[sha] = files
	for _, r := range refs {
		f.refs[repo][r] = sha
	}
}

// skillMD is a SKILL.md with a name and description.
func skillMD(name, desc string, extra ...string) string {
	var b strings.Builder
	b.WriteString("---\nname: " + name + "\ndescription: " + desc + "\n")
	for _, e := range extra {
		b.WriteString(e + "\n")
	}
	b.WriteString("---\n# " + name + "\n")
	return b.String()
}

// writeFiles writes files under a directory.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
	}
}

// keys returns the sorted keys of skills.
func keys(skills []any) []string {
	var out []string
	for _, s := range skills {
		out = append(out, s.(map[string]any)["key"].(string))
	}
	sort.Strings(out)
	return out
}
