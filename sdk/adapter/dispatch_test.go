package adapter_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// recorder is a Runner that records what Dispatch hands it.
type recorder struct{ executed, cancelled string }

func (r *recorder) Execute(_ context.Context, req *adapter.ExecuteRequest) (*adapter.ExecuteResult, error) {
	r.executed = req.RunID
	return &adapter.ExecuteResult{Status: adapter.StatusSucceeded}, nil
}

func (r *recorder) Cancel(runID string) bool { r.cancelled = runID; return runID == "live" }

func (r *recorder) TestEnvironment(*adapter.TestEnvironmentRequest) *adapter.TestEnvironmentResult {
	return &adapter.TestEnvironmentResult{OK: true}
}

func (r *recorder) Info() *adapter.Info { return &adapter.Info{Type: "rec"} }

func TestDispatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method, input string
		want          any
		wantStatus    int
		check         func(t *testing.T, r *recorder)
	}{
		{method: adapter.MethodExecute, input: `{"runId":"r1"}`, want: &adapter.ExecuteResult{Status: adapter.StatusSucceeded},
			check: func(t *testing.T, r *recorder) { require.Equal(t, "r1", r.executed) }},
		{method: adapter.MethodExecute, input: `{}`, wantStatus: http.StatusBadRequest},
		{method: adapter.MethodExecute, input: `{"runId":5}`, wantStatus: http.StatusBadRequest},
		{method: adapter.MethodCancel, input: `{"runId":"live"}`, want: &adapter.CancelResult{Cancelled: true},
			check: func(t *testing.T, r *recorder) { require.Equal(t, "live", r.cancelled) }},
		{method: adapter.MethodCancel, input: `{"runId":"gone"}`, want: &adapter.CancelResult{}},
		{method: adapter.MethodTestEnvironment, input: `{"config":{}}`, want: &adapter.TestEnvironmentResult{OK: true}},
		{method: adapter.MethodInfo, want: &adapter.Info{Type: "rec"}},
		{method: "models", wantStatus: http.StatusNotImplemented},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.input, func(t *testing.T) {
			t.Parallel()
			r := &recorder{}
			out, err := adapter.Dispatch(context.Background(), "adapter.rec", r,
				&sdk.MethodCall{Method: tc.method, Input: json.RawMessage(tc.input)})
			if tc.wantStatus != 0 {
				var e *sdk.Error
				require.True(t, errors.As(err, &e), "want an API error, got %v", err)
				require.Equal(t, tc.wantStatus, e.Status)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, out)
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}
