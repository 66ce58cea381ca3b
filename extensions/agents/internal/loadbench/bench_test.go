package loadbench_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/adapters/process"
	_ "github.com/keelhq/keel/extensions/agents"
	_ "github.com/keelhq/keel/extensions/routines"
	_ "github.com/keelhq/keel/extensions/work"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the benchmarks; when the host re-executes this binary as an extension,
// sdktest.Main serves the extension instead.
func TestMain(m *testing.M) { sdktest.Main(m) }

// BenchmarkRunCapacity holds fifty agents in ten-minute runs (process agents running
// sleep 600, the instance cap raised to 60) on one node with sixteen queue workers and
// measures what still moves beside them: a 51st agent's wake to its run running with a
// process, the wake's answer, another extension's job (a routines tick enqueued on demand)
// from enqueue to completed, event
// deliveries (issue.updated to the routines extension) from insert to completed, the
// routines schedule tick (an interval job every 20 s) from its due time to its start, and
// the longest wait of any queue job for a worker while the runs execute.
func BenchmarkRunCapacity(b *testing.B) {
	b.Setenv("SERVICE_HEARTBEAT_MAX_CONCURRENT_RUNS", "60")
	h := sdktest.Start(b, sdktest.Options{Builtins: true})
	ctx := context.Background()
	company := h.CreateCompany("Capacity Bench")
	newAgent := func(name string) string {
		res := h.Do("POST", "/api/companies/"+company+"/agents", map[string]any{
			"name": name, "role": "engineer", "adapterType": "process",
			"adapterConfig": map[string]any{"command": "/bin/sleep", "args": []string{"600"}},
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
	running := func(runID string) bool {
		run := h.Do("GET", "/api/heartbeat-runs/"+runID, nil).Map(b)
		return run["status"] == "running" && run["processPid"] != nil
	}
	waitFor := func(what string, limit time.Duration, cond func() bool) {
		deadline := time.Now().Add(limit)
		for !cond() {
			if time.Now().After(deadline) {
				b.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

	var agents []string
	for i := range 51 {
		agents = append(agents, newAgent(fmt.Sprintf("Coder %d", i)))
	}
	var runs []string
	for _, a := range agents[:50] {
		runs = append(runs, wakeRun(a))
	}
	for _, id := range runs {
		waitFor("run "+id+" to run", 2*time.Minute, func() bool { return running(id) })
	}
	loaded := time.Now()

	t0 := time.Now()
	late := wakeRun(agents[50])
	answered := time.Since(t0)
	waitFor("the 51st run", time.Minute, func() bool { return running(late) })
	b.ReportMetric(ms(time.Since(t0)), "51st-wake-to-running-ms")
	b.ReportMetric(ms(answered), "wake-answer-ms")
	runs = append(runs, late)

	jobState := func(id string) string {
		var state string
		_ = h.Kernel.Pool.QueryRow(ctx, `SELECT state FROM river.river_job WHERE id = $1`, id).Scan(&state)
		return state
	}
	t0 = time.Now()
	job, err := h.Queue.Enqueue(ctx, "routines", &hostv1.EnqueueRequest{JobKey: "tick", MaxAttempts: 1})
	require.NoError(b, err)
	waitFor("the queued job", time.Minute, func() bool { return jobState(job.JobId) == "completed" })
	b.ReportMetric(ms(time.Since(t0)), "extension-job-ms")

	res := h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "An event under load"})
	require.Less(b, res.Status, 300, "%s", res.Body)
	issueID := res.Map(b)["id"].(string)
	t0 = time.Now()
	res = h.Do("PATCH", "/api/issues/"+issueID, map[string]any{"title": "An event under load, renamed"})
	require.Less(b, res.Status, 300, "%s", res.Body)
	var deliveries int
	var slowest float64
	waitFor("event deliveries", time.Minute, func() bool {
		var pending int
		err := h.Kernel.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'completed'), count(*) FILTER (WHERE state <> 'completed'),
			coalesce(max(extract(epoch FROM finalized_at - created_at)) FILTER (WHERE state = 'completed'), 0)
			FROM river.river_job WHERE kind = 'keel_event_delivery' AND created_at >= $1`, t0).Scan(&deliveries, &pending, &slowest)
		return err == nil && deliveries > 0 && pending == 0
	})
	b.ReportMetric(slowest*1000, "event-delivery-max-ms")

	// The routines schedule tick runs every 20 s: wait for one while the runs hold on.
	var tickLag float64
	waitFor("a routines tick", time.Minute, func() bool {
		err := h.Kernel.Pool.QueryRow(ctx, `SELECT extract(epoch FROM attempted_at - scheduled_at) FROM river.river_job
			WHERE kind = 'keel_extension_job' AND args->>'extension' = 'routines' AND args->>'key' = 'tick'
			AND created_at >= $1 AND attempted_at IS NOT NULL ORDER BY id LIMIT 1`, loaded).Scan(&tickLag)
		return err == nil
	})
	b.ReportMetric(tickLag*1000, "routine-tick-lag-ms")

	var maxWait float64
	var jobs int
	require.NoError(b, h.Kernel.Pool.QueryRow(ctx, `SELECT count(*), coalesce(max(extract(epoch FROM attempted_at - greatest(scheduled_at, created_at))), 0)
		FROM river.river_job WHERE created_at >= $1 AND attempted_at IS NOT NULL`, loaded).Scan(&jobs, &maxWait))
	b.ReportMetric(maxWait*1000, "queue-pickup-max-ms")
	b.ReportMetric(float64(jobs), "queue-jobs")
	for _, id := range runs {
		require.True(b, running(id), "run %s still running", id)
	}
	for _, id := range runs {
		h.Do("POST", "/api/heartbeat-runs/"+id+"/cancel", nil)
	}
}
