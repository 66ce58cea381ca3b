package costs

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkCostEventSeed posts b.N cost events shaped like the perf harness's seed: 16
// concurrent clients, events spread over the last 60 days (so about half fall before the
// current UTC month), 10 agents, 4 models, a third with an issueId, half with a projectId,
// mixed billing types, and a company with a monthly budget. It reports events per second
// and the CPU the test binary and its children (host, extension processes, PostgreSQL)
// spent per event. With COSTS_BENCH_PGLOG=<file> the test cluster logs every statement's
// parse, bind and execute during the run and the log is copied to <file>, to see what the
// path runs (the setting is the test binary's own cluster's).
func BenchmarkCostEventSeed(b *testing.B) {
	h := startHost(b)
	company := h.CreateCompany("Seed Co")
	do(b, h, http.StatusOK, "PATCH", "/api/companies/"+company+"/budgets", map[string]any{"budgetMonthlyCents": 1 << 40})
	var agents, projects, issues []string
	for i := range 10 {
		agents = append(agents, createAgent(b, h, company, fmt.Sprintf("Seeder %d", i)))
	}
	for i := range 5 {
		projects = append(projects, obj(b, do(b, h, http.StatusCreated, "POST", "/api/companies/"+company+"/projects",
			map[string]any{"name": fmt.Sprintf("Seed project %d", i)}))["id"].(string))
	}
	for i := range 20 {
		issues = append(issues, obj(b, do(b, h, http.StatusCreated, "POST", "/api/companies/"+company+"/issues",
			map[string]any{"title": fmt.Sprintf("Seed issue %d", i), "projectId": projects[i%len(projects)]}))["id"].(string))
	}
	type model struct{ provider, model string }
	models := []model{{"anthropic", "claude-sonnet-4-5"}, {"anthropic", "claude-haiku-4-5"}, {"openai", "gpt-5"}, {"openai", "gpt-5-mini"}}
	billing := []string{"metered_api", "metered_api", "metered_api", "subscription_included", "credits"}
	rng := rand.New(rand.NewSource(1))
	now := time.Now().UTC()
	span := 60 * 24 * time.Hour
	n := b.N + 1
	bodies := make([][]byte, n)
	for i := range bodies {
		md := models[i%len(models)]
		at := now.Add(-span + time.Duration(float64(span)*(float64(i)+rng.Float64())/float64(n)))
		in := 500 + rng.Intn(20000)
		m := map[string]any{"agentId": agents[i%len(agents)], "provider": md.provider, "model": md.model, "costCents": 1 + rng.Intn(400),
			"inputTokens": in, "cachedInputTokens": rng.Intn(in / 2), "outputTokens": 50 + rng.Intn(4000),
			"billingType": billing[i%len(billing)], "occurredAt": at.Format("2006-01-02T15:04:05.000Z")}
		if i%3 == 0 {
			m["issueId"] = issues[i%len(issues)]
		}
		if i%2 == 0 {
			m["projectId"] = projects[i%len(projects)]
		}
		bodies[i], _ = json.Marshal(m)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	url := h.URL + "/api/companies/" + company + "/cost-events"
	post := func(i int) error { return postCreated(client, url, bodies[i]) }
	require.NoError(b, post(0))
	if os.Getenv("COSTS_BENCH_PGLOG") != "" {
		_, err := h.Kernel.Pool.Exec(b.Context(), `ALTER SYSTEM SET log_min_duration_statement = 0`)
		require.NoError(b, err)
		_, err = h.Kernel.Pool.Exec(b.Context(), `SELECT pg_reload_conf()`)
		require.NoError(b, err)
	}
	cpu0 := treeCPU()
	b.ResetTimer()
	elapsed := postConcurrently(b, 16, post)
	cpu1 := treeCPU()
	if dst := os.Getenv("COSTS_BENCH_PGLOG"); dst != "" {
		var dir string
		require.NoError(b, h.Kernel.Pool.QueryRow(b.Context(), `SELECT current_setting('data_directory')`).Scan(&dir))
		raw, err := os.ReadFile(filepath.Join(dir, "log", "postgres.log"))
		require.NoError(b, err)
		require.NoError(b, os.WriteFile(dst, raw, 0o644))
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	var total time.Duration
	var parts []string
	for name, d := range cpu1 {
		d -= cpu0[name]
		total += d
		parts = append(parts, fmt.Sprintf("%s=%.2fms", name, float64(d.Microseconds())/1000/float64(b.N)))
	}
	sort.Strings(parts)
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "cpu-ms/event")
	b.Logf("%d events in %s; CPU per event: %s", b.N, elapsed.Round(time.Millisecond), strings.Join(parts, " "))
}

// treeCPU returns the user+system CPU time of this process and its descendants, summed
// per role: the keel extension key of an extension process, the command name otherwise.
// Processes that ended in between are not counted.
func treeCPU() map[string]time.Duration {
	type proc struct {
		ppid int
		name string
		cpu  time.Duration
	}
	procs := map[int]proc{}
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(raw)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < 0 {
			continue
		}
		f := strings.Fields(s[closing+2:])
		if len(f) < 13 {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		ppid, _ := strconv.Atoi(f[1])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		name := s[open+1 : closing]
		if env, err := os.ReadFile(filepath.Join(filepath.Dir(p), "environ")); err == nil {
			for _, kv := range strings.Split(string(env), "\x00") {
				if v, ok := strings.CutPrefix(kv, "KEEL_EXTENSION_ROLE="); ok {
					name = v
				}
			}
		}
		procs[pid] = proc{ppid: ppid, name: name, cpu: time.Duration(ut+st) * 10 * time.Millisecond}
	}
	self := os.Getpid()
	inTree := func(pid int) bool {
		for i := 0; pid > 1 && i < 64; i++ {
			if pid == self {
				return true
			}
			pid = procs[pid].ppid
		}
		return false
	}
	out := map[string]time.Duration{}
	for pid, p := range procs {
		if inTree(pid) {
			out[p.name] += p.cpu
		}
	}
	return out
}
