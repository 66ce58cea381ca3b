package agents_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runMetric reads one heartbeat-run sample of the agents extension from GET /metrics.
func runMetric(t *testing.T, h *sdktest.Host, name string, labels map[string]string) float64 {
	t.Helper()
	res := h.Do("GET", "/metrics", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(res.Body))
	require.NoError(t, err)
	f := fams[name]
	if f == nil {
		return 0
	}
	total := 0.0
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return total
}

// TestRunMetricsAndShutdown counts heartbeat runs by status and adapter on GET /metrics
// (reported by the agents extension through the SDK), then stops the host under a running
// run: the shutdown says what it waits for and the run is recorded as interrupted.
func TestRunMetricsAndShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the host to stop")
	}
	t.Parallel()
	logs := &lockedBuffer{}
	h := sdktest.Start(t, sdktest.Options{Builtins: true,
		Logger: hclog.New(&hclog.LoggerOptions{Name: "keel", Level: hclog.Info, Output: logs, JSONFormat: true})})
	company := h.CreateCompany("Metrics Co")

	quick := hbAgent(t, h, company, "Quick", "fake", nil, nil)
	waitRun(t, h, wake(t, h, quick.ID, nil)["id"].(string), 30*time.Second, "succeeded")
	sdktest.WaitFor(t, 10*time.Second, func() bool {
		return runMetric(t, h, "keel_heartbeat_runs_finished_total",
			map[string]string{"status": "succeeded", "adapter": "fake", "extension": "agents"}) == 1
	}, "the succeeded run to be counted")

	slow := hbAgent(t, h, company, "Slow", "fake", map[string]any{"sleepMs": 120000}, nil)
	runID := wake(t, h, slow.ID, nil)["id"].(string)
	waitRun(t, h, runID, 20*time.Second, "running")
	sdktest.WaitFor(t, 20*time.Second, func() bool { return getRun(t, h, runID)["processPid"] != nil }, "the run to execute")
	require.Equal(t, 1.0, runMetric(t, h, "keel_heartbeat_runs_executing", map[string]string{"adapter": "fake", "extension": "agents"}))

	began := time.Now()
	h.Stop(context.Background())
	t.Logf("stopped in %s with one run executing", time.Since(began).Round(time.Millisecond))
	require.Contains(t, logs.String(), `"shutting down: waiting for 1 run and `)
	require.Contains(t, logs.String(), `, up to 10 s"`)
	conn, err := pgx.Connect(context.Background(), h.DatabaseURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var status string
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT status FROM ext_agents.heartbeat_runs WHERE id = $1`, runID).Scan(&status))
	require.Equal(t, "interrupted", status)
	require.False(t, strings.Contains(logs.String(), `"error stopping job queue"`))
}
