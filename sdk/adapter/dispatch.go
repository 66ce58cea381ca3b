package adapter

import (
	"context"
	"net/http"

	"github.com/keelhq/keel/sdk"
)

// Runner is an adapter's implementation of the contract; Dispatch serves the contract's
// methods from it, so an adapter's CallMethod is one line.
type Runner interface {
	// Execute runs one heartbeat run to completion. Problems with the run (bad config, a
	// command that fails) are a failed result, not an error.
	Execute(ctx context.Context, req *ExecuteRequest) (*ExecuteResult, error)
	// Cancel stops an executing run and reports whether it was executing here.
	Cancel(runID string) bool
	// TestEnvironment checks that a config can run here.
	TestEnvironment(req *TestEnvironmentRequest) *TestEnvironmentResult
	// Info describes the adapter.
	Info() *Info
}

// Dispatch serves a call of the adapter contract (execute, cancel, testEnvironment, info)
// with r. Inputs are decoded with MethodCall.Bind; an execute without a run id is a 400; any other
// method is a 501 method_not_provided naming key, the adapter's extension key.
func Dispatch(ctx context.Context, key string, r Runner, call *sdk.MethodCall) (any, error) {
	switch call.Method {
	case MethodExecute:
		var req ExecuteRequest
		if err := call.Bind(&req); err != nil {
			return nil, err
		}
		if req.RunID == "" {
			return nil, &sdk.Error{Status: http.StatusBadRequest, Message: "runId is required"}
		}
		return r.Execute(ctx, &req)
	case MethodCancel:
		var req CancelRequest
		if err := call.Bind(&req); err != nil {
			return nil, err
		}
		return &CancelResult{Cancelled: r.Cancel(req.RunID)}, nil
	case MethodTestEnvironment:
		var req TestEnvironmentRequest
		if err := call.Bind(&req); err != nil {
			return nil, err
		}
		return r.TestEnvironment(&req), nil
	case MethodInfo:
		return r.Info(), nil
	}
	return nil, &sdk.Error{Status: http.StatusNotImplemented, Code: "method_not_provided", Message: key + " does not provide " + call.Method}
}
