package metrics

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/keelhq/keel/sdk"
)

// ExtensionState is one loaded extension as the supervisor sees it.
type ExtensionState struct {
	Key      string
	Status   string
	Restarts int
	Running  bool
}

// ExtensionStates lists the loaded extensions (the supervisor implements it).
type ExtensionStates interface {
	ExtensionStates() []ExtensionState
}

// extensionCollector reports extension states and restarts at scrape time.
type extensionCollector struct {
	src      ExtensionStates
	state    *prometheus.Desc
	up       *prometheus.Desc
	restarts *prometheus.Desc
}

// NewExtensionCollector reports keel_extension_state, keel_extension_up and
// keel_extension_restarts_total from src.
func NewExtensionCollector(src ExtensionStates) prometheus.Collector {
	return &extensionCollector{
		src:      src,
		state:    prometheus.NewDesc("keel_extension_state", "The registry status of each loaded extension (1 for its current status).", []string{"extension", "status"}, nil),
		up:       prometheus.NewDesc("keel_extension_up", "1 when the extension has a live client (process or wasm module), else 0.", []string{"extension"}, nil),
		restarts: prometheus.NewDesc("keel_extension_restarts_total", "Restarts of a crashed extension since the host started.", []string{"extension"}, nil),
	}
}

func (c *extensionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.state
	ch <- c.up
	ch <- c.restarts
}

func (c *extensionCollector) Collect(ch chan<- prometheus.Metric) {
	for _, e := range c.src.ExtensionStates() {
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, 1, e.Key, e.Status)
		up := 0.0
		if e.Running {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, e.Key)
		ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(e.Restarts), e.Key)
	}
}

// QueueDepth counts waiting jobs by kind and state (the job queue implements it).
type QueueDepth interface {
	Depth(ctx context.Context) (map[[2]string]int64, error)
}

type queueCollector struct {
	q     QueueDepth
	depth *prometheus.Desc
}

// NewQueueCollector reports keel_job_queue_depth{kind,state} from one count query per scrape.
func NewQueueCollector(q QueueDepth) prometheus.Collector {
	return &queueCollector{q: q, depth: prometheus.NewDesc("keel_job_queue_depth",
		"Jobs not yet finished, by kind and state (available, scheduled, retryable, running).", []string{"kind", "state"}, nil)}
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.depth }

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	depth, err := c.q.Depth(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.depth, err)
		return
	}
	for k, n := range depth {
		ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
}

// NewPoolCollector reports a database pool's use under the owner label (see sdk.NewPoolCollector).
func NewPoolCollector(owner string, pool *pgxpool.Pool) prometheus.Collector {
	return sdk.NewPoolCollector(owner, pool)
}

// ExtensionMetricsSource returns the encoded metrics of every running extension, by key
// (the supervisor implements it; see sdk.Metrics).
type ExtensionMetricsSource interface {
	ExtensionMetrics(ctx context.Context) map[string][]byte
}

// ExtensionGatherer gathers the extensions' own metrics at scrape time, adding an extension
// label to every sample.
type ExtensionGatherer struct{ Source ExtensionMetricsSource }

// Gather implements prometheus.Gatherer.
func (g ExtensionGatherer) Gather() ([]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	byName := map[string]*dto.MetricFamily{}
	var order []string
	var errs []error
	for key, data := range g.Source.ExtensionMetrics(ctx) {
		fams, err := DecodeFamilies(data)
		if err != nil {
			errs = append(errs, fmt.Errorf("error decoding the metrics of %s: %w", key, err))
			continue
		}
		for _, f := range fams {
			for _, m := range f.Metric {
				m.Label = append(m.Label, &dto.LabelPair{Name: proto.String("extension"), Value: proto.String(key)})
			}
			if have, ok := byName[f.GetName()]; ok {
				if have.GetType() != f.GetType() {
					errs = append(errs, fmt.Errorf("metric %s of %s has another type than the same metric of another extension", f.GetName(), key))
					continue
				}
				have.Metric = append(have.Metric, f.Metric...)
				continue
			}
			byName[f.GetName()] = f
			order = append(order, f.GetName())
		}
	}
	out := make([]*dto.MetricFamily, 0, len(order))
	for _, name := range order {
		out = append(out, byName[name])
	}
	return out, errors.Join(errs...)
}

// EncodeFamilies encodes metric families in the delimited protobuf exposition format, the
// form extensions hand their metrics to the host in.
func EncodeFamilies(fams []*dto.MetricFamily) ([]byte, error) {
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeProtoDelim))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			return nil, fmt.Errorf("error encoding metric %s: %w", f.GetName(), err)
		}
	}
	return buf.Bytes(), nil
}

// DecodeFamilies decodes what EncodeFamilies encoded.
func DecodeFamilies(data []byte) ([]*dto.MetricFamily, error) {
	dec := expfmt.NewDecoder(bytes.NewReader(data), expfmt.NewFormat(expfmt.TypeProtoDelim))
	var out []*dto.MetricFamily
	for {
		f := &dto.MetricFamily{}
		if err := dec.Decode(f); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		out = append(out, f)
	}
}
