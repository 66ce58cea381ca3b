package sdk

import (
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"bytes"
)

// MetricsMethod is the reserved Call method with which the host gathers an extension's
// metrics at scrape time. The SDK answers it from Env.Metrics; extensions never see it,
// and no manifest can provide it, so other extensions cannot call it.
const MetricsMethod = "keel.metrics"

// metricsCaller is the caller the host sends MetricsMethod as.
const metricsCaller = "host"

// encodeMetrics gathers reg and encodes it in the delimited protobuf exposition format,
// wrapped as a JSON byte string for CallResponse.output_json.
func encodeMetrics(reg prometheus.Gatherer) ([]byte, error) {
	fams, err := reg.Gather()
	if err != nil {
		return nil, fmt.Errorf("error gathering metrics: %w", err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeProtoDelim))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			return nil, fmt.Errorf("error encoding metric %s: %w", f.GetName(), err)
		}
	}
	return json.Marshal(buf.Bytes())
}

// NewPoolCollector reports a database pool's use (keel_db_pool_*) under an owner label:
// "kernel" in the host, the extension key in an extension (sdk/migrate registers it for
// every extension database it opens).
func NewPoolCollector(owner string, pool *pgxpool.Pool) prometheus.Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"owner"}, nil)
	}
	return &poolCollector{owner: owner, pool: pool,
		acquired: d("keel_db_pool_acquired_connections", "Database connections in use, by owner."),
		idle:     d("keel_db_pool_idle_connections", "Idle database connections, by owner."),
		max:      d("keel_db_pool_max_connections", "The pool's connection limit, by owner."),
		waits:    d("keel_db_pool_empty_acquire_total", "Acquires that waited for a connection, by owner."),
		waitTime: d("keel_db_pool_acquire_wait_seconds_total", "Time spent waiting for a connection, by owner."),
	}
}

type poolCollector struct {
	owner                                string
	pool                                 *pgxpool.Pool
	acquired, idle, max, waits, waitTime *prometheus.Desc
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.acquired
	ch <- c.idle
	ch <- c.max
	ch <- c.waits
	ch <- c.waitTime
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.pool.Stat()
	ch <- prometheus.MustNewConstMetric(c.acquired, prometheus.GaugeValue, float64(st.AcquiredConns()), c.owner)
	ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, float64(st.IdleConns()), c.owner)
	ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(st.MaxConns()), c.owner)
	ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(st.EmptyAcquireCount()), c.owner)
	ch <- prometheus.MustNewConstMetric(c.waitTime, prometheus.CounterValue, st.EmptyAcquireWaitTime().Seconds(), c.owner)
}
