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

// adapterLabel is the adapter type of a run, "none" before one was chosen (a queued run).
func adapterLabel(adapterType string) string {
	if adapterType == "" {
		return "none"
	}
	return adapterType
}

// runFinished counts a run of the adapter type reaching status.
func (m *runMetrics) runFinished(status, adapterType string) {
	if m == nil {
		return
	}
	m.finished.WithLabelValues(status, adapterLabel(adapterType)).Inc()
}

// executingRun counts a run as executing until the returned function is called.
func (m *runMetrics) executingRun(adapterType string) func() {
	if m == nil {
		return func() {}
	}
	g := m.executing.WithLabelValues(adapterLabel(adapterType))
	g.Inc()
	return g.Dec
}
