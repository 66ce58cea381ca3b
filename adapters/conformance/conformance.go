// Package conformance is the shared test suite every adapter extension passes: it reaches
// the adapter through a real host, the way the heartbeat engine does, and checks the
// contract of sdk/adapter (info, execute, cancel, testEnvironment).
package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
	"github.com/keelhq/keel/sdktest"
)

// Subject describes the adapter under test and how to reach it.
type Subject struct {
	// Type is the adapter type ("process"); the suite calls "adapter.<type>.<method>".
	Type string
	// NewHost starts a host that loads the adapter (sdktest.Start with Builtins).
	NewHost func(t *testing.T) *sdktest.Host
	// Succeed is an adapterConfig whose run succeeds.
	Succeed json.RawMessage
	// Fail is an adapterConfig whose run fails (non-zero exit, error answer…).
	Fail json.RawMessage
	// Slow is an adapterConfig whose run lasts at least several seconds unless cancelled,
	// and stops promptly (within a few seconds) when cancelled.
	Slow json.RawMessage
}

// cancelDeadline is how long a cancelled run may take to report back.
const cancelDeadline = 10 * time.Second

// Run checks the adapter contract against one host started with s.NewHost. The checks run
// as parallel subtests.
func Run(t *testing.T, s Subject) {
	t.Helper()
	require.NotEmpty(t, s.Type, "subject type")
	require.NotNil(t, s.NewHost, "subject host")
	h := s.NewHost(t)
	c := &client{h: h, typ: s.Type, company: h.CreateCompany("Conformance " + s.Type)}
	WarmUp(t, h, s.Type)

	t.Run("info", func(t *testing.T) {
		t.Parallel()
		var info adapter.Info
		c.call(t, adapter.MethodInfo, struct{}{}, &info)
		require.Equal(t, s.Type, info.Type, "info.type")
		require.NotEmpty(t, info.Label, "info.label")
		require.NotNil(t, info.Models, "info.models must be a list, not null")
		require.NotEmpty(t, info.ConfigSchema, "info.configSchema")
		schema, err := sdk.CompileSchema(s.Type+"/adapterConfig", info.ConfigSchema)
		require.NoError(t, err, "info.configSchema must compile")
		for name, cfg := range map[string]json.RawMessage{"succeed": s.Succeed, "fail": s.Fail, "slow": s.Slow} {
			var v any
			require.NoError(t, json.Unmarshal(cfg, &v), "%s config", name)
			require.NoError(t, schema.Validate(v), "the %s config must satisfy info.configSchema", name)
		}
	})

	t.Run("execute succeeds", func(t *testing.T) {
		t.Parallel()
		res := c.execute(t, c.runID(), s.Succeed)
		require.Equal(t, adapter.StatusSucceeded, res.Status, "result: %+v", res)
		if res.ExitCode != nil {
			require.Zero(t, *res.ExitCode, "exitCode of a succeeded run")
		}
		require.False(t, res.TimedOut)
	})

	t.Run("execute fails", func(t *testing.T) {
		t.Parallel()
		res := c.execute(t, c.runID(), s.Fail)
		require.Equal(t, adapter.StatusFailed, res.Status, "result: %+v", res)
		require.NotEmpty(t, res.ErrorMessage, "a failed run says why")
	})

	t.Run("bad config fails the run", func(t *testing.T) {
		t.Parallel()
		for _, bad := range []string{`{}`, `[1,2]`, `"nonsense"`, `null`} {
			res := c.execute(t, c.runID(), json.RawMessage(bad))
			require.Equal(t, adapter.StatusFailed, res.Status, "config %s: %+v", bad, res)
			require.NotEmpty(t, res.ErrorMessage, "config %s: a failed run says why", bad)
		}
	})

	t.Run("cancel stops a slow run", func(t *testing.T) {
		t.Parallel()
		runID := c.runID()
		done := make(chan *adapter.ExecuteResult, 1)
		go func() {
			res, err := c.tryExecute(context.Background(), runID, s.Slow)
			if err != nil {
				t.Errorf("execute: %v", err)
			}
			done <- res
		}()
		var cancelledAt time.Time
		sdktest.WaitFor(t, 15*time.Second, func() bool {
			var out adapter.CancelResult
			c.call(t, adapter.MethodCancel, &adapter.CancelRequest{RunID: runID}, &out)
			if out.Cancelled {
				cancelledAt = time.Now()
			}
			return out.Cancelled
		}, "the slow run to be live and cancellable")
		select {
		case res := <-done:
			require.NotNil(t, res)
			require.Equal(t, adapter.StatusCancelled, res.Status, "result: %+v", res)
			require.Less(t, time.Since(cancelledAt), cancelDeadline)
		case <-time.After(cancelDeadline):
			t.Fatalf("a cancelled run did not return within %s", cancelDeadline)
		}
	})

	t.Run("cancel of an unknown run", func(t *testing.T) {
		t.Parallel()
		var out adapter.CancelResult
		c.call(t, adapter.MethodCancel, &adapter.CancelRequest{RunID: c.runID()}, &out)
		require.False(t, out.Cancelled)
	})

	t.Run("testEnvironment", func(t *testing.T) {
		t.Parallel()
		var good adapter.TestEnvironmentResult
		c.call(t, adapter.MethodTestEnvironment, &adapter.TestEnvironmentRequest{CompanyID: c.company, Config: s.Succeed}, &good)
		require.True(t, good.OK, "the succeed config passes: %+v", good)
		require.NotEmpty(t, good.Checks)
		for _, ch := range good.Checks {
			require.NotEmpty(t, ch.Name)
		}
		var bad adapter.TestEnvironmentResult
		c.call(t, adapter.MethodTestEnvironment, &adapter.TestEnvironmentRequest{CompanyID: c.company, Config: json.RawMessage(`{}`)}, &bad)
		require.False(t, bad.OK, "an empty config does not pass: %+v", bad)
		require.NotEmpty(t, bad.Checks)
		failing := false
		for _, ch := range bad.Checks {
			if !ch.OK {
				failing = true
				require.NotEmpty(t, ch.Message, "a failing check says why")
			}
		}
		require.True(t, failing, "a failed environment names a failing check")
	})
}

// WarmUp starts a lazy adapter with one info call, retried while the host answers that it
// is unavailable. The host's supervisor answers 503 to calls that arrive while a lazy
// extension is still starting, so tests that call an adapter concurrently warm it up first.
func WarmUp(t *testing.T, h *sdktest.Host, adapterType string) {
	t.Helper()
	c := &client{h: h, typ: adapterType}
	sdktest.WaitFor(t, 30*time.Second, func() bool {
		var info adapter.Info
		return c.invoke(context.Background(), adapter.MethodInfo, struct{}{}, &info) == nil
	}, "adapter "+adapterType+" to start")
}

// client calls one adapter's methods through the host as the kernel.
type client struct {
	h       *sdktest.Host
	typ     string
	company string
}

// runID returns a fresh run id.
func (c *client) runID() string {
	return uuid.NewString()
}

// invoke calls a method and decodes its result; an error answer is returned as an error.
func (c *client) invoke(ctx context.Context, method string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("error encoding input of %s: %w", method, err)
	}
	res, err := c.h.Supervisor.Invoke(ctx, "kernel", &hostv1.InvokeRequest{
		Method: adapter.Method(c.typ, method), InputJson: b, CompanyId: c.company,
		Actor: &extensionv1.Actor{Type: "system"},
	})
	if err != nil {
		return fmt.Errorf("error invoking %s: %w", method, err)
	}
	if res.Error != nil {
		return fmt.Errorf("%s answered an error: %d %s %s", method, res.Error.Status, res.Error.Code, res.Error.Message)
	}
	if err := json.Unmarshal(res.OutputJson, out); err != nil {
		return fmt.Errorf("error decoding result of %s (%s): %w", method, res.OutputJson, err)
	}
	return nil
}

func (c *client) call(t *testing.T, method string, in, out any) {
	t.Helper()
	require.NoError(t, c.invoke(context.Background(), method, in, out))
}

func (c *client) tryExecute(ctx context.Context, runID string, config json.RawMessage) (*adapter.ExecuteResult, error) {
	var res adapter.ExecuteResult
	req := &adapter.ExecuteRequest{
		RunID: runID, AgentID: "00000000-0000-4000-8000-00000000a6e7", AgentName: "Conformance",
		CompanyID: c.company, AdapterType: c.typ, Config: config,
		Env: map[string]string{"SERVICE_RUN_ID": runID, "SERVICE_COMPANY_ID": c.company},
	}
	if err := c.invoke(ctx, adapter.MethodExecute, req, &res); err != nil {
		return nil, err
	}
	switch res.Status {
	case adapter.StatusSucceeded, adapter.StatusFailed, adapter.StatusTimedOut, adapter.StatusCancelled:
	default:
		return nil, fmt.Errorf("execute answered status %q", res.Status)
	}
	return &res, nil
}

func (c *client) execute(t *testing.T, runID string, config json.RawMessage) *adapter.ExecuteResult {
	t.Helper()
	res, err := c.tryExecute(context.Background(), runID, config)
	require.NoError(t, err)
	return res
}
