// Package sdktest starts a real keel host for tests: real PostgreSQL (one throwaway
// cluster per test binary, one database per host), real extension processes and wasm
// modules, real HTTP on loopback. Use Main as the test binary's TestMain.
package sdktest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/host/pgembed/pgtest"
	"github.com/keelhq/keel/host/supervisor"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdk"
)

// Main is the TestMain of a test binary that starts hosts. When the host launches a
// first-party extension it re-executes the test binary in the extension role, which Main
// detects and serves instead of running tests; otherwise it runs the tests and stops the
// shared PostgreSQL cluster.
func Main(m *testing.M) {
	if key := os.Getenv(supervisor.RoleEnv); key != "" {
		f, ok := extensions.Lookup(key)
		if !ok {
			os.Stderr.WriteString("sdktest: no first-party extension " + key + " in this test binary\n")
			os.Exit(2)
		}
		sdk.Serve(f())
		os.Exit(0)
	}
	pgtest.Main(m)
}

// Options choose what the host runs.
type Options struct {
	// ExtensionDirs are extension directories to load (see BuildProcessExtension).
	ExtensionDirs []string
	// Builtins loads the first-party extensions registered in this test binary.
	Builtins bool
	// Configure adjusts the host config before start.
	Configure func(*host.Config)
	// DatabaseURL reuses a database (two hosts on one database); empty makes a fresh one.
	DatabaseURL string
	// Verbose sends host logs to the test log.
	Verbose bool
	// Logger, when set, receives the host's logs (tests of the logs themselves).
	Logger hclog.Logger
	// ExpectFailures lets the host start with extensions that were refused at load or
	// cannot start (tests of those failures). Otherwise Start fails the test within
	// seconds when one cannot start, with its last error and log lines.
	ExpectFailures bool
}

// Host is a started host with HTTP helpers.
type Host struct {
	*host.Host
	t           testing.TB
	DatabaseURL string
	// Token, when set, is sent as the bearer token by the request helpers.
	Token string
}

// Start starts a host and stops it when the test ends.
func Start(t testing.TB, opts Options) *Host {
	t.Helper()
	dsn := opts.DatabaseURL
	if dsn == "" {
		dsn = pgtest.NewDatabase(t)
	}
	home := t.TempDir()
	shareMasterKey(t, dsn, home)
	exe, err := os.Executable()
	require.NoError(t, err)
	cfg := host.Config{
		Home: home, Host: "127.0.0.1", Port: 0, DatabaseURL: dsn, DeploymentMode: "local_trusted",
		ExtensionDirs: opts.ExtensionDirs, DisableBuiltins: !opts.Builtins, Executable: exe,
		HealthInterval: 500 * time.Millisecond, RestartMin: 100 * time.Millisecond,
		// Agent commands run as the test's own user unless a test asks for an agent user:
		// test scripts live in the test's private temp dirs.
		AgentUser: "-",
	}
	if opts.Configure != nil {
		opts.Configure(&cfg)
	}
	// The host's logs (extensions' output included) are kept for a failure report.
	tail := &logTail{}
	lopts := &hclog.LoggerOptions{Name: "keel", Level: hclog.Debug, Output: tail,
		// The access log is left out of the report: one line per request costs every test.
		Exclude: func(level hclog.Level, msg string, _ ...any) bool { return level == hclog.Info && msg == "request" }}
	if opts.Verbose || os.Getenv("KEEL_TEST_VERBOSE") != "" {
		lopts.Output, lopts.Exclude = io.MultiWriter(tail, testWriter{t}), nil
	}
	logger := hclog.New(lopts)
	if opts.Logger != nil {
		logger, tail = opts.Logger, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := host.Start(ctx, cfg, logger)
	require.NoError(t, err)
	t.Cleanup(func() { h.Stop(context.Background()) })
	keepKeys(t, dsn, home)
	waitStarted(ctx, t, h, opts.ExpectFailures, tail)
	return &Host{Host: h, t: t, DatabaseURL: dsn}
}

// startGrace is how long an extension may stay failed (restarting with backoff) while the
// harness waits for the host's extensions before it fails the test.
const startGrace = 2 * time.Second

// waitStarted waits until every extension meant to run is up. Unless failures are
// expected, an extension refused at load, or one that stays failed for startGrace, fails
// the test at once with its last error and log lines, instead of a timeout minutes later.
func waitStarted(ctx context.Context, t testing.TB, h *host.Host, expectFailures bool, tail *logTail) {
	t.Helper()
	if h.LoadErr != nil && !expectFailures {
		t.Fatalf("sdktest: some extensions were refused at load (set Options.ExpectFailures to test that):\n%v%s",
			h.LoadErr, tail.report(refusedKeys(h)...))
	}
	failing := map[string]time.Time{}
	for {
		pollCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := h.Supervisor.WaitReady(pollCtx)
		cancel()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("sdktest: %v%s", err, tail.report(h.Supervisor.Keys()...))
		}
		if expectFailures {
			continue
		}
		for _, key := range h.Supervisor.Keys() {
			st, err := h.Supervisor.ExtensionHealth(ctx, key)
			if err != nil || st == nil || st.Status != kernel.ExtensionError || st.PID != 0 {
				delete(failing, key)
				continue
			}
			since, seen := failing[key]
			if !seen {
				failing[key] = time.Now()
				continue
			}
			if time.Since(since) >= startGrace {
				lastErr := "unknown error"
				if st.LastError != nil {
					lastErr = *st.LastError
				}
				t.Fatalf("sdktest: extension %s cannot start (%d restarts): %s%s", key, st.Restarts, lastErr, tail.report(key))
			}
		}
	}
}

// refusedKeys lists the keys of registry rows in error at start (refused extensions).
func refusedKeys(h *host.Host) []string {
	recs, err := h.Kernel.ExtensionList(context.Background())
	if err != nil {
		return nil
	}
	var keys []string
	for _, r := range recs {
		if r.Status == kernel.ExtensionError {
			keys = append(keys, r.PluginKey)
		}
	}
	return keys
}

// logTailLines bounds the host log lines kept for a failure report.
const logTailLines = 2000

// logTail keeps the host's last log lines.
type logTail struct {
	mu    sync.Mutex
	lines []string
}

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		l.lines = append(l.lines, line)
	}
	if over := len(l.lines) - logTailLines; over > 0 {
		l.lines = append(l.lines[:0:0], l.lines[over:]...)
	}
	return len(p), nil
}

// report returns the last log lines that name one of keys (the extension's own output is
// logged under its key), formatted to follow an error message.
func (l *logTail) report(keys ...string) string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, key := range keys {
		var mine []string
		for _, line := range l.lines {
			if strings.Contains(line, key) {
				mine = append(mine, line)
			}
		}
		if len(mine) > 20 {
			mine = mine[len(mine)-20:]
		}
		if len(mine) == 0 {
			continue
		}
		b.WriteString("\nlast log lines of " + key + ":\n  " + strings.Join(mine, "\n  "))
	}
	return b.String()
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Response is a finished request.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v, failing the test on malformed JSON.
func (r *Response) JSON(t testing.TB, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.Body, v), "body: %s", r.Body)
}

// Map decodes the body as a JSON object.
func (r *Response) Map(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	r.JSON(t, &m)
	return m
}

// Do sends a request with an optional JSON body (any value, or []byte/string sent as is)
// and optional header pairs ("Authorization", "Bearer x", …).
func (h *Host) Do(method, path string, body any, headers ...string) *Response {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		require.NoError(h.t, err)
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, h.URL+path, rd)
	require.NoError(h.t, err)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if h.Token != "" {
		req.Header.Set("Authorization", "Bearer "+h.Token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(h.t, err)
	return &Response{Status: res.StatusCode, Header: res.Header, Body: b}
}

// CreateCompany creates a company through the API and returns its id.
func (h *Host) CreateCompany(name string) string {
	h.t.Helper()
	res := h.Do("POST", "/api/companies", map[string]any{"name": name})
	require.Equal(h.t, http.StatusCreated, res.Status, "create company: %s", res.Body)
	var c struct {
		ID string `json:"id"`
	}
	res.JSON(h.t, &c)
	return c.ID
}

// WaitFor polls cond until it is true or the timeout passes.
func WaitFor(t testing.TB, timeout time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", timeout, msg)
}

var (
	buildMu    sync.Mutex
	buildCache = map[string]string{}
	// buildRoot holds every directory BuildProcessExtension made in this test binary; Main
	// removes it after the tests (a build is tens of megabytes, and every run of every test
	// binary used to leave its builds in the temporary directory).
	buildRoot string
)

// BuildProcessExtension builds the Go package in pkgDir into an extension directory (the
// binary named as the manifest's executable, beside a copy of pkgDir/manifest.json) and
// returns that directory. Builds are cached per test binary.
func BuildProcessExtension(t testing.TB, pkgDir string) string {
	t.Helper()
	abs, err := filepath.Abs(pkgDir)
	require.NoError(t, err)
	buildMu.Lock()
	defer buildMu.Unlock()
	if dir, ok := buildCache[abs]; ok {
		return dir
	}
	b, err := os.ReadFile(filepath.Join(abs, host.ManifestFile))
	require.NoError(t, err)
	m, err := sdk.ParseManifest(b)
	require.NoError(t, err)
	if buildRoot == "" {
		root, err := os.MkdirTemp("", "keel-ext-builds-*")
		require.NoError(t, err)
		buildRoot = root
		pgtest.AtExit(func() { os.RemoveAll(root) })
	}
	dir, err := os.MkdirTemp(buildRoot, "keel-ext-*")
	require.NoError(t, err)
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, m.Runtime.Executable), ".")
	cmd.Dir = abs
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build %s: %s", pkgDir, out)
	require.NoError(t, os.WriteFile(filepath.Join(dir, host.ManifestFile), b, 0o644))
	buildCache[abs] = dir
	return dir
}

// Agent is an agent identity created for a test, with an API key.
type Agent struct {
	ID        string
	CompanyID string
	Name      string
	// Key is an agent API key (send as the bearer token).
	Key string
}

// CreateAgent creates an agent identity in the kernel (the agents extension owns the rest
// of an agent) and an API key for it through the API.
func (h *Host) CreateAgent(companyID, name, role string) *Agent {
	h.t.Helper()
	a, err := h.Kernel.AgentCreate(context.Background(), &kernel.AgentCreateParams{CompanyID: companyID, Name: name, Role: role})
	require.NoError(h.t, err)
	res := h.Do("POST", "/api/agents/"+a.ID+"/keys", map[string]any{"name": "test"})
	require.Equal(h.t, http.StatusCreated, res.Status, "create agent key: %s", res.Body)
	var key struct {
		Token string `json:"token"`
	}
	res.JSON(h.t, &key)
	return &Agent{ID: a.ID, CompanyID: companyID, Name: a.Name, Key: key.Token}
}

// AgentJWT mints a local agent JWT for a run of the agent.
func (h *Host) AgentJWT(a *Agent, runID string) string {
	h.t.Helper()
	tok, _, err := h.Kernel.MintAgentJWT(a.ID, a.CompanyID, "process", runID, time.Hour)
	require.NoError(h.t, err)
	return tok
}

// As returns header pairs that authenticate as the agent, optionally in a run.
func (a *Agent) As(runID string) []string {
	h := []string{"Authorization", "Bearer " + a.Key}
	if runID != "" {
		h = append(h, "X-Service-Run-Id", runID)
	}
	return h
}

// instanceKeyPaths are where the keys whose fingerprints the database records live under a
// host's home (not imported from the extensions, whose own tests use this package).
var instanceKeyPaths = []string{"extensions/secrets/master.key", "extensions/decisions/decision-signing.key"}

// keyStore is where the keys of the first test host on a database are kept for the
// others, in this process or another (a helper node): a directory per database.
func keyStore(dsn string) string {
	sum := sha256.Sum256([]byte(dsn))
	return filepath.Join(os.TempDir(), "keel-sdktest-keys", hex.EncodeToString(sum[:8]))
}

// shareMasterKey gives a host the keys of the first host on the same database, as the
// nodes of one instance share theirs: keel refuses a database whose secrets or decisions
// were made under another key.
func shareMasterKey(t testing.TB, dsn, home string) {
	t.Helper()
	for _, rel := range instanceKeyPaths {
		b, err := os.ReadFile(filepath.Join(keyStore(dsn), rel))
		if err != nil {
			continue // No host has started on this database yet; this one makes the keys.
		}
		path := filepath.Join(home, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
		require.NoError(t, os.WriteFile(path, b, 0o600))
	}
}

// keepKeys saves the keys of a started host for later hosts on its database, unless an
// earlier host did, and removes them when the test ends.
func keepKeys(t testing.TB, dsn, home string) {
	t.Helper()
	store := keyStore(dsn)
	for _, rel := range instanceKeyPaths {
		dst := filepath.Join(store, rel)
		if _, err := os.Stat(dst); err == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(home, rel))
		if err != nil {
			continue
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o700))
		require.NoError(t, os.WriteFile(dst, b, 0o600))
		t.Cleanup(func() { os.RemoveAll(store) })
	}
}
