package host_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/host/pgembed/pgtest"
	"github.com/keelhq/keel/host/queue"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdktest"
)

// syncBuffer is a log sink safe for the host's concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns every log line decoded as JSON; a line that is not JSON fails the test.
func (b *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "log line is not JSON: %s", sc.Text())
		out = append(out, m)
	}
	return out
}

// scrape reads GET /metrics and returns the families by name.
func scrape(t *testing.T, h *sdktest.Host) map[string]*dto.MetricFamily {
	t.Helper()
	res := h.Do("GET", "/metrics", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Contains(t, res.Header.Get("Content-Type"), "text/plain")
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(res.Body))
	require.NoError(t, err)
	return fams
}

// sample returns the value of the metric of family name whose labels include want (the
// count of a histogram); ok is false when there is none.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	var total float64
	found := false
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		found = true
		switch {
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Untyped != nil:
			total += m.Untyped.GetValue()
		}
	}
	return total, found
}

func TestObservability(t *testing.T) {
	t.Parallel()
	notes := sdktest.BuildProcessExtension(t, "../examples/process-notes")
	logs := &syncBuffer{}
	h := sdktest.Start(t, sdktest.Options{
		ExtensionDirs: []string{notes},
		Logger:        hclog.New(&hclog.LoggerOptions{Name: "keel", Level: hclog.Info, Output: logs, JSONFormat: true}),
	})
	company := h.CreateCompany("Observed Co")
	notesRoute := map[string]string{"route": "POST /api/companies/{companyId}/notes", "owner": "example.notes", "status": "201"}

	t.Run("MetricsCount", func(t *testing.T) {
		before := scrape(t, h)
		healthBefore, _ := sample(before, "keel_http_request_duration_seconds", map[string]string{"route": "GET /api/health", "owner": "kernel", "status": "200"})
		for range 3 {
			require.Equal(t, http.StatusOK, h.Do("GET", "/api/health", nil).Status)
		}
		require.Equal(t, http.StatusCreated, h.Do("POST", "/api/companies/"+company+"/notes", map[string]string{"text": "hello"}).Status)
		require.Equal(t, http.StatusNotFound, h.Do("GET", "/api/no-such-route/"+company, nil).Status)

		// The job the note enqueues is worked in the background: wait for its hop.
		var fams map[string]*dto.MetricFamily
		sdktest.WaitFor(t, 30*time.Second, func() bool {
			fams = scrape(t, h)
			n, _ := sample(fams, "keel_job_duration_seconds", map[string]string{"kind": "example.notes/refresh-stats"})
			return n >= 1
		}, "the refresh-stats job to be worked")

		health, _ := sample(fams, "keel_http_request_duration_seconds", map[string]string{"route": "GET /api/health", "owner": "kernel", "status": "200"})
		require.Equal(t, healthBefore+3, health, "health requests counted by route template, owner and status")
		n, _ := sample(fams, "keel_http_request_duration_seconds", notesRoute)
		require.Equal(t, 1.0, n, "an extension route is counted under its template and owner")
		n, _ = sample(fams, "keel_http_request_duration_seconds", map[string]string{"route": "unmatched", "status": "404"})
		require.GreaterOrEqual(t, n, 1.0, "unmatched paths are one series")
		for _, f := range fams["keel_http_request_duration_seconds"].Metric {
			for _, l := range f.Label {
				require.NotContains(t, l.GetValue(), company, "no raw path becomes a label")
			}
		}

		n, _ = sample(fams, "keel_extension_hop_duration_seconds", map[string]string{"extension": "example.notes", "kind": "request", "outcome": "ok"})
		require.GreaterOrEqual(t, n, 1.0, "request hops")
		n, _ = sample(fams, "keel_extension_hop_duration_seconds", map[string]string{"extension": "example.notes", "kind": "job"})
		require.GreaterOrEqual(t, n, 1.0, "job hops")
		n, ok := sample(fams, "keel_extension_up", map[string]string{"extension": "example.notes"})
		require.True(t, ok)
		require.Equal(t, 1.0, n)
		_, ok = sample(fams, "keel_extension_restarts_total", map[string]string{"extension": "example.notes"})
		require.True(t, ok)
		_, ok = sample(fams, "keel_extension_state", map[string]string{"extension": "example.notes", "status": "ready"})
		require.True(t, ok, "extension state")
		n, _ = sample(fams, "keel_job_wait_seconds", map[string]string{"kind": "example.notes/refresh-stats"})
		require.GreaterOrEqual(t, n, 1.0, "job wait")

		// Database pools per owner: the kernel's in the host, the extension's through the SDK.
		n, ok = sample(fams, "keel_db_pool_max_connections", map[string]string{"owner": "kernel"})
		require.True(t, ok)
		require.Positive(t, n)
		n, ok = sample(fams, "keel_db_pool_max_connections", map[string]string{"owner": "example.notes", "extension": "example.notes"})
		require.True(t, ok, "the extension's pool")
		require.Equal(t, float64(h.ConnBudget.Extension), n, "the share of the connection budget the host handed it")
		n, _ = sample(fams, "keel_db_pool_max_connections", map[string]string{"owner": "kernel"})
		require.Equal(t, float64(h.ConnBudget.Kernel), n)

		// The extension's own metric, registered in sdk.Env.Metrics.
		n, ok = sample(fams, "example_notes_created_total", map[string]string{"extension": "example.notes"})
		require.True(t, ok, "extension metrics are gathered")
		require.Equal(t, 1.0, n)

		// Process and Go runtime.
		for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "process_resident_memory_bytes"} {
			require.Contains(t, fams, name)
		}
	})

	t.Run("QueueDepth", func(t *testing.T) {
		// A job far in the future stays scheduled and is counted until it is worked.
		_, err := h.Queue.Client().Insert(context.Background(), queue.JobArgs{Extension: "example.notes", Key: "refresh-stats",
			Args: json.RawMessage(`{"companyId":"` + company + `"}`), UniqueKey: "depth-test"}, &river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		fams := scrape(t, h)
		n, ok := sample(fams, "keel_job_queue_depth", map[string]string{"kind": "example.notes/refresh-stats"})
		require.True(t, ok)
		require.GreaterOrEqual(t, n, 1.0)
	})

	t.Run("JSONAccessLog", func(t *testing.T) {
		res := h.Do("POST", "/api/companies/"+company+"/notes", map[string]string{"text": "logged"}, "X-Request-Id", "req-observe-1")
		require.Equal(t, http.StatusCreated, res.Status)
		require.Equal(t, "req-observe-1", res.Header.Get("X-Request-Id"))
		var access, ext map[string]any
		sdktest.WaitFor(t, 10*time.Second, func() bool {
			access, ext = nil, nil
			for _, l := range logs.lines(t) {
				if l["request_id"] != "req-observe-1" {
					continue
				}
				switch l["@message"] {
				case "request":
					access = l
				case "note created":
					ext = l
				}
			}
			return access != nil && ext != nil
		}, "the access-log line and the extension's line")
		require.Equal(t, "POST /api/companies/{companyId}/notes", access["route"])
		require.Equal(t, float64(201), access["status"])
		require.Equal(t, "board", access["actor"])
		require.Contains(t, access, "duration_ms")
		require.Contains(t, access["@module"], "http")
		require.Contains(t, ext["@module"], "example.notes", "the extension's own line, relayed by the host")
	})

	t.Run("Readiness", func(t *testing.T) {
		sdktest.WaitFor(t, 30*time.Second, func() bool {
			return h.Do("GET", "/readyz", nil).Status == http.StatusOK
		}, "readiness")
		res := h.Do("GET", "/readyz", nil)
		require.JSONEq(t, `{"status":"ready","problems":[]}`, string(res.Body))
		require.Equal(t, http.StatusOK, h.Do("GET", "/api/health?ready=1", nil).Status)
	})
}

func TestReadinessWaitsForExtensions(t *testing.T) {
	t.Parallel()
	// An extension whose process exits at once never comes up: the host serves (health is
	// 200) but is not ready, and says why.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{
  "key": "test.broken", "version": "0.1.0", "kind": "plugin",
  "runtime": { "kind": "process", "executable": "broken" },
  "routes": [{ "method": "GET", "path": "/api/broken", "access": "either" }]
}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "broken"), []byte("#!/bin/sh\nexit 1\n"), 0o700))
	exe, err := os.Executable()
	require.NoError(t, err)
	h, err := host.Start(context.Background(), host.Config{
		Home: t.TempDir(), Port: 0, DatabaseURL: pgtest.NewDatabase(t), ExtensionDirs: []string{dir}, DisableBuiltins: true,
		Executable: exe, RestartMin: 100 * time.Millisecond,
	}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { h.Stop(context.Background()) })

	get := func(path string) (int, map[string]any) {
		res, err := http.Get(h.URL + path)
		require.NoError(t, err)
		defer res.Body.Close()
		var body map[string]any
		require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
		return res.StatusCode, body
	}
	status, _ := get("/api/health")
	require.Equal(t, http.StatusOK, status, "liveness stays cheap and up")
	status, body := get("/readyz")
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, "not_ready", body["status"])
	require.Contains(t, strings.Join(toStrings(body["problems"]), "\n"), "extension test.broken is not up")
	status, body = get("/api/health?ready=1")
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, "not_ready", body["code"])
	require.Equal(t, "Not ready", body["error"])
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func TestMetricsNeedInstanceAdminWhenAuthenticated(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Configure: func(c *host.Config) {
		c.DeploymentMode = "authenticated"
		c.PublicBaseURL = "http://127.0.0.1:1"
	}})
	res := h.Do("GET", "/metrics", nil)
	require.Equal(t, http.StatusUnauthorized, res.Status, "%s", res.Body)
	require.JSONEq(t, `{"error":"Unauthorized"}`, string(res.Body))

	// A signed-in board user who is not an instance admin is refused.
	res = h.Do("POST", "/api/auth/sign-up/email", map[string]any{"email": "plain@example.com", "password": "correct horse", "name": "Plain"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var session string
	for _, c := range (&http.Response{Header: res.Header}).Cookies() {
		if c.Name == kernel.SessionCookie && c.Value != "" {
			session = c.Name + "=" + c.Value
		}
	}
	require.NotEmpty(t, session)
	res = h.Do("GET", "/metrics", nil, "Cookie", session)
	require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	require.JSONEq(t, `{"error":"Instance admin access required"}`, string(res.Body))
}
