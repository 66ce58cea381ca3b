package sdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdk"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

type observedExt struct{}

func (observedExt) Manifest() *sdk.Manifest { return &sdk.Manifest{Key: "test.observed"} }

func (observedExt) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sdk.LoggerFrom(r.Context()).Info("served")
		w.WriteHeader(http.StatusNoContent)
	})
}

func (observedExt) CallMethod(_ context.Context, c *sdk.MethodCall) (any, error) {
	return map[string]string{"method": c.Method}, nil
}

func TestObservability(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	counter := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_things_total", Help: "Things."})
	reg.MustRegister(counter)
	counter.Add(3)
	srv := sdk.NewServer(observedExt{}, &sdk.Env{
		Logger:  hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true}),
		Metrics: reg,
	})
	ctx := context.Background()

	t.Run("LoggerCarriesRequestID", func(t *testing.T) {
		res, err := srv.Handle(ctx, &extensionv1.HTTPRequest{Method: "GET", Path: "/x", RequestId: "req-42"})
		require.NoError(t, err)
		require.EqualValues(t, http.StatusNoContent, res.Status)
		var line map[string]any
		require.NoError(t, json.Unmarshal(logs.Bytes(), &line))
		require.Equal(t, "served", line["@message"])
		require.Equal(t, "req-42", line["request_id"])
	})

	t.Run("HostGathersMetrics", func(t *testing.T) {
		res, err := srv.Call(ctx, &extensionv1.CallRequest{Method: sdk.MetricsMethod, Caller: "host"})
		require.NoError(t, err)
		require.Nil(t, res.Error)
		var data []byte
		require.NoError(t, json.Unmarshal(res.OutputJson, &data))
		fams, err := decodeFamilies(data)
		require.NoError(t, err)
		require.Len(t, fams, 1)
		require.Equal(t, "test_things_total", fams[0].GetName())
		require.Equal(t, 3.0, fams[0].Metric[0].GetCounter().GetValue())
	})

	t.Run("OtherCallersReachTheExtension", func(t *testing.T) {
		res, err := srv.Call(ctx, &extensionv1.CallRequest{Method: sdk.MetricsMethod, Caller: "other.extension"})
		require.NoError(t, err)
		require.JSONEq(t, `{"method":"keel.metrics"}`, string(res.OutputJson))
	})
}

// decodeFamilies decodes the delimited protobuf exposition format the SDK hands the host
// (the host decodes it in host/metrics, which the SDK module does not import).
func decodeFamilies(data []byte) ([]*dto.MetricFamily, error) {
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
