// Package fakeadapter is a test adapter (extension adapter.fake) for the heartbeat engine's
// tests: execute streams a log line through agents.runEvents, optionally sleeps (honouring
// cancel), and answers with what the config asks for, echoing the request in resultJson.
// Test binaries blank-import it; it is never compiled into keel.
package fakeadapter

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// Key is the extension key.
const Key = "adapter.fake"

func init() {
	extensions.Register(Key, func() sdk.Extension { return &Adapter{runs: map[string]context.CancelFunc{}} })
}

// Config is the fake adapter's adapterConfig.
type Config struct {
	// SleepMs keeps the run executing this long (cancel ends it early).
	SleepMs int `json:"sleepMs"`
	// ExitCode is the reported exit code (non-zero fails the run).
	ExitCode int `json:"exitCode"`
	// Usage, cost and billing are reported as given.
	Usage                *adapter.Usage `json:"usage"`
	CostUSD              *float64       `json:"costUsd"`
	CacheAdjustedCostUSD *float64       `json:"cacheAdjustedCostUsd"`
	BillingType          string         `json:"billingType"`
	Provider             string         `json:"provider"`
	Model                string         `json:"model"`
	// NoJWT makes info report no local agent JWT support.
	NoJWT bool `json:"noJwt"`
	// Env is passed through (resolved by the engine).
	Env map[string]string `json:"env"`
	// TimeoutSec and GraceSec bound the run on the engine's side.
	TimeoutSec int `json:"timeoutSec"`
	GraceSec   int `json:"graceSec"`
}

// Adapter is the fake adapter.
type Adapter struct {
	host *sdk.Host
	mu   sync.Mutex
	runs map[string]context.CancelFunc
}

// Manifest describes the adapter.
func (a *Adapter) Manifest() *sdk.Manifest {
	return &sdk.Manifest{
		Key: Key, Version: "0.0.1", Kind: sdk.KindAdapter, DisplayName: "Fake adapter",
		Description:  "Test adapter of the heartbeat engine.",
		Runtime:      sdk.Runtime{Kind: sdk.RuntimeProcess},
		Capabilities: []string{sdk.CapCalls},
		Provides: []sdk.Method{
			{Name: adapter.MethodExecute, Description: "Run a fake run."},
			{Name: adapter.MethodCancel, Description: "Cancel a fake run."},
			{Name: adapter.MethodTestEnvironment, Description: "Accept any config."},
			{Name: adapter.MethodInfo, Description: "Describe the fake adapter."},
		},
		Uses: []string{adapter.RunEventsMethod},
	}
}

// Configure keeps the host services.
func (a *Adapter) Configure(_ context.Context, env *sdk.Env) error {
	a.host = env.Host
	return nil
}

// CallMethod serves the adapter contract.
func (a *Adapter) CallMethod(ctx context.Context, call *sdk.MethodCall) (any, error) {
	return adapter.Dispatch(ctx, Key, a, call)
}

// Info implements adapter.Runner; FAKE_ADAPTER_NO_JWT turns off local agent JWTs.
func (a *Adapter) Info() *adapter.Info {
	return &adapter.Info{Type: "fake", Label: "Fake", Models: []adapter.Model{}, ConfigSchema: json.RawMessage(`{"type":"object"}`),
		SupportsLocalAgentJWT: os.Getenv("FAKE_ADAPTER_NO_JWT") == ""}
}

// Cancel implements adapter.Runner.
func (a *Adapter) Cancel(runID string) bool {
	a.mu.Lock()
	c, ok := a.runs[runID]
	a.mu.Unlock()
	if ok {
		c()
	}
	return ok
}

// TestEnvironment implements adapter.Runner: any config can run.
func (a *Adapter) TestEnvironment(*adapter.TestEnvironmentRequest) *adapter.TestEnvironmentResult {
	return &adapter.TestEnvironmentResult{OK: true, Checks: []adapter.Check{}}
}

func (a *Adapter) events(ctx context.Context, runID string, evs ...adapter.RunEvent) {
	_ = a.host.Call(ctx, adapter.RunEventsMethod, sdk.SystemActor(), "", &adapter.RunEventsRequest{RunID: runID, Events: evs}, nil)
}

// Execute implements adapter.Runner: it sleeps sleepMs (or until cancelled) and reports the
// configured usage and exit code.
func (a *Adapter) Execute(ctx context.Context, req *adapter.ExecuteRequest) (*adapter.ExecuteResult, error) {
	var cfg Config
	if len(req.Config) > 0 {
		if err := json.Unmarshal(req.Config, &cfg); err != nil {
			return nil, &sdk.Error{Status: http.StatusBadRequest, Message: "invalid fake config: " + err.Error()}
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.mu.Lock()
	a.runs[req.RunID] = cancel
	a.mu.Unlock()
	defer func() { a.mu.Lock(); delete(a.runs, req.RunID); a.mu.Unlock() }()

	now := time.Now()
	a.events(ctx, req.RunID,
		adapter.RunEvent{Seq: 1, Kind: "spawn", PID: os.Getpid(), At: now},
		adapter.RunEvent{Seq: 2, Kind: "log", Stream: "stdout", Text: fmt.Sprintf("hello from run %s\n", req.Env["SERVICE_RUN_ID"]), At: now},
		adapter.RunEvent{Seq: 3, Kind: "log", Stream: "stderr", Text: "a warning\n", At: now},
	)
	status := adapter.StatusSucceeded
	if cfg.SleepMs > 0 {
		select {
		case <-runCtx.Done():
			status = adapter.StatusCancelled
		case <-time.After(time.Duration(cfg.SleepMs) * time.Millisecond):
		}
	}
	echo, _ := json.Marshal(map[string]any{"env": req.Env, "config": json.RawMessage(req.Config), "context": req.Context,
		"agentName": req.AgentName, "authToken": req.AuthToken != ""})
	code := cfg.ExitCode
	res := &adapter.ExecuteResult{Status: status, ExitCode: &code, ResultJSON: echo, Usage: cfg.Usage, CostUSD: cfg.CostUSD,
		CacheAdjustedCostUSD: cfg.CacheAdjustedCostUSD, BillingType: cfg.BillingType, Provider: cfg.Provider, Model: cfg.Model,
		PID: os.Getpid()}
	if status == adapter.StatusSucceeded && code != 0 {
		res.Status, res.ErrorMessage = adapter.StatusFailed, fmt.Sprintf("Process exited with code %d", code)
	}
	a.events(context.WithoutCancel(ctx), req.RunID, adapter.RunEvent{Seq: 4, Kind: "log", Stream: "stdout", Text: "bye\n", At: time.Now()})
	return res, nil
}

var (
	_ sdk.Configurer     = (*Adapter)(nil)
	_ sdk.MethodProvider = (*Adapter)(nil)
)

var _ adapter.Runner = (*Adapter)(nil)
