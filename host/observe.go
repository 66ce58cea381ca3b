package host

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/keelhq/keel/host/metrics"
	"github.com/keelhq/keel/kernel"
)

// NewLogger returns keel's logger for cfg: text lines, or one JSON object per line with
// SERVICE_LOG_FORMAT=json, at SERVICE_LOG_LEVEL, written to out (stderr when nil).
func NewLogger(cfg Config, out io.Writer) hclog.Logger {
	if out == nil {
		out = os.Stderr
	}
	return hclog.New(&hclog.LoggerOptions{
		Name: "keel", Level: hclog.LevelFromString(cfg.LogLevel), Output: out,
		JSONFormat: cfg.LogFormat == "json",
	})
}

// Job queue states for readiness (Host.queueState).
const (
	queueStarting int32 = iota
	queueStarted
	queueFailed
)

// requestObserver feeds every finished request to the HTTP metrics and the access log.
type requestObserver struct {
	m   *metrics.Metrics
	log hclog.Logger
	// access is false when the access log's level is off, so no line is built.
	access bool
}

func newRequestObserver(m *metrics.Metrics, log hclog.Logger) *requestObserver {
	return &requestObserver{m: m, log: log, access: log.IsInfo()}
}

// ObserveRequest implements kernel.RequestObserver.
func (o *requestObserver) ObserveRequest(rec *kernel.RequestRecord) {
	route, owner := rec.Route, rec.Owner
	if route == "" {
		// Paths no route serves are one series, whatever they are.
		route, owner = "unmatched", "kernel"
	}
	o.m.ObserveRequest(route, owner, rec.Status, rec.Duration)
	if !o.access {
		return
	}
	actor := rec.ActorKind
	if actor == "" {
		actor = "none"
	}
	o.log.Info("request", "request_id", rec.RequestID, "actor", actor, "method", rec.Method, "route", route,
		"path", rec.Path, "status", rec.Status, "duration_ms", float64(rec.Duration.Microseconds())/1000)
}

// setUpObservability registers the host's collectors and hooks metrics, the access log
// and readiness into the kernel. Call it before the kernel's app is built.
func (h *Host) setUpObservability() error {
	m := h.metrics
	if err := m.Register(
		metrics.NewExtensionCollector(h.Supervisor),
		metrics.NewQueueCollector(h.Queue),
		metrics.NewPoolCollector("kernel", h.Kernel.Pool),
	); err != nil {
		return fmt.Errorf("error registering metrics: %w", err)
	}
	m.AddGatherer(metrics.ExtensionGatherer{Source: h.Supervisor})
	h.Kernel.SetRequestObserver(newRequestObserver(m, h.log.Named("http")))
	h.Kernel.SetMetricsHandler(m.Handler())
	h.Kernel.AddReadinessCheck(func(ctx context.Context) []string {
		var out []string
		switch h.queueState.Load() {
		case queueStarting:
			out = append(out, "job queue is starting")
		case queueFailed:
			out = append(out, "job queue failed to start")
		}
		return append(out, h.Supervisor.NotReady(ctx)...)
	})
	return nil
}

// inFlight counts the heartbeat runs executing on this node (the agents extension reports
// them as keel_heartbeat_runs_executing) and the calls into extensions in flight.
func (h *Host) inFlight(ctx context.Context) (runs, calls int) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for _, data := range h.Supervisor.ExtensionMetrics(ctx) {
		fams, err := metrics.DecodeFamilies(data)
		if err != nil {
			continue
		}
		for _, f := range fams {
			if f.GetName() != "keel_heartbeat_runs_executing" {
				continue
			}
			for _, m := range f.Metric {
				runs += int(m.GetGauge().GetValue())
			}
		}
	}
	return runs, h.Supervisor.InFlight()
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// seconds writes a duration as the shutdown message does: "10 s".
func seconds(d time.Duration) string {
	return fmt.Sprintf("%g s", d.Seconds())
}
