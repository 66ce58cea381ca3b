package agents

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// runMetrics counts heartbeat runs for GET /metrics (through sdk.Env.Metrics).
type runMetrics struct {
	// finished counts runs reaching a terminal status on this node, by status and adapter.
	finished *prometheus.CounterVec
	// executing is the number of runs this node's engine is executing, by adapter.
	executing *prometheus.GaugeVec
}

// newRunMetrics registers the run metrics in reg (nil keeps them unregistered); a second
// Configure reuses the collectors registered by the first.
func newRunMetrics(reg prometheus.Registerer) *runMetrics {
	m := &runMetrics{
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keel_heartbeat_runs_finished_total",
			Help: "Heartbeat runs that reached a terminal status on this node, by status and adapter type.",
		}, []string{"status", "adapter"}),
		executing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "keel_heartbeat_runs_executing",
			Help: "Heartbeat runs this node is executing now, by adapter type.",
		}, []string{"adapter"}),
	}
	if reg == nil {
		return m
	}
	if err := reg.Register(m.finished); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			m.finished = are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	if err := reg.Register(m.executing); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			m.executing = are.ExistingCollector.(*prometheus.GaugeVec)
		}
	}
	return m
}

func adapterLabel(run *heartbeatRun) string {
	if run.AdapterType == nil || *run.AdapterType == "" {
		return "unknown"
	}
	return *run.AdapterType
}

// runFinished counts a run reaching status.
func (m *runMetrics) runFinished(run *heartbeatRun, status string) {
	if m == nil {
		return
	}
	m.finished.WithLabelValues(status, adapterLabel(run)).Inc()
}

// executingRun counts a run as executing until the returned function is called.
func (m *runMetrics) executingRun(run *heartbeatRun) func() {
	if m == nil {
		return func() {}
	}
	g := m.executing.WithLabelValues(adapterLabel(run))
	g.Inc()
	return g.Dec
}
