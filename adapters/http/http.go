// Package httpadapter is the first-party "http" adapter (extension adapter.http): it runs
// an agent's heartbeat by sending one JSON request to the agent's URL. The remote agent
// holds its own agent API key and calls keel back; no run JWT is handed over.
package httpadapter

import (
	"context"
	"net/http"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// Type is the adapter type.
const Type = "http"

// Key is the extension key (adapter.ExtensionKey(Type)).
const Key = "adapter.http"

// Version is the extension's version.
const Version = "0.1.0"

func init() { extensions.Register(Key, func() sdk.Extension { return New() }) }

// Adapter is the http adapter extension.
type Adapter struct {
	host   *sdk.Host
	log    hclog.Logger
	client *http.Client

	mu   sync.Mutex
	runs map[string]context.CancelCauseFunc
}

// New returns an unconfigured adapter.
func New() *Adapter {
	return &Adapter{log: hclog.NewNullLogger(), client: &http.Client{}, runs: map[string]context.CancelCauseFunc{}}
}

// Manifest describes the adapter: kind adapter, the four adapter methods, and the one
// method it calls, agents.runEvents. The adapterConfig schema is served by info, not as the
// extension's own config schema (the extension itself takes no config).
func (a *Adapter) Manifest() *sdk.Manifest {
	return &sdk.Manifest{
		Key:          Key,
		Version:      Version,
		Kind:         sdk.KindAdapter,
		DisplayName:  "HTTP adapter",
		Description:  "Runs an agent's heartbeat by sending one JSON request to the agent's URL.",
		Runtime:      sdk.Runtime{Kind: sdk.RuntimeProcess},
		Capabilities: []string{sdk.CapCalls},
		Provides: []sdk.Method{
			{Name: adapter.MethodExecute, Description: "Invoke the agent's URL for one heartbeat run."},
			{Name: adapter.MethodCancel, Description: "Abort a run's request in flight."},
			{Name: adapter.MethodTestEnvironment, Description: "Check that the URL is valid."},
			{Name: adapter.MethodInfo, Description: "Describe the adapter and its config schema."},
		},
		Uses: []string{adapter.RunEventsMethod},
	}
}

// Configure keeps the host services.
func (a *Adapter) Configure(_ context.Context, env *sdk.Env) error {
	a.host = env.Host
	if env.Logger != nil {
		a.log = env.Logger
	}
	return nil
}

// CallMethod serves the adapter methods.
func (a *Adapter) CallMethod(ctx context.Context, call *sdk.MethodCall) (any, error) {
	return adapter.Dispatch(ctx, Key, a, call)
}

// TestEnvironment implements adapter.Runner.
func (a *Adapter) TestEnvironment(req *adapter.TestEnvironmentRequest) *adapter.TestEnvironmentResult {
	return testEnvironment(req)
}

// Info implements adapter.Runner.
func (a *Adapter) Info() *adapter.Info { return Info() }

// Info describes the http adapter.
func Info() *adapter.Info {
	return &adapter.Info{Type: Type, Label: "HTTP", Models: []adapter.Model{}, ConfigSchema: []byte(ConfigSchema)}
}

// Stop aborts every request in flight.
func (a *Adapter) Stop(context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, cancel := range a.runs {
		cancel(errCancelled)
	}
	return nil
}

// Cancel aborts a run's request; it reports whether one was in flight (adapter.Runner).
func (a *Adapter) Cancel(runID string) bool {
	a.mu.Lock()
	cancel := a.runs[runID]
	a.mu.Unlock()
	if cancel == nil {
		return false
	}
	cancel(errCancelled)
	return true
}

var (
	_ sdk.Configurer     = (*Adapter)(nil)
	_ sdk.MethodProvider = (*Adapter)(nil)
	_ sdk.Stopper        = (*Adapter)(nil)
)

var _ adapter.Runner = (*Adapter)(nil)
