// Package metrics is keel's Prometheus instrumentation: one registry per host holding the
// HTTP, extension, job queue and database pool metrics, the process and Go runtime
// collectors, and the metrics extensions report through the SDK (gathered at scrape time).
// Every method is safe on a nil *Metrics, so callers that run without metrics need no checks.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds the host's collectors.
type Metrics struct {
	reg      *prometheus.Registry
	gatherer prometheus.Gatherer

	httpDuration *prometheus.HistogramVec
	hopDuration  *prometheus.HistogramVec
	jobDuration  *prometheus.HistogramVec
	jobWait      *prometheus.HistogramVec
}

// latencyBuckets span a cached read (a fraction of a millisecond) to a slow agent call.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// New returns the host's metrics with the process and Go runtime collectors registered.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		reg: reg,
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "keel_http_request_duration_seconds",
			Help:    "HTTP requests by route template, status and owner (the _count is the number of requests).",
			Buckets: latencyBuckets,
		}, []string{"route", "status", "owner"}),
		hopDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "keel_extension_hop_duration_seconds",
			Help:    "Round trips from the host into an extension by kind (request, call, job, event) and outcome.",
			Buckets: latencyBuckets,
		}, []string{"extension", "kind", "outcome"}),
		jobDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "keel_job_duration_seconds",
			Help:    "Time working a job, by kind (extension/job key, or event:extension for event deliveries) and outcome.",
			Buckets: latencyBuckets,
		}, []string{"kind", "outcome"}),
		jobWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "keel_job_wait_seconds",
			Help:    "Time from a job being due to a worker picking it up, by kind.",
			Buckets: latencyBuckets,
		}, []string{"kind"}),
	}
	reg.MustRegister(m.httpDuration, m.hopDuration, m.jobDuration, m.jobWait,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.gatherer = reg
	return m
}

// Register adds collectors (extension states, queue depth, pools) to the registry.
func (m *Metrics) Register(cs ...prometheus.Collector) error {
	if m == nil {
		return nil
	}
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// AddGatherer merges another gatherer (the extensions' metrics) into what /metrics serves.
func (m *Metrics) AddGatherer(g prometheus.Gatherer) {
	if m == nil {
		return
	}
	m.gatherer = prometheus.Gatherers{m.gatherer, g}
}

// Handler serves the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Gatherer returns everything /metrics serves.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.gatherer }

// ObserveRequest records one HTTP request. route is the route template ("GET /api/health"),
// or "unmatched" for paths no route serves.
func (m *Metrics) ObserveRequest(route, owner string, status int, d time.Duration) {
	if m == nil {
		return
	}
	m.httpDuration.WithLabelValues(route, statusText(status), owner).Observe(d.Seconds())
}

// ObserveHop records one host-to-extension round trip.
func (m *Metrics) ObserveHop(extension, kind string, d time.Duration, err error) {
	if m == nil {
		return
	}
	m.hopDuration.WithLabelValues(extension, kind, outcome(err)).Observe(d.Seconds())
}

// ObserveJob records one worked job: wait is from due to pick-up, d the work itself.
func (m *Metrics) ObserveJob(kind string, wait, d time.Duration, err error) {
	if m == nil {
		return
	}
	m.jobWait.WithLabelValues(kind).Observe(max(wait, 0).Seconds())
	m.jobDuration.WithLabelValues(kind, outcome(err)).Observe(d.Seconds())
}

func outcome(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// statusTexts avoids an allocation per request for the common statuses.
var statusTexts = func() map[int]string {
	out := map[int]string{}
	for s := 100; s < 600; s++ {
		out[s] = strconv.Itoa(s)
	}
	return out
}()

func statusText(s int) string {
	if t, ok := statusTexts[s]; ok {
		return t
	}
	return strconv.Itoa(s)
}
