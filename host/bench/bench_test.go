// Package bench measures what DESIGN.md budgets: start-up from an empty and an existing data
// dir, one extension hop, throughput of a kernel read and an extension read, and the memory
// of the host and its extension processes. `make bench` runs it; numbers print as
// benchmark metrics.
package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	"github.com/keelhq/keel/sdktest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

// keelBinary builds bin/keel-equivalent into a temp dir once.
var (
	binOnce sync.Once
	binPath string
	binErr  error
)

func keelBinary(b *testing.B) string {
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "keel-bench-*")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "keel")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/keel").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	require.NoError(b, binErr)
	return binPath
}

type server struct {
	cmd  *exec.Cmd
	url  string
	home string
}

func startKeel(b *testing.B, home string, extDirs ...string) (*server, time.Duration) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(keelBinary(b), "serve")
	cmd.Env = append(os.Environ(), "SERVICE_HOME="+home, "SERVICE_PORT="+strconv.Itoa(port), "DATABASE_URL=",
		"SERVICE_EXTENSIONS_PATH="+strings.Join(extDirs, ":"), "SERVICE_LOG_LEVEL=warn")
	cmd.Stderr = io.Discard
	began := time.Now()
	require.NoError(b, cmd.Start())
	s := &server{cmd: cmd, url: fmt.Sprintf("http://127.0.0.1:%d", port), home: home}
	client := &http.Client{Timeout: time.Second}
	for {
		res, err := client.Get(s.url + "/api/health")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return s, time.Since(began)
			}
		}
		if time.Since(began) > 60*time.Second {
			_ = cmd.Process.Kill()
			b.Fatal("keel did not become healthy within 60s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _, _ = s.cmd.Process.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

func newHome(b *testing.B) string {
	dir, err := os.MkdirTemp("", "keel-bench-home-*")
	require.NoError(b, err)
	require.NoError(b, os.Chmod(dir, 0o755))
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func median(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

// BenchmarkStartup reports cold start (empty data dir: initdb, migrations, extensions) and
// warm start (existing data) to a healthy /api/health, medians of three runs each.
func BenchmarkStartup(b *testing.B) {
	notes := sdktest.BuildProcessExtension(b, "../../examples/process-notes")
	var cold, warm []time.Duration
	for range 3 {
		home := newHome(b)
		s, d := startKeel(b, home, notes)
		cold = append(cold, d)
		s.stop()
		s, d = startKeel(b, home, notes)
		warm = append(warm, d)
		s.stop()
	}
	b.ReportMetric(float64(median(cold).Milliseconds()), "cold-start-ms")
	b.ReportMetric(float64(median(warm).Milliseconds()), "warm-start-ms")
}

// BenchmarkExtensionHop reports the p50 and p99 of one Handle round trip from the host to a
// process extension and back (the extension answers without touching its database).
func BenchmarkExtensionHop(b *testing.B) {
	notes := sdktest.BuildProcessExtension(b, "../../examples/process-notes")
	h := sdktest.Start(b, sdktest.Options{ExtensionDirs: []string{notes}})
	client := h.Supervisor.Extension(context.Background(), "example.notes")
	require.NotNil(b, client)
	req := &extensionv1.HTTPRequest{Method: "GET", Path: "/api/hop", Actor: &extensionv1.Actor{Type: "board"}}
	ctx := context.Background()
	for range 500 { // warm up
		_, err := client.Handle(ctx, req)
		require.NoError(b, err)
	}
	const n = 5000
	lat := make([]time.Duration, n)
	b.ResetTimer()
	for i := range n {
		t0 := time.Now()
		_, err := client.Handle(ctx, req)
		lat[i] = time.Since(t0)
		require.NoError(b, err)
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[n/2].Microseconds()), "hop-p50-µs")
	b.ReportMetric(float64(lat[n*99/100].Microseconds()), "hop-p99-µs")
}

// BenchmarkThroughput reports requests per second of a kernel read (GET a company) and an
// extension read (GET the company's notes, served by the process extension from its own
// schema) against the real keel binary with 32 concurrent connections, and the PSS of the
// host process and each extension process afterwards; then the PostgreSQL side right after
// the burst: the client backends open, their PSS, and the instance's connection budget
// (the sum of every pool's limit, as GET /metrics reports it).
func BenchmarkThroughput(b *testing.B) {
	notes := sdktest.BuildProcessExtension(b, "../../examples/process-notes")
	s, _ := startKeel(b, newHome(b), notes)
	defer s.stop()
	company := createCompany(b, s.url)
	for i := range 20 {
		post(b, s.url+"/api/companies/"+company+"/notes", fmt.Sprintf(`{"text":"note %d"}`, i))
	}
	for _, tc := range []struct{ name, path string }{
		{"kernel-read", "/api/companies/" + company},
		{"extension-read", "/api/companies/" + company + "/notes"},
	} {
		rps := load(b, s.url+tc.path, 32, 3*time.Second)
		b.ReportMetric(rps, tc.name+"-req/s")
	}
	hostPSS := pssKB(s.cmd.Process.Pid)
	b.ReportMetric(float64(hostPSS)/1024, "host-pss-MB")
	total := hostPSS
	for _, pid := range children(s.cmd.Process.Pid) {
		name := comm(pid)
		if strings.HasPrefix(name, "postgres") {
			continue
		}
		kb := pssKB(pid)
		total += kb
		b.ReportMetric(float64(kb)/1024, "ext-"+name+"-pss-MB")
	}
	b.ReportMetric(float64(total)/1024, "keel-total-pss-MB")
	backends, pgPSS := 0, 0
	for _, pid := range children(s.cmd.Process.Pid) {
		if !strings.HasPrefix(comm(pid), "postgres") {
			continue
		}
		pgPSS += pssKB(pid)
		for _, c := range children(pid) {
			pgPSS += pssKB(c)
			if isClientBackend(c) {
				backends++
			}
		}
	}
	b.ReportMetric(float64(backends), "pg-backends-after-burst")
	b.ReportMetric(float64(pgPSS)/1024, "pg-pss-MB")
	b.ReportMetric(float64(connBudget(b, s.url)), "db-conn-budget")
}

// isClientBackend reports whether a PostgreSQL process serves a client connection
// ("postgres: keel: <role> <database> [local] idle"), not an auxiliary process.
func isClientBackend(pid int) bool {
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.Contains(string(cmdline), "[local]") || strings.Contains(string(cmdline), "127.0.0.1(")
}

// connBudget sums keel_db_pool_max_connections over every pool GET /metrics reports: the
// kernel's and each extension's with an open database.
func connBudget(b *testing.B, url string) int {
	res, err := http.Get(url + "/metrics")
	require.NoError(b, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(b, err)
	require.Equal(b, http.StatusOK, res.StatusCode, "%s", body)
	sum := 0
	for line := range strings.SplitSeq(string(body), "\n") {
		if !strings.HasPrefix(line, "keel_db_pool_max_connections{") {
			continue
		}
		n, err := strconv.Atoi(line[strings.LastIndexByte(line, ' ')+1:])
		require.NoError(b, err, line)
		sum += n
	}
	require.Positive(b, sum, "no keel_db_pool_max_connections in GET /metrics")
	return sum
}

func createCompany(b *testing.B, url string) string {
	body := post(b, url+"/api/companies", `{"name":"Bench Co"}`)
	var c struct {
		ID string `json:"id"`
	}
	require.NoError(b, json.Unmarshal(body, &c))
	return c.ID
}

func post(b *testing.B, url, body string) []byte {
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(b, err)
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	require.Less(b, res.StatusCode, 300, "%s", out)
	return out
}

func load(b *testing.B, url string, conns int, d time.Duration) float64 {
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	defer tr.CloseIdleConnections()
	var count, failed atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				res, err := client.Get(url)
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode == 200 {
					count.Add(1)
				} else {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	require.Zero(b, failed.Load(), "failed requests to %s", url)
	return float64(count.Load()) / d.Seconds()
}

func pssKB(pid int) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return 0
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

func children(root int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 {
			if pp, _ := strconv.Atoi(fields[1]); pp == root {
				out = append(out, pid)
			}
		}
	}
	return out
}
