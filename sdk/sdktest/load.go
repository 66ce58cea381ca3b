package sdktest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdk"
)

// Load sends requests to a host from a few goroutines until stopped, counting what was
// served, what failed and the longest request: the steady load of the zero-downtime tests.
type Load struct {
	served, failed atomic.Int64
	longest        atomic.Int64 // nanoseconds
	stop           chan struct{}
	wg             sync.WaitGroup
	mu             sync.Mutex
	failures       []string
	statuses       map[int]int
}

// LoadResult is what a Load saw.
type LoadResult struct {
	// Served counts requests whose answer ok accepted; Failed the others.
	Served, Failed int64
	// Longest is the longest request.
	Longest time.Duration
	// Failures holds up to ten failed answers ("503 {...}").
	Failures []string
	// Statuses counts answers by status.
	Statuses map[int]int
}

// StartLoad sends GET requests to each of paths (relative to the host URL) in turn from
// workers goroutines; ok decides whether an answer counts as served (nil: any 2xx).
func StartLoad(baseURL string, paths []string, workers int, ok func(status int, body []byte) bool) *Load {
	if ok == nil {
		ok = func(status int, _ []byte) bool { return status >= 200 && status < 300 }
	}
	l := &Load{stop: make(chan struct{}), statuses: map[int]int{}}
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := w; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				began := time.Now()
				status, body, err := get(client, baseURL+paths[i%len(paths)])
				took := time.Since(began)
				for {
					cur := l.longest.Load()
					if int64(took) <= cur || l.longest.CompareAndSwap(cur, int64(took)) {
						break
					}
				}
				l.mu.Lock()
				l.statuses[status]++
				l.mu.Unlock()
				if err == nil && ok(status, body) {
					l.served.Add(1)
					continue
				}
				l.failed.Add(1)
				l.mu.Lock()
				if len(l.failures) < 10 {
					if err != nil {
						l.failures = append(l.failures, err.Error())
					} else {
						l.failures = append(l.failures, fmt.Sprintf("%d %s", status, body))
					}
				}
				l.mu.Unlock()
			}
		}()
	}
	return l
}

func get(client *http.Client, url string) (int, []byte, error) {
	res, err := client.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// Served returns the requests served so far.
func (l *Load) Served() int64 { return l.served.Load() }

// Stop ends the load and returns what it saw.
func (l *Load) Stop() LoadResult {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	st := map[int]int{}
	for k, v := range l.statuses {
		st[k] = v
	}
	return LoadResult{Served: l.served.Load(), Failed: l.failed.Load(), Longest: time.Duration(l.longest.Load()),
		Failures: append([]string(nil), l.failures...), Statuses: st}
}

// BuildProcessExtensionVersion builds the Go package in pkgDir like BuildProcessExtension,
// but with the manifest's version set to version and, in the package's source files, each
// replace[file] pair {old, new} applied (through go build -overlay, so the package's own
// files are untouched). It makes the v2 of an example for upgrade tests; the manifest the
// binary embeds is the one written beside it.
func BuildProcessExtensionVersion(t testing.TB, pkgDir, version string, replace map[string][2]string) string {
	t.Helper()
	abs, err := filepath.Abs(pkgDir)
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(abs, "manifest.json"))
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(b, &doc))
	doc["version"] = version
	mb, err := json.MarshalIndent(doc, "", "  ")
	require.NoError(t, err)
	m, err := sdk.ParseManifest(mb)
	require.NoError(t, err)
	work := t.TempDir()
	dir, err := os.MkdirTemp("", "keel-ext-*")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	overlay := map[string]string{}
	manifestPath := filepath.Join(work, "manifest.json")
	require.NoError(t, os.WriteFile(manifestPath, mb, 0o644))
	overlay[filepath.Join(abs, "manifest.json")] = manifestPath
	for file, pair := range replace {
		src, err := os.ReadFile(filepath.Join(abs, file))
		require.NoError(t, err)
		require.Contains(t, string(src), pair[0], "replacement in %s", file)
		patched := filepath.Join(work, filepath.Base(file))
		require.NoError(t, os.WriteFile(patched, []byte(strings.Replace(string(src), pair[0], pair[1], 1)), 0o644))
		overlay[filepath.Join(abs, file)] = patched
	}
	ob, err := json.Marshal(map[string]any{"Replace": overlay})
	require.NoError(t, err)
	overlayPath := filepath.Join(work, "overlay.json")
	require.NoError(t, os.WriteFile(overlayPath, ob, 0o644))
	cmd := exec.Command("go", "build", "-overlay", overlayPath, "-o", filepath.Join(dir, m.Runtime.Executable), ".")
	cmd.Dir = abs
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build %s: %s", pkgDir, out)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"), mb, 0o644))
	return dir
}

// Publish replaces the contents of dir with those of from (files copied, executables kept
// executable): a package published anew at the same path, for upgrade tests.
func Publish(t testing.TB, dir, from string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.NoError(t, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	require.NoError(t, filepath.Walk(from, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, info.Mode().Perm())
	}))
}
