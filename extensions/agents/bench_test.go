package agents_test

import (
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// BenchmarkHeartbeat reports the latency from POST /wakeup to the run being running for a
// process agent (command /bin/true), and how many runs per second the engine completes
// with ten such agents woken again as soon as their previous run has started.
func BenchmarkHeartbeat(b *testing.B) {
	h := sdktest.Start(b, sdktest.Options{Builtins: true})
	company := h.CreateCompany("Heartbeat Bench")
	newAgent := func(name string) string {
		res := h.Do("POST", "/api/companies/"+company+"/agents", map[string]any{
			"name": name, "role": "engineer", "adapterType": "process",
			"adapterConfig": map[string]any{"command": "/bin/true"},
		})
		require.Equal(b, http.StatusCreated, res.Status, "%s", res.Body)
		return res.Map(b)["id"].(string)
	}
	wakeRun := func(agentID string) string {
		res := h.Do("POST", "/api/agents/"+agentID+"/wakeup", map[string]any{"source": "on_demand"})
		require.Equal(b, http.StatusAccepted, res.Status, "%s", res.Body)
		id, _ := res.Map(b)["id"].(string)
		require.NotEmpty(b, id, "a run, not a skip: %s", res.Body)
		return id
	}
	status := func(runID string) string {
		s, _ := h.Do("GET", "/api/heartbeat-runs/"+runID, nil).Map(b)["status"].(string)
		return s
	}
	waitNot := func(runID string, states ...string) string {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			s := status(runID)
			found := false
			for _, st := range states {
				found = found || s == st
			}
			if !found {
				return s
			}
			time.Sleep(time.Millisecond)
		}
		b.Fatalf("run %s stayed in %v", runID, states)
		return ""
	}

	agent := newAgent("Latency")
	waitNot(wakeRun(agent), "queued", "running") // warm up: the process adapter starts lazily
	var lat []time.Duration
	for range 20 {
		t0 := time.Now()
		run := wakeRun(agent)
		waitNot(run, "queued")
		lat = append(lat, time.Since(t0))
		waitNot(run, "queued", "running")
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "wake-to-running-p50-ms")
	b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, "wake-to-running-p90-ms")

	var agents []string
	for i := range 10 {
		agents = append(agents, newAgent(fmt.Sprintf("Throughput %d", i)))
	}
	var runs sync.Map
	var started atomic.Int64
	window := 5 * time.Second
	t0 := time.Now()
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(t0) < window {
				run := wakeRun(a)
				runs.Store(run, true)
				started.Add(1)
				waitNot(run, "queued")
			}
		}()
	}
	wg.Wait()
	finished := 0
	runs.Range(func(k, _ any) bool {
		if waitNot(k.(string), "queued", "running") == "succeeded" {
			finished++
		}
		return true
	})
	elapsed := time.Since(t0)
	b.ReportMetric(float64(finished)/elapsed.Seconds(), "runs/s")
	b.ReportMetric(float64(started.Load()), "runs")
}
