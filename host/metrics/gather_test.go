package metrics_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host/metrics"
	"github.com/keelhq/keel/sdk"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

type observedExt struct{}

func (observedExt) Manifest() *sdk.Manifest { return &sdk.Manifest{Key: "test.observed"} }

// TestGathererAddsExtensionLabel gathers what the SDK hands the host for two extensions:
// the same metric merges into one family with an extension label per extension.
func TestGathererAddsExtensionLabel(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	counter := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_things_total", Help: "Things."})
	reg.MustRegister(counter)
	counter.Add(3)
	srv := sdk.NewServer(observedExt{}, &sdk.Env{Metrics: reg})
	res, err := srv.Call(context.Background(), &extensionv1.CallRequest{Method: sdk.MetricsMethod, Caller: "host"})
	require.NoError(t, err)
	var data []byte
	require.NoError(t, json.Unmarshal(res.OutputJson, &data))
	fams, err := metrics.ExtensionGatherer{Source: fixedSource{"a.one": data, "b.two": data}}.Gather()
	require.NoError(t, err)
	require.Len(t, fams, 1)
	require.Len(t, fams[0].Metric, 2, "the same metric of two extensions merges into one family")
	seen := map[string]bool{}
	for _, m := range fams[0].Metric {
		for _, l := range m.Label {
			if l.GetName() == "extension" {
				seen[l.GetValue()] = true
			}
		}
	}
	require.Equal(t, map[string]bool{"a.one": true, "b.two": true}, seen)
}

type fixedSource map[string][]byte

func (f fixedSource) ExtensionMetrics(context.Context) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range f {
		out[k] = append([]byte(nil), v...)
	}
	return out
}
