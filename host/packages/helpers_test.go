package packages_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host/packages"
	"github.com/keelhq/keel/host/pgembed/pgtest"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdktest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

// newKernel starts a kernel on a fresh database: the store every Manager of the test shares.
func newKernel(t *testing.T) *kernel.Kernel {
	t.Helper()
	k, err := kernel.New(context.Background(), pgtest.NewDatabase(t), kernel.Config{})
	require.NoError(t, err)
	t.Cleanup(k.Close)
	return k
}

// newManager returns a Manager on the store with a data dir of its own (a node).
func newManager(t *testing.T, store packages.Store, opts ...func(*packages.Options)) *packages.Manager {
	t.Helper()
	o := packages.Options{Store: store, DataDir: t.TempDir()}
	for _, f := range opts {
		f(&o)
	}
	m, err := packages.New(o)
	require.NoError(t, err)
	return m
}

func sum256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// entry is one archive entry of a hand-made test archive.
type entry struct {
	name string
	body string
	mode int64
	// link makes a symlink (or, with hard, a hard link) to link.
	link string
	hard bool
	dir  bool
}

// wasmFiles returns a wasm package's files: a manifest for key with a module and its
// digest, plus extra files.
func wasmFiles(key string, extra ...entry) []entry {
	module := "\x00asm-module-of-" + key
	mf := `{"key":"` + key + `","version":"1.0.0","kind":"plugin","displayName":"` + key + `",` +
		`"runtime":{"kind":"wasm","module":"m.wasm","sha256":"` + sum256([]byte(module)) + `"}}`
	return append([]entry{{name: "manifest.json", body: mf}, {name: "m.wasm", body: module}}, extra...)
}

// processFiles returns a process package's files with one executable per platform given.
func processFiles(key string, platforms ...string) []entry {
	arts := map[string]sdk.Artifact{}
	var files []entry
	for _, p := range platforms {
		body := "#!/bin/sh\necho " + key + " " + p + "\n"
		path := "bin/" + p + "/" + strings.ReplaceAll(key, ".", "-")
		arts[p] = sdk.Artifact{Path: path, SHA256: sum256([]byte(body))}
		files = append(files, entry{name: path, body: body, mode: 0o644})
	}
	m := map[string]any{"key": key, "version": "2.0.0", "kind": "plugin", "runtime": map[string]any{"kind": "process", "artifacts": arts}}
	b, _ := json.Marshal(m)
	return append([]entry{{name: "manifest.json", body: string(b)}}, files...)
}

func prefixed(prefix string, files []entry) []entry {
	out := make([]entry, len(files))
	for i, f := range files {
		f.name = prefix + f.name
		out[i] = f
	}
	return out
}

func makeTgz(t testing.TB, files []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.body)), Typeflag: tar.TypeReg}
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
		switch {
		case f.dir:
			hdr.Typeflag, hdr.Size, hdr.Mode = tar.TypeDir, 0, 0o755
		case f.link != "" && f.hard:
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, f.link, 0
		case f.link != "":
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeSymlink, f.link, 0
		}
		require.NoError(t, tw.WriteHeader(hdr))
		if hdr.Typeflag == tar.TypeReg {
			_, err := tw.Write([]byte(f.body))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func makeZip(t testing.TB, files []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		h := &zip.FileHeader{Name: f.name, Method: zip.Deflate}
		mode := os.FileMode(0o644)
		body := f.body
		if f.link != "" {
			mode, body = os.ModeSymlink|0o777, f.link
		}
		h.SetMode(mode)
		w, err := zw.CreateHeader(h)
		require.NoError(t, err)
		_, err = w.Write([]byte(body))
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// writeDir writes files into a new directory and returns it.
func writeDir(t testing.TB, files []entry) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(f.body), 0o644))
	}
	return dir
}

// writeFile writes b to a file named name in a new directory and returns its path.
func writeFile(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

// requireAPIError checks an error is the API error with this status and exact text.
func requireAPIError(t testing.TB, err error, status int, text string) {
	t.Helper()
	require.Error(t, err)
	apiErr := kernel.AsAPIError(err)
	require.Equal(t, status, apiErr.Status, "error: %v", err)
	require.Equal(t, text, apiErr.Message)
}

// requireAPIErrorContains checks an error is an API error with this status whose text
// contains want.
func requireAPIErrorContains(t testing.TB, err error, status int, want string) {
	t.Helper()
	require.Error(t, err)
	apiErr := kernel.AsAPIError(err)
	require.Equal(t, status, apiErr.Status, "error: %v", err)
	require.Contains(t, apiErr.Message, want)
}

// registry is a local npm registry: packuments at /<escaped name>, tarballs at /-/<file>.
type registry struct {
	srv      *httptest.Server
	mu       sync.Mutex
	packages map[string]map[string][]byte // name → version → tarball
	tags     map[string]map[string]string
	tamper   map[string]bool // name@version whose tarball is served altered
	paths    []string
	// token, when set, is the bearer token every request must carry (401 otherwise).
	token string
	// auths are the Authorization headers received, one per request.
	auths []string
	// tarballs, when set, is the base URL tarballs are said to live at (another host).
	tarballs string
}

func newRegistry(t *testing.T) *registry {
	r := &registry{packages: map[string]map[string][]byte{}, tags: map[string]map[string]string{}, tamper: map[string]bool{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *registry) publish(name, version string, tarball []byte, tags ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.packages[name] == nil {
		r.packages[name] = map[string][]byte{}
		r.tags[name] = map[string]string{}
	}
	r.packages[name][version] = tarball
	r.tags[name]["latest"] = version
	for _, tag := range tags {
		r.tags[name][tag] = version
	}
}

func (r *registry) tarballBase() string {
	if r.tarballs != "" {
		return r.tarballs
	}
	return r.srv.URL
}

func (r *registry) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.paths = append(r.paths, req.URL.EscapedPath())
	r.auths = append(r.auths, req.Header.Get("Authorization"))
	if r.token != "" && req.Header.Get("Authorization") != "Bearer "+r.token {
		http.Error(w, `{"error":"Unauthorized"}`, http.StatusUnauthorized)
		return
	}
	if file, ok := strings.CutPrefix(req.URL.Path, "/-/"); ok {
		name, version, _ := strings.Cut(strings.TrimSuffix(file, ".tgz"), "@@")
		name = strings.ReplaceAll(name, "__", "/")
		b, ok := r.packages[name][version]
		if !ok {
			http.NotFound(w, req)
			return
		}
		if r.tamper[name+"@"+version] {
			b = append(append([]byte{}, b...), 0)
		}
		w.Write(b)
		return
	}
	name := strings.TrimPrefix(req.URL.Path, "/") // The server unescapes %2f.
	versions, ok := r.packages[name]
	if !ok {
		http.Error(w, `{"error":"Not found"}`, http.StatusNotFound)
		return
	}
	doc := map[string]any{"name": name, "dist-tags": r.tags[name]}
	vs := map[string]any{}
	for v, b := range versions {
		s := sha512.Sum512(b)
		vs[v] = map[string]any{"name": name, "version": v, "dist": map[string]any{
			"tarball":   r.tarballBase() + "/-/" + strings.ReplaceAll(name, "/", "__") + "@@" + v + ".tgz",
			"integrity": "sha512-" + base64.StdEncoding.EncodeToString(s[:]),
		}}
	}
	doc["versions"] = vs
	w.Header().Set("Content-Type", "application/vnd.npm.install-v1+json")
	json.NewEncoder(w).Encode(doc)
}
