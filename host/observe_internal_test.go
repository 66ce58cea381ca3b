package host

import (
	"io"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/keelhq/keel/host/metrics"
	"github.com/keelhq/keel/kernel"
)

// BenchmarkRequestObserver measures the per-request cost of the HTTP metrics and of the
// access log (JSON and text, to a discarding writer).
func BenchmarkRequestObserver(b *testing.B) {
	rec := &kernel.RequestRecord{RequestID: "6f1c0c3e-0000-4000-8000-000000000001", Method: "GET",
		Path: "/api/companies/6f1c0c3e-0000-4000-8000-000000000002", Route: "GET /api/companies/{companyId}",
		Owner: "kernel", ActorKind: "board", Status: 200, Duration: 1500 * time.Microsecond}
	for _, tc := range []struct {
		name  string
		level hclog.Level
		json  bool
	}{{"MetricsOnly", hclog.Warn, false}, {"MetricsAndJSONLog", hclog.Info, true}, {"MetricsAndTextLog", hclog.Info, false}} {
		b.Run(tc.name, func(b *testing.B) {
			log := hclog.New(&hclog.LoggerOptions{Level: tc.level, Output: io.Discard, JSONFormat: tc.json})
			o := newRequestObserver(metrics.New(), log)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				o.ObserveRequest(rec)
			}
		})
	}
}
